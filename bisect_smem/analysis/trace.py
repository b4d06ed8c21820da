"""Each shared-memory request a traced process made, explained against limits: the GPU it ran on (measured:
from a report, a quick measurement before the command, or as recorded with the trace) and the other targets
asked for (``--arch``, ``--target``), with the static-footprint rule the tool measures (the dynamic array
starts after the static data, aligned), and what ``fit``'s library rules say of a kernel by its name.

What decides is the number the process asked the driver for; a model of the library (fit) comes second. A
refused request gets its cause from what was recorded at the refusal (the kernel's own limit, threads,
registers, cluster), never a verdict of "fits"; identical requests of the whole trace are one, with a count.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Sequence
from dataclasses import field, replace
from typing import Any

from bisect_smem.analysis.demangle import demangle_all
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_REGISTERS_PER_BLOCK,
    MAX_THREADS_PER_BLOCK,
    block_registers,
    static_footprint,
)
from bisect_smem.core.trace_events import (
    INVALID_CLUSTER_SIZE,
    MAX_DYNAMIC_SHARED,
    OUT_OF_RESOURCES,
    AttributeSet,
    Launch,
    LaunchKind,
    PastTable,
    Skipped,
    Trace,
    Unwritable,
    result_text,
)
from bisect_smem.core.trace_read import UNNAMED_PAST_TABLE

FitAdvice = Callable[[str, int, Target | None], tuple[str, ...] | None]


@frozen(slots=True)
class Limit:
    """One request against one target: the most it accepts (the opt-in limit less the aligned static data),
    and by how many bytes the request is over it (negative: bytes to spare); unknown where the target's limit
    is."""

    target: str
    kind: str  # "measured" or "published"
    optin_limit_bytes: int | None
    accepts_bytes: int | None
    over_bytes: int | None
    fits: bool | None = field(init=False)  # whether the request fits; None where the limit is not known

    def __post_init__(self) -> None:
        object.__setattr__(self, "fits", None if self.over_bytes is None else self.over_bytes <= 0)


class Cause(enum.Enum):
    """Why a request was refused, as far as the records tell."""

    GPU_LIMIT = "gpu_limit"  # more shared memory than the GPU accepts per block
    KERNEL_LIMIT = "kernel_limit"  # more than the kernel's MaxDynamicSharedMemorySize, which the GPU would accept
    THREADS = "threads"  # more threads per block than the kernel accepts
    REGISTERS = "registers"  # its registers times its threads are more than a block has
    CLUSTER = "cluster"  # an invalid cluster
    UNKNOWN = "unknown"  # the records do not tell: what is known is said


@frozen(slots=True)
class Request:
    """One recorded request: an attribute set of MaxDynamicSharedMemorySize, or a launch or graph node with
    dynamic shared memory; ``here`` is the GPU it ran on, ``elsewhere`` the other targets. Identical requests
    of the whole trace are one, ``count`` times, made by ``processes`` processes (``pid`` the lowest)."""

    pid: int
    kind: str  # "attribute", "launch", "graph node", "graph replay", "refused graph launch"
    api: str
    kernel: str | None  # mangled, as the driver gave it
    readable: str | None  # demangled
    requested_bytes: int  # the attribute's value, or the launch's dynamic bytes
    static_bytes: int | None
    result: str  # in words
    refused: bool
    count: int  # times made (a node of an executable graph: its replays; 0 where it was never launched)
    block: tuple[int, int, int] | None
    cluster: tuple[int, int, int] | None
    here: Limit | None
    elsewhere: tuple[Limit, ...]
    fit: tuple[str, ...] | None  # what fit says of this kernel (lines), where its name shows a build fit models
    cause: Cause | None = None  # why it was refused; None where it was not
    kernel_limit_bytes: int | None = None  # the kernel's MaxDynamicSharedMemorySize at the refusal
    max_threads: int | None = None  # the kernel's most threads per block at the refusal
    registers: int | None = None  # per thread, at the refusal
    processes: int = 1
    graph_nodes: int = 0  # of a refused graph launch: the kernel nodes of its graph
    result_code: int = 0  # the CUresult or cudaError_t ``result`` names

    @property
    def over_bytes(self) -> int:
        """By how much the request is over the GPU it ran on (0 where unknown or within it): refusals sort on it."""
        return max(self.here.over_bytes or 0, 0) if self.here else 0

    @property
    def over_kernel_limit_bytes(self) -> int | None:
        """By how much a launch refused for its kernel's own limit asked more than that limit; None for any
        other request (``here`` then says whether the GPU itself would have taken it)."""
        if self.cause is not Cause.KERNEL_LIMIT or self.kernel_limit_bytes is None:
            return None
        return self.requested_bytes - self.kernel_limit_bytes

    @property
    def threads(self) -> int | None:
        """Threads per block, where a block was recorded."""
        return self.block[0] * self.block[1] * self.block[2] if self.block else None

    @property
    def kernel_limit_raised(self) -> bool | None:
        """Whether the kernel's MaxDynamicSharedMemorySize had been raised above its default (48 KiB less its
        static data) at the refusal; None where its limit or static data is not known."""
        if self.kernel_limit_bytes is None or self.static_bytes is None:
            return None
        return self.kernel_limit_bytes + self.static_bytes != DEFAULT_SMEM_PER_BLOCK_BYTES


@frozen(slots=True)
class Setting:
    """An attribute set other than the dynamic shared memory size: the carveout or a cluster attribute."""

    pid: int
    api: str
    kernel: str | None
    readable: str | None
    attribute: str
    value: int
    result: str
    refused: bool
    count: int = 1


@frozen(slots=True)
class PastTableKernel:
    """Launches of one kernel counted past the collector's table: their requests were not recorded."""

    kernel: str | None  # mangled; None for launches past both of the collector's tables
    readable: str | None
    count: int
    processes: int


