"""What a traced process asked the driver for: frozen records of attribute sets, launches and graph kernel
nodes, as core/trace_read.py reads them from the collector's JSON lines, and the bounds of the numbers a
collector writes. Identical records (of one process or many) are one record with a count and the processes
that made it. Names stay as the driver gave them (mangled); demangling is the analysis's job.
"""

from __future__ import annotations

import enum
import os

from bisect_smem.core import input as reader
from bisect_smem.core.frozen import frozen

MAX_LINE_BYTES = 1 << 20  # a CUTLASS kernel's mangled name is a few KiB; a line is its name and some numbers
MAX_BYTES = 1 << 32  # shared memory sizes are 32-bit in every driver call
MAX_COUNT = 1 << 48  # a count no process reaches (2^48 launches at 1 µs each is nine years)
MAX_BLOCK_THREADS = 1 << 31
MAX_INT32 = 1 << 31  # an attribute's value is a C int


class FunctionAttribute(enum.IntEnum):
    """The shared-memory attributes of a kernel: cudaFuncAttribute and CUfunction_attribute share these
    numbers (driver_types.h, cuda.h)."""

    MaxDynamicSharedMemorySize = 8
    PreferredSharedMemoryCarveout = 9
    ClusterDimMustBeSet = 10
    RequiredClusterWidth = 11
    RequiredClusterHeight = 12
    RequiredClusterDepth = 13
    NonPortableClusterSizeAllowed = 14
    ClusterSchedulingPolicyPreference = 15


MAX_DYNAMIC_SHARED = FunctionAttribute.MaxDynamicSharedMemorySize
# CUresult and cudaError_t names of the results a shared-memory request meets (cuda.h, driver_types.h).
DRIVER_RESULTS = dict([(0, "success"), (1, "invalid value"), (98, "invalid device function"), (200, "invalid image"),
                       (209, "no binary for GPU"), (400, "invalid handle"), (500, "not found"),
                       (701, "launch out of resources"), (801, "not supported"), (912, "invalid cluster size")])
RUNTIME_RESULTS = dict([(0, "success"), (1, "invalid value"), (9, "invalid configuration"),
                        (98, "invalid device function"), (209, "no kernel image for device"),
                        (400, "invalid resource handle"), (701, "too many resources requested for launch"),
                        (801, "operation not supported"), (912, "invalid cluster size")])
OUT_OF_RESOURCES = 701  # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES and cudaErrorLaunchOutOfResources
INVALID_CLUSTER_SIZE = 912  # CUDA_ERROR_INVALID_CLUSTER_SIZE and cudaErrorInvalidClusterSize


class TraceError(reader.InputError):
    """A trace folder that cannot be read at all (exit 2): the text says which and why."""


class Skip(enum.Enum):
    """What the reader skipped, by kind: each is counted and said once, with where it was first seen."""

    NOT_JSON = "lines that are not JSON"
    TOO_LONG = f"lines longer than {MAX_LINE_BYTES} B"
    NOT_AN_EVENT = "lines that are no event of the collector"
    BAD_NUMBER = "lines with numbers no collector writes"
    UNKNOWN_EVENT = "lines of events this reader does not know"
    NOT_UTF8 = "lines with bytes that are not UTF-8 (read with U+FFFD in their place)"
    FOREIGN = "files that are not the collector's (their first line is no process event)"
    UNKNOWN_FORMAT = "files of a record format this reader does not know"
    UNREADABLE = "files that cannot be read"


def result_text(domain: str, code: int) -> str:
    """A call's result in words: the driver's or the runtime's name for ``code``."""
    names = DRIVER_RESULTS if domain == "driver" else RUNTIME_RESULTS
    return names.get(code, f"error {code}")


@frozen(slots=True)
class Process:
    """One traced process image: whether it was traced, and which libcupti it used."""

    pid: int
    ppid: int
    command: str
    collector: str  # "c" or "python"
    cupti_library: str
    cupti_found: str  # "already loaded", "BISECT_SMEM_CUPTI_LIBRARY", "none"
    untraced: str | None  # why nothing of it was recorded, or None
    image: int = 1  # 1 for PID.jsonl; N for PID.N.jsonl, a later program image (an exec) or a reused pid


