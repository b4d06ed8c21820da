"""What a traced process asked the driver for: frozen records of attribute sets, launches and graph kernel
nodes, read from the collector's JSON lines (one file per process image, record format 1 or 2) with every
input bounded.

A trace is read as a stream, line by line, and kept as counts: identical records (of one process or many)
become one record with a count and the processes that made it, so that reading takes memory of the distinct
requests, not of the lines. A line or a file that cannot be read is skipped and counted by kind
(``Trace.skipped``), never the end of the rest.

A runtime call (cudaFuncSetAttribute, cudaLaunchKernel) and the driver call it makes carry the same correlation
id: they are read as one record, named after the runtime call the program made, with the driver's kernel name
and static shared memory. Names stay as the driver gave them (mangled); demangling is the analysis's job.
"""

from __future__ import annotations

import enum
import json
import os
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from bisect_smem.core import input as reader

MAX_LINE_BYTES = 1 << 20  # a CUTLASS kernel's mangled name is a few KiB; a line is its name and some numbers
MAX_BYTES = 1 << 32  # shared memory sizes are 32-bit in every driver call
MAX_COUNT = 1 << 48  # a count no process reaches (2^48 launches at 1 µs each is nine years)
MAX_BLOCK_THREADS = 1 << 31
MAX_INT32 = 1 << 31  # an attribute's value is a C int
FORMATS = (1, 2)  # the record formats this reader knows
NOTICES_FILE = "notices.jsonl"  # written by the tool itself, beside the collectors' files
# Records kept waiting for the record of the other domain with their correlation id: the driver call a runtime
# call makes is written just before it by the same thread, so only other threads' lines come between them.
PENDING_RECORDS = 4096
UNNAMED_PAST_TABLE = "a kernel first seen past the table"


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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class PastTable:
    """Launches the collector counted past its table of configurations: no line was written for them, so
    their requests are not known. ``kernel`` is None for launches that found the second table full too."""

    kernel: str | None
    count: int
    pids: tuple[int, ...]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Skipped:
    """Lines or files of one kind that were skipped: how many, and where the first was."""

    kind: Skip
    count: int
    first: str


@dataclass(frozen=True)
class Trace:
    """Everything recorded under one --out folder."""

    processes: tuple[Process, ...]
    attribute_sets: tuple[AttributeSet, ...]
    launches: tuple[Launch, ...]
    torn_lines: int  # lines cut short by a process that was killed while writing
    past_table: tuple[PastTable, ...] = ()
    unwritable: tuple[Unwritable, ...] = ()
    skipped: tuple[Skipped, ...] = ()


class _Bad(Exception):
    """A line the reader refuses: its kind."""

    def __init__(self, kind: Skip) -> None:
        super().__init__(kind.value)
        self.kind = kind


def read_trace(folder: Path) -> Trace:
    """Every collector file of ``folder`` (``*.jsonl``), read line by line; lines and files that cannot be
    read are skipped and counted. A TraceError only where ``folder`` is not a folder that can be listed."""
    if not folder.is_dir():
        raise TraceError(f"{folder} is not a folder of traces")
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".jsonl"))
    except OSError as exc:
        raise TraceError(f"cannot list {folder}: {exc.strerror or exc}") from None
    tally = _Tally()
    for name in names:
        if name == NOTICES_FILE:
            tally.read_notices(folder / name)
        else:
            tally.read_file(folder / name)
    return tally.trace()


# ---- lines ----


def _lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None, bool]]:
    """(number, line, complete) of each line; a line longer than MAX_LINE_BYTES comes as None, read past
    without being kept; the last line without a newline comes with complete False."""
    number = 0
    while True:
        line = stream.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if line.endswith(b"\n"):
            yield number, line, True
        elif len(line) <= MAX_LINE_BYTES:
            yield number, line, False
        else:
            while line and not line.endswith(b"\n"):
                line = stream.readline(MAX_LINE_BYTES)
            yield number, None, True