@frozen(slots=True)
class Explained:
    """A whole trace explained: what a summary shows and the JSON summary holds."""

    processes: int
    untraced: tuple[tuple[int, str], ...]  # (pid, why) of processes the collector could not trace
    cupti_libraries: tuple[str, ...]
    kernels: int
    requests: tuple[Request, ...]
    settings: tuple[Setting, ...]
    here: str | None  # the target requests were explained against, or None where no limit was known
    targets: tuple[str, ...]
    torn_lines: int
    past_table: tuple[PastTableKernel, ...] = ()  # launches counted past the collector's table: not explained
    unwritable: tuple[Unwritable, ...] = ()  # collectors that could not write their traces
    skipped: tuple[Skipped, ...] = ()  # lines and files that could not be read

    @property
    def refusals(self) -> tuple[Request, ...]:
        """Refused requests, worst first: most bytes over, then most often."""
        return tuple(sorted((r for r in self.requests if r.refused), key=lambda r: (-r.over_bytes, -r.count)))

    @property
    def at_ceiling(self) -> tuple[Request, ...]:
        """Attribute sets that asked for exactly this GPU's ceiling: a library that asks for the device's
        maximum (Triton does) would ask another GPU for its own, so they say nothing about another GPU."""
        return tuple(r for r in self.requests if r.kind == "attribute" and r.here and r.here.over_bytes == 0)

    def would_not_fit(self, target: str) -> tuple[Request, ...]:
        """Requests that would not launch on ``target``, worst first; sets of this GPU's ceiling left out."""
        ceiling = set(map(id, self.at_ceiling))
        over = [r for r in self.requests for lim in r.elsewhere
                if lim.target == target and lim.fits is False and id(r) not in ceiling]
        return tuple(sorted(over, key=lambda r: -max(lim.over_bytes or 0 for lim in r.elsewhere if lim.target == target)))


def limit(target: Target, requested_bytes: int, static_bytes: int | None) -> Limit:
    """``requested_bytes`` of dynamic shared memory behind ``static_bytes`` of static data, on ``target``."""
    label = target.short or target.name
    if target.optin_limit_bytes is None:
        return Limit(label, target.kind, None, None, None)
    accepts = target.optin_limit_bytes - static_footprint(static_bytes or 0)
    return Limit(label, target.kind, target.optin_limit_bytes, accepts, requested_bytes - accepts)