@frozen(slots=True)
class AttributeSet:
    """cuFuncSetAttribute, cuKernelSetAttribute or cudaFuncSetAttribute of a shared-memory attribute: every
    identical call of the trace as one, ``count`` times, by the processes ``pids``."""

    pids: tuple[int, ...]
    api: str  # the call the program made (the runtime's where it made one)
    driver_api: str | None  # the driver call underneath, when recorded
    correlation: int  # of the first such call
    attribute: int
    value: int
    result: int  # of the call the program made
    result_domain: str  # "driver" or "runtime": whose numbering ``result`` uses
    static_bytes: int | None  # the kernel's static shared memory, as the driver reports it
    kernel: str | None  # mangled, as the driver reports it
    count: int = 1

    @property
    def attribute_name(self) -> str:
        """The attribute's name without its prefix (MaxDynamicSharedMemorySize)."""
        try:
            return FunctionAttribute(self.attribute).name
        except ValueError:
            return f"attribute {self.attribute}"

    @property
    def refused(self) -> bool:
        """The call did not succeed."""
        return self.result != 0


@frozen(slots=True)
class KernelAttributes:
    """A kernel's attributes as the driver reported them at a refusal (record format 2); None where not known
    (a runtime host stub, an older collector, or the driver call failed)."""

    max_dynamic_bytes: int | None  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    max_threads: int | None  # CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    registers: int | None  # CU_FUNC_ATTRIBUTE_NUM_REGS, per thread


UNKNOWN_ATTRIBUTES = KernelAttributes(None, None, None)


class LaunchKind(enum.Enum):
    """How a kernel was launched, or built into a graph."""

    LAUNCH = "launch"  # a launch call (into a stream under capture, too: ``captured``)
    GRAPH_NODE = "graph node"  # a kernel node as built (cuGraphAddKernelNode and the like): counted once
    GRAPH_REPLAY = "graph replay"  # a kernel node of an executable graph: counted once per cuGraphLaunch
    REFUSED_GRAPH_LAUNCH = "refused graph launch"  # a cuGraphLaunch refused: its node that asks the most


@frozen(slots=True)
class Launch:
    """A launch configuration or a graph kernel node: every identical one of the trace as one, ``count``
    times (the collector writes each configuration once and counts it), by the processes ``pids``."""

    pids: tuple[int, ...]
    api: str
    correlation: int  # of the first one written
    kernel: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]  # (0, 0, 0) when none was given at launch
    dynamic_bytes: int
    static_bytes: int | None
    result: int
    result_domain: str
    captured: bool  # launched into a stream under graph capture
    kind: LaunchKind
    count: int  # launches (for a node of an executable graph: its replays, 0 where it was never launched)
    attributes: KernelAttributes = UNKNOWN_ATTRIBUTES  # at a refusal
    graph_nodes: int = 0  # of a refused graph launch: the kernel nodes of its graph

    @property
    def refused(self) -> bool:
        """The launch (or node) did not succeed."""
        return self.result != 0

    @property
    def graph_node(self) -> bool:
        """A kernel node of a graph, not a launch call."""
        return self.kind is not LaunchKind.LAUNCH

    @property
    def threads(self) -> int:
        """Threads per block."""
        return self.block[0] * self.block[1] * self.block[2]


@frozen(slots=True)
class PastTable:
    """Launches the collector counted past its table of configurations: no line was written for them, so
    their requests are not known. ``kernel`` is None for launches that found the second table full too."""

    kernel: str | None
    count: int
    pids: tuple[int, ...]


@frozen(slots=True)
class Unwritable:
    """A collector that could not write its trace (notices.jsonl): the process, errno and the file it tried."""

    pid: int
    errno: int
    path: str
    command: str

    @property
    def reason(self) -> str:
        """The errno in words."""
        return os.strerror(self.errno) if self.errno > 0 else f"errno {self.errno}"


@frozen(slots=True)
class Skipped:
    """Lines or files of one kind that were skipped: how many, and where the first was."""

    kind: Skip
    count: int
    first: str


@frozen(slots=True)
class Trace:
    """Everything recorded under one --out folder."""

    processes: tuple[Process, ...]
    attribute_sets: tuple[AttributeSet, ...]
    launches: tuple[Launch, ...]
    torn_lines: int  # lines cut short by a process that was killed while writing
    past_table: tuple[PastTable, ...] = ()
    unwritable: tuple[Unwritable, ...] = ()
    skipped: tuple[Skipped, ...] = ()