def _parse(line: bytes | None) -> tuple[dict[str, Any], bool]:
    """The event of ``line``, and whether bytes that are not UTF-8 were replaced to read it. orjson parses
    where it is installed (four times faster); the standard parser reads whatever orjson refuses (bytes that
    are not UTF-8, NaN), so that what is read is the same either way: an integer beyond 64 bits that orjson
    reads as a float is refused as a number no collector writes, as the standard parser's int is."""
    if line is None:
        raise _Bad(Skip.TOO_LONG)
    replaced = False
    try:
        value = _fast_loads(line)
    except Exception:  # noqa: BLE001 - whatever orjson refuses, the standard parser decides
        try:
            value = json.loads(line)
        except UnicodeDecodeError:
            replaced = True
            try:
                value = json.loads(line.decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                raise _Bad(Skip.NOT_JSON) from None
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            raise _Bad(Skip.NOT_JSON) from None
    if type(value) is not dict or type(value.get("event")) is not str:
        raise _Bad(Skip.NOT_AN_EVENT)
    return value, replaced


try:
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - the standard parser alone
    _fast_loads = json.loads


def _number(r: dict[str, Any], key: str, low: int, high: int, default: int | None = None) -> int:
    """``r[key]``, an integer within [low, high); ``default`` where it is absent (or null) and one is given."""
    value = r.get(key)
    if value is None and default is not None:
        return default
    if type(value) is not int or not low <= value < high:
        raise _Bad(Skip.BAD_NUMBER)
    return value


def _known(value: int) -> int | None:
    return None if value < 0 else value


NO_DIMS = (0, 0, 0)


def _dims(value: Any) -> tuple[int, int, int]:
    """Three non-negative 32-bit numbers (a grid, block or cluster); (0, 0, 0) where absent."""
    if value is None:
        return NO_DIMS
    if type(value) is not list or len(value) != 3:
        raise _Bad(Skip.NOT_AN_EVENT)
    x, y, z = value
    if type(x) is not int or type(y) is not int or type(z) is not int or not (
            0 <= x < MAX_BYTES and 0 <= y < MAX_BYTES and 0 <= z < MAX_BYTES):
        raise _Bad(Skip.BAD_NUMBER)
    return (x, y, z)


def _text(r: dict[str, Any], key: str, default: str = "") -> str:
    value = r.get(key)
    return value if isinstance(value, str) else default


def _name(r: dict[str, Any]) -> str | None:
    value = r.get("name")
    return value if isinstance(value, str) and value else None


# ---- one folder, kept as counts ----


class _Tally:
    """What the files of a folder hold, as counts per distinct record. Keys are plain tuples, hashed in C:
    a launch's key is Launch's fields less the processes, correlation and count, its kind as its value and its
    kernel attributes as a tuple."""

    def __init__(self) -> None:
        self.processes: list[Process] = []
        self.attributes: dict[tuple[Any, ...], list[Any]] = {}  # key -> [count, pids, first correlation]
        self.launches: dict[tuple[Any, ...], list[Any]] = {}
        self.past_table: dict[str | None, list[Any]] = {}  # kernel -> [count, pids]
        self.unwritable: list[Unwritable] = []
        self.skipped: dict[Skip, list[Any]] = {}  # kind -> [count, first where]
        self.torn = 0

    def skip(self, kind: Skip, where: str, count: int = 1) -> None:
        seen = self.skipped.setdefault(kind, [0, where])
        seen[0] += count

    def read_file(self, path: Path) -> None:
        try:
            reader.check_regular(path)
            with open(path, "rb", buffering=1 << 20) as stream:
                _File(self, path.name).read(stream)
        except (OSError, reader.InputError):
            self.skip(Skip.UNREADABLE, path.name)

    def read_notices(self, path: Path) -> None:
        try:
            reader.check_regular(path)
            with open(path, "rb") as stream:
                for number, line, complete in _lines(stream):
                    if not complete:
                        self.torn += 1
                        continue
                    where = f"{path.name} line {number}"
                    try:
                        r, replaced = _parse(line)
                        if r["event"] != "unwritable":
                            raise _Bad(Skip.UNKNOWN_EVENT)
                        self.unwritable.append(Unwritable(_number(r, "pid", 0, MAX_INT32), _number(r, "errno", 0, 1 << 16),
                                                          _text(r, "path"), _text(r, "command")))
                        if replaced:
                            self.skip(Skip.NOT_UTF8, where)
                    except _Bad as bad:
                        self.skip(bad.kind, where)
        except (OSError, reader.InputError):
            self.skip(Skip.UNREADABLE, path.name)

    @staticmethod
    def add(table: dict[tuple[Any, ...], list[Any]], key: tuple[Any, ...], count: int, pid: int,
            correlation: int) -> None:
        entry = table.get(key)
        if entry is None:
            table[key] = [count, {pid}, correlation]
        else:
            entry[0] += count
            entry[1].add(pid)

    def trace(self) -> Trace:
        attributes = tuple(AttributeSet(tuple(sorted(pids)), key[0], key[1], corr, *key[2:], count=count)
                           for key, (count, pids, corr) in self.attributes.items())
        launches = tuple(Launch(tuple(sorted(pids)), key[0], corr, *key[1:10], LaunchKind(key[10]), count,
                                KernelAttributes(*key[11]), key[12])
                         for key, (count, pids, corr) in self.launches.items())
        past = tuple(PastTable(kernel, count, tuple(sorted(pids))) for kernel, (count, pids) in self.past_table.items())
        skipped = tuple(Skipped(kind, count, first) for kind, (count, first) in self.skipped.items())
        return Trace(tuple(self.processes), tuple(sorted(attributes, key=lambda a: (a.pids[0], a.correlation))),
                     launches, self.torn, past, tuple(self.unwritable), skipped)


_UNKNOWN = (None, None, None)  # a kernel's attributes, where the record has none
_LAUNCH, _NODE, _REPLAY, _REFUSED_REPLAY = (kind.value for kind in LaunchKind)
_INT = int


class _File:
    """The state of one process image's file while it is read: what joins lines to each other."""

    def __init__(self, tally: _Tally, name: str) -> None:
        self.tally, self.name = tally, name
        self.pid = -1
        self.pending: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
        self.ids: dict[int, tuple[Any, ...]] = {}  # launch id -> its key in the tally
        self.counts: dict[int, int] = {}  # launch id -> the largest count written
        self.names: dict[str, str] = {}  # handle -> kernel name
        self.nodes: dict[str, dict[int, tuple[Any, ...]]] = {}  # exec -> node id -> key
        self.replays: dict[str, int] = {}  # exec -> the largest replay count
        self.refused_replays: dict[tuple[str, int, str], int] = {}  # (exec, result, api) -> refusals
        self.overflow: dict[str | None, int] = {}  # handle -> the largest count past the table
        # Launches by correlation id, still to be paired with the record of the other domain.
        self.recent: dict[int, tuple[dict[str, Any], int]] = {}  # driver records
        self.older: dict[int, tuple[dict[str, Any], int]] = {}
        self.waiting: dict[int, tuple[dict[str, Any], int]] = {}  # runtime records that came first
        self.events = {"launch": self.launch, "graph_node": self.launch, "attribute": self.attribute,
                       "count": self.count, "function": self.function, "overflow": self.past_table,
                       "replay": self.replay}

    def read(self, stream: BinaryIO) -> None:
        lines = _lines(stream)
        first = next(lines, None)
        if first is None:
            return  # created, and nothing written yet
        number, line, complete = first
        try:
            r, replaced = _parse(line) if complete else ({}, False)
        except _Bad:
            r, replaced = {}, False
        if r.get("event") != "process":
            self.tally.skip(Skip.FOREIGN, self.name)
            return
        if r.get("format") not in FORMATS:
            self.tally.skip(Skip.UNKNOWN_FORMAT, self.name)
            return
        try:
            self.process(r)
            if replaced:  # a command line cut inside a character
                self.tally.skip(Skip.NOT_UTF8, f"{self.name} line {number}")
        except _Bad as bad:
            self.tally.skip(bad.kind, f"{self.name} line {number}")
        self.lines(stream, number)
        self.finish()

    def lines(self, stream: BinaryIO, number: int) -> None:
        """Every line after the first (the loop every record goes through, kept short)."""
        events, readline, tally, loads = self.events, stream.readline, self.tally, _fast_loads
        while True:
            line = readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            number += 1
            if line[-1:] != b"\n":
                if len(line) <= MAX_LINE_BYTES:
                    tally.torn += 1  # the last line, cut short by a process killed while writing it
                    continue
                while line and line[-1:] != b"\n":
                    line = readline(MAX_LINE_BYTES)
                line = None
            try:
                try:
                    r, replaced = loads(line), False
                except Exception:  # noqa: BLE001 - the standard parser decides what orjson refuses
                    r, replaced = _parse(line)
                handle = events.get(r.get("event")) if type(r) is dict else None
                if handle is None:
                    _parse(line)  # says what the line is not
                    raise _Bad(Skip.UNKNOWN_EVENT)
                handle(r)
                if replaced:
                    tally.skip(Skip.NOT_UTF8, f"{self.name} line {number}")
            except _Bad as bad:
                tally.skip(bad.kind, f"{self.name} line {number}")

    def process(self, r: dict[str, Any]) -> None:
        self.pid = _number(r, "pid", 0, MAX_INT32)
        untraced = r.get("untraced")
        self.tally.processes.append(Process(self.pid, _number(r, "ppid", 0, MAX_INT32, 0), _text(r, "command"),
                                            _text(r, "collector"), _text(r, "cupti_library"),
                                            _text(r, "cupti_found"), untraced if isinstance(untraced, str) else None,
                                            _number(r, "image", 1, MAX_INT32, 1)))

    def count(self, r: dict[str, Any]) -> None:
        entry, count = r.get("id"), r.get("count")
        if type(entry) is not _INT or type(count) is not _INT or not (0 < entry < MAX_COUNT and 0 < count <= MAX_COUNT):
            raise _Bad(Skip.BAD_NUMBER)
        if count > self.counts.get(entry, 0):
            self.counts[entry] = count

    def function(self, r: dict[str, Any]) -> None:
        handle, name = r.get("handle"), _name(r)
        if type(handle) is not str or name is None:
            raise _Bad(Skip.NOT_AN_EVENT)
        self.names[handle] = name

    def past_table(self, r: dict[str, Any]) -> None:
        handle = r.get("handle")
        if handle is not None and type(handle) is not str:
            raise _Bad(Skip.NOT_AN_EVENT)
        self.overflow[handle] = max(self.overflow.get(handle, 0), _number(r, "count", 1, MAX_COUNT + 1))

    def attribute(self, r: dict[str, Any]) -> None:
        attribute = r["attribute"] = _number(r, "attribute", 0, MAX_INT32)
        # A size is never negative; the carveout's -1 asks for the default.
        r["value"] = _number(r, "value", 0 if attribute == MAX_DYNAMIC_SHARED else -MAX_INT32, MAX_INT32)
        r["static_bytes"] = _number(r, "static_bytes", -1, MAX_BYTES, -1)
        r["result"] = _number(r, "result", -MAX_INT32, MAX_INT32, 0)
        r["correlation"] = _number(r, "correlation", 0, MAX_BYTES, 0)
        self.join("attribute", r)

    def launch(self, r: dict[str, Any]) -> None:
        get = r.get
        dynamic, static, result = get("dynamic_bytes", 0), get("static_bytes", -1), get("result", 0)
        correlation, launch_id = get("correlation", 0), get("id", 0)
        if type(dynamic) is not _INT or type(static) is not _INT or type(result) is not _INT or \
                type(correlation) is not _INT or type(launch_id) is not _INT or not (
                0 <= dynamic < MAX_BYTES and -1 <= static < MAX_BYTES and -MAX_INT32 <= result < MAX_INT32 and
                0 <= correlation < MAX_BYTES and 0 <= launch_id < MAX_COUNT):
            raise _Bad(Skip.BAD_NUMBER)
        grid, block, cluster = get("grid"), get("block"), get("cluster")
        try:  # three lists of three non-negative 32-bit ints, checked inline: every launch line comes here
            (gx, gy, gz), (bx, by, bz), (cx, cy, cz) = grid, block, cluster
            if not (type(gx) is _INT and type(gy) is _INT and type(gz) is _INT and type(bx) is _INT and
                    type(by) is _INT and type(bz) is _INT and type(cx) is _INT and type(cy) is _INT and
                    type(cz) is _INT and 0 <= gx < MAX_BYTES and 0 <= gy < MAX_BYTES and 0 <= gz < MAX_BYTES and
                    0 <= bx < MAX_BYTES and 0 <= by < MAX_BYTES and 0 <= bz < MAX_BYTES and 0 <= cx < MAX_BYTES and
                    0 <= cy < MAX_BYTES and 0 <= cz < MAX_BYTES):
                raise TypeError
            grid, block, cluster = (gx, gy, gz), (bx, by, bz), (cx, cy, cz)
        except (TypeError, ValueError):  # one is absent, or not such a list: say which
            grid, block, cluster = _dims(grid), _dims(block), _dims(cluster)
        if block[0] * block[1] * block[2] > MAX_BLOCK_THREADS:
            raise _Bad(Skip.BAD_NUMBER)
        attributes = _UNKNOWN
        if result:  # the kernel's attributes at the refusal (record format 2)
            attributes = tuple(_known(_number(r, k, -1, MAX_BYTES, -1))
                               for k in ("max_dynamic_bytes", "max_threads", "registers"))
        r["grid"], r["block"], r["cluster"], r["attributes"] = grid, block, cluster, attributes
        exec_graph = get("exec")
        if r["event"] == "graph_node":
            if exec_graph is None:
                self.join("launch", r)  # a node as built: counted once
                return
            if type(exec_graph) is not str:
                raise _Bad(Skip.NOT_AN_EVENT)
            nodes = self.nodes.setdefault(exec_graph, {})
            # A node written again for the same exec (cuGraphExecKernelNodeSetParams) replaces it; its replays
            # before the change are counted with its new parameters, as nothing tells them apart.
            nodes[launch_id or -len(nodes) - 1] = self.key(r, None, _REPLAY)
            return
        if not launch_id:  # a collector writes an id with every launch: without one, it is counted once
            self.join("launch", r)
            return
        # A launch is counted by its id when the file ends, so it is kept at once, and its key replaced should
        # the record of the other domain with its correlation id come.
        name, handle, api = get("name"), get("handle"), get("api")
        if type(name) is str and name:
            if type(handle) is str:
                self.names[handle] = name
        else:
            name = self.names.get(handle) if type(handle) is str else None
        key = (api if type(api) is str else "?", name, grid, block, cluster, dynamic, None if static < 0 else static,
               result, "runtime" if get("domain") == "runtime" else "driver", get("captured") is True, _LAUNCH,
               attributes, 0)
        self.ids[launch_id] = key
        if get("domain") == "runtime":  # its driver call was written just before it, by the same thread
            partner = self.recent.pop(correlation, None) or self.older.pop(correlation, None)
            if partner is None:
                self.waiting[correlation] = (r, launch_id)
                if len(self.waiting) > PENDING_RECORDS:
                    self.waiting.clear()  # runtime records whose driver call never came: kept alone
                return
            driver, driver_id = partner
            runtime, runtime_id = r, launch_id
        elif self.waiting and correlation in self.waiting:  # the runtime record came first
            driver, driver_id = r, launch_id
            runtime, runtime_id = self.waiting.pop(correlation)
        else:
            recent = self.recent
            recent[correlation] = (r, launch_id)
            if len(recent) > PENDING_RECORDS:  # two generations: what is older than both is paired with nothing
                self.older, self.recent = recent, {}
            return
        del self.ids[runtime_id]  # the runtime call's own count counts the same calls as its driver call's
        self.ids[driver_id] = self.key(driver, runtime, _LAUNCH)

    def replay(self, r: dict[str, Any]) -> None:
        exec_graph = r.get("exec")
        if type(exec_graph) is not str:
            raise _Bad(Skip.NOT_AN_EVENT)
        result = _number(r, "result", -MAX_INT32, MAX_INT32, 0)
        count = _number(r, "count", 1, MAX_COUNT + 1, 1)
        if result:
            where = (exec_graph, result, _text(r, "api", "cuGraphLaunch"))
            self.refused_replays[where] = self.refused_replays.get(where, 0) + count
        else:
            self.replays[exec_graph] = max(self.replays.get(exec_graph, 0), count)

    def join(self, category: str, r: dict[str, Any]) -> None:
        """Hold ``r`` until the record of the other domain with its correlation id comes, then keep both as one."""
        key = (category, r.get("correlation", 0))
        partner = self.pending.pop(key, None)
        if partner is not None and partner.get("domain") != r.get("domain"):
            driver, runtime = (partner, r) if r.get("domain") == "runtime" else (r, partner)
            self.keep(category, driver, runtime)
            return
        if partner is not None:
            self.keep(category, partner, None)
        self.pending[key] = r
        if len(self.pending) > PENDING_RECORDS:
            (old_category, _), old = self.pending.popitem(last=False)
            self.keep(old_category, old, None)

    def kernel_name(self, r: dict[str, Any]) -> str | None:
        name, handle = r.get("name"), r.get("handle")
        if type(name) is str and name:
            if type(handle) is str:
                self.names[handle] = name
            return name
        return self.names.get(handle) if type(handle) is str else None

    def keep(self, category: str, r: dict[str, Any], runtime: dict[str, Any] | None) -> None:
        """One record (a driver record with the runtime call that made it, where one did) into the tally."""
        if category == "attribute":
            api, result, domain = _text(r, "api", "?"), r["result"], _text(r, "domain", "driver")
            driver_api, name = None, self.kernel_name(r)
            if runtime is not None:
                driver_api, api, result, domain = api, _text(runtime, "api", api), runtime["result"], "runtime"
                name = name or self.kernel_name(runtime)
            key = (api, driver_api, r["attribute"], r["value"], result, domain, _known(r["static_bytes"]), name)
            self.tally.add(self.tally.attributes, key, 1, self.pid, r["correlation"])
            return
        key = self.key(r, runtime, _LAUNCH if r["event"] == "launch" else _NODE)
        launch_id = r.get("id")
        if r["event"] == "launch" and launch_id:
            self.ids[launch_id] = key  # counted when the file ends: the largest count of its id wins
        else:
            self.tally.add(self.tally.launches, key, 1, self.pid, r.get("correlation", 0))

    def key(self, r: dict[str, Any], runtime: dict[str, Any] | None, kind: str) -> tuple[Any, ...]:
        """A launch's key in the tally."""
        api, result, domain = r.get("api"), r.get("result", 0), r.get("domain")
        api, domain = api if type(api) is str else "?", domain if domain == "runtime" else "driver"
        name, attributes = self.kernel_name(r), r["attributes"]
        if runtime is not None:  # the call the program made, and the result it saw
            api, result, domain = _text(runtime, "api", api), runtime.get("result", 0), "runtime"
            name = name or self.kernel_name(runtime)
            if result and attributes == _UNKNOWN:  # the driver's record has the kernel's; a host stub has none
                attributes = runtime["attributes"]
        elif not result:
            attributes = _UNKNOWN
        static = r.get("static_bytes", -1)
        return (api, name, r["grid"], r["block"], r["cluster"], r.get("dynamic_bytes", 0),
                None if static < 0 else static, result, domain, r.get("captured") is True, kind, attributes, 0)

    def finish(self) -> None:
        """The file ended: records still waiting are kept alone, launches get their counts, graph nodes their
        replays, launches past the table their kernels' names."""
        while self.pending:
            (category, _), r = self.pending.popitem(last=False)
            self.keep(category, r, None)
        add, launches, pid, counts = self.tally.add, self.tally.launches, self.pid, self.counts
        for launch_id, key in self.ids.items():
            add(launches, key, counts.get(launch_id, 1), pid, 0)
        for exec_graph, nodes in self.nodes.items():
            for key in nodes.values():
                add(launches, key, self.replays.get(exec_graph, 0), pid, 0)
        for (exec_graph, result, api), count in self.refused_replays.items():
            nodes = list(self.nodes.get(exec_graph, {}).values())
            worst = max(nodes, key=lambda k: k[5] + (k[6] or 0), default=None)
            # A replay's refusal is the graph's: shown on the node that asks the most shared memory.
            key = ((api, None, NO_DIMS, NO_DIMS, NO_DIMS, 0, None) if worst is None else (api, *worst[1:7])) + \
                (result, "driver", False, _REFUSED_REPLAY, _UNKNOWN if worst is None else worst[11], len(nodes))
            add(launches, key, count, pid, 0)
        for handle, count in self.overflow.items():
            kernel = None if handle is None else self.names.get(handle, UNNAMED_PAST_TABLE)
            entry = self.tally.past_table.setdefault(kernel, [0, set()])
            entry[0] += count
            entry[1].add(pid)