def cause(r: Request) -> Cause:
    """Why the refused request ``r`` was refused, from what was recorded at the refusal: a cause that is not
    shared memory first (the launch would have been refused whatever its bytes), then the GPU's limit, then
    the kernel's own."""
    if r.kind == "attribute":
        return Cause.GPU_LIMIT if r.here and r.here.fits is False else Cause.UNKNOWN
    threads = r.threads or 0
    if r.result_code == INVALID_CLUSTER_SIZE:
        return Cause.CLUSTER
    if threads > (r.max_threads if r.max_threads is not None else MAX_THREADS_PER_BLOCK):
        return Cause.THREADS
    if r.result_code == OUT_OF_RESOURCES and r.registers and \
            block_registers(r.registers, threads) > MAX_REGISTERS_PER_BLOCK:
        return Cause.REGISTERS
    if r.here and r.here.fits is False:
        return Cause.GPU_LIMIT
    if r.kernel_limit_bytes is not None and r.requested_bytes > r.kernel_limit_bytes:
        return Cause.KERNEL_LIMIT
    return Cause.UNKNOWN


def readable_names(trace: Trace) -> Callable[[str], str]:
    """Every kernel name of ``trace`` demangled, in one call of the demangler: a name's readable form (itself
    where it cannot be demangled)."""
    names = demangle_all([a.kernel for a in trace.attribute_sets if a.kernel] +
                         [lnch.kernel for lnch in trace.launches if lnch.kernel] +
                         [p.kernel for p in trace.past_table if p.kernel])
    return lambda name: names.get(name, name)


def explain(trace: Trace, here: Target | None, others: Sequence[Target], demangle: Callable[[str], str] | None = None,
            advise: FitAdvice | None = None) -> Explained:
    """Every request of ``trace`` against ``here`` and ``others``; ``demangle`` makes a name readable (default:
    the system's demangler, readable_names) and ``advise`` says what fit makes of a readable name, its request
    and the target, or None (default: fit's library rules, fit_advice). Identical requests are one, with their
    counts added."""
    demangle = demangle or readable_names(trace)
    advise = advise or fit_advice
    advice: dict[tuple[str, int], tuple[str, ...] | None] = {}

    def fit(readable: str | None, requested: int) -> tuple[str, ...] | None:
        if readable is None:
            return None
        if (readable, requested) not in advice:
            advice[(readable, requested)] = advise(readable, requested, here)
        return advice[(readable, requested)]

    requests: dict[Request, list[Any]] = {}
    settings: dict[Setting, list[Any]] = {}
    for a in trace.attribute_sets:
        readable = demangle(a.kernel) if a.kernel else None
        if a.attribute == MAX_DYNAMIC_SHARED:
            _add(requests, _request(a, readable, here, others, fit), a.count, a.pids)
        else:
            _add(settings, Setting(-1, a.api, a.kernel, readable, a.attribute_name, a.value,
                                   result_text(a.result_domain, a.result), a.refused, 0), a.count, a.pids)
    for launch in trace.launches:
        if launch.dynamic_bytes or launch.refused or (launch.static_bytes or 0):
            readable = demangle(launch.kernel) if launch.kernel else None
            _add(requests, _launch_request(launch, readable, here, others, fit), launch.count, launch.pids)
    untraced = tuple((p.pid, p.untraced) for p in trace.processes if p.untraced)
    kernels = {k for k in [*(a.kernel for a in trace.attribute_sets), *(lnch.kernel for lnch in trace.launches),
                           *(p.kernel for p in trace.past_table if p.kernel != UNNAMED_PAST_TABLE)] if k}
    return Explained(len(trace.processes), untraced, tuple(sorted({p.cupti_library for p in trace.processes
                                                                   if p.cupti_library})),
                     len(kernels), _merged(requests), _merged(settings), here.name if here else None,
                     tuple(t.short or t.name for t in others), trace.torn_lines,
                     tuple(_past(p, demangle) for p in trace.past_table),
                     trace.unwritable, trace.skipped)


def _past(p: PastTable, demangle: Callable[[str], str]) -> PastTableKernel:
    readable = demangle(p.kernel) if p.kernel and p.kernel != UNNAMED_PAST_TABLE else p.kernel
    return PastTableKernel(p.kernel, readable, p.count, len(p.pids))


def _add(table: dict[Any, list[Any]], item: Any, count: int, pids: tuple[int, ...]) -> None:
    entry = table.setdefault(item, [0, set()])
    entry[0] += count
    entry[1].update(pids)


def _merged(table: dict[Any, list[Any]]) -> tuple[Any, ...]:
    """Each distinct item once, with its count and processes (pid: the lowest; -1 where none was recorded)."""
    merged = []
    for item, (count, pids) in table.items():
        fields = {"pid": min(pids, default=-1), "count": count}
        if isinstance(item, Request):
            fields["processes"] = len(pids)
        merged.append(replace(item, **fields))
    return tuple(merged)


def _request(a: AttributeSet, readable: str | None, here: Target | None, others: Sequence[Target],
             fit: Callable[[str | None, int], tuple[str, ...] | None]) -> Request:
    r = Request(-1, "attribute", a.api, a.kernel, readable, a.value, a.static_bytes,
                result_text(a.result_domain, a.result), a.refused, 0, None, None,
                limit(here, a.value, a.static_bytes) if here else None,
                tuple(limit(t, a.value, a.static_bytes) for t in others), fit(readable, a.value), result_code=a.result)
    return replace(r, cause=cause(r)) if r.refused else r


def _launch_request(launch: Launch, readable: str | None, here: Target | None, others: Sequence[Target],
                    fit: Callable[[str | None, int], tuple[str, ...] | None]) -> Request:
    a = launch.attributes
    r = Request(-1, launch.kind.value, launch.api + (" (captured)" if launch.captured else ""), launch.kernel,
                readable, launch.dynamic_bytes, launch.static_bytes, result_text(launch.result_domain, launch.result),
                launch.refused, 0, launch.block if launch.kind is not LaunchKind.REFUSED_GRAPH_LAUNCH or
                launch.graph_nodes else None, launch.cluster,
                limit(here, launch.dynamic_bytes, launch.static_bytes) if here else None,
                tuple(limit(t, launch.dynamic_bytes, launch.static_bytes) for t in others),
                fit(readable, launch.dynamic_bytes) if launch.refused else None, None, a.max_dynamic_bytes,
                a.max_threads, a.registers, graph_nodes=launch.graph_nodes, result_code=launch.result)
    return replace(r, cause=cause(r)) if r.refused else r


_MAINLOOP = re.compile(r"(\w*Mainloop\w*<\d+)")


def shorten(name: str, width: int) -> str:
    """``name`` within ``width`` characters: template arguments nested deepest become "…" first (a CUTLASS
    mainloop's stage count is kept), then the middle is cut. The JSON keeps the whole name."""
    short = name = _without_parameters(name) if len(name) > width else name
    for depth in (4, 3, 2, 1):
        if len(short) <= width:
            return short
        short = _collapse(name, depth)
    if len(short) <= width:
        return short
    half = (width - 1) // 2
    return short[:half] + "…" + short[len(short) - (width - 1 - half):]


def _without_parameters(name: str) -> str:
    """``name`` with a function's parameter list written "(…)": demangled, it repeats the template arguments."""
    depth = 0
    for i, ch in enumerate(name):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0 and name.endswith(")"):
            return name[:i] + "(…)"
    return name


def _collapse(name: str, deep: int) -> str:
    """``name`` with every template argument list nested ``deep`` levels down written as "<…>"."""
    out: list[str] = []
    inner: list[str] = []
    depth = 0
    for ch in name:
        if ch == "<":
            depth += 1
        (inner if depth >= deep else out).append(ch)
        if ch == ">":
            depth -= 1
            if depth == deep - 1:  # the list ended: keep only what says the most
                mainloop = _MAINLOOP.search("".join(inner))
                out.append(f"<…{mainloop.group(1)},…>…>" if mainloop else "<…>")
                inner = []
    return "".join(out)


def fit_advice(readable: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
    """What fit says of a kernel by its readable name: the lines of the first library rule that recognizes
    it (its stage count, bytes, and what it would be on ``target``), or None where none does."""
    # Deferred: fit's rules are loaded only for a trace that names a kernel.
    from bisect_smem.analysis.fit.rules import recognize

    return recognize(readable, requested_bytes, target)
