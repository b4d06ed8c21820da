"""Each shared-memory request a traced process made, explained against limits: the GPU it ran on (measured:
from a report, a quick measurement before the command, or as recorded with the trace) and the other targets
asked for (``--arch``, ``--target``), with the static-footprint rule the tool measures (the dynamic array
starts after the static data, aligned), and what ``fit``'s library rules say of a kernel by its name.

What decides is the number the process asked the driver for; a model of the library (fit) comes second.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.hardware import static_footprint
from bisect_smem.core.trace_events import MAX_DYNAMIC_SHARED, AttributeSet, Launch, Trace, result_text


@dataclass(frozen=True)
class Limit:
    """One request against one target: the most it accepts (the opt-in limit less the aligned static data),
    and by how many bytes the request is over it (negative: bytes to spare); None where it is not known."""

    target: str
    kind: str  # "measured" or "published"
    optin_limit_bytes: int | None
    accepts_bytes: int | None
    over_bytes: int | None

    @property
    def fits(self) -> bool | None:
        """Whether the request fits, None where the limit is not known."""
        return None if self.over_bytes is None else self.over_bytes <= 0


@dataclass(frozen=True)
class Request:
    """One recorded request: an attribute set of MaxDynamicSharedMemorySize, or a launch or graph node with
    dynamic shared memory; ``here`` is the GPU it ran on, ``elsewhere`` the other targets."""

    pid: int
    kind: str  # "attribute", "launch", "graph node"
    api: str
    kernel: str | None  # mangled, as the driver gave it
    readable: str | None  # demangled
    requested_bytes: int  # the attribute's value, or the launch's dynamic bytes
    static_bytes: int | None
    result: str  # in words
    refused: bool
    count: int
    block: tuple[int, int, int] | None
    cluster: tuple[int, int, int] | None
    here: Limit | None
    elsewhere: tuple[Limit, ...]
    fit: tuple[str, ...] | None  # what fit says of this kernel (lines), where its name shows a build fit models

    @property
    def over_bytes(self) -> int:
        """By how much the request is over the GPU it ran on (0 where unknown or within it): refusals sort on it."""
        return max(self.here.over_bytes or 0, 0) if self.here else 0


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


def explain(trace: Trace, here: Target | None, others: Sequence[Target], demangle: Callable[[str], str],
            fit_advice: Callable[[str, int, Target | None], tuple[str, ...] | None]) -> Explained:
    """Every request of ``trace`` against ``here`` and ``others``; ``demangle`` makes a name readable and
    ``fit_advice`` says what fit makes of a readable name, its request and the target (or None)."""
    requests, settings = [], []
    for a in trace.attribute_sets:
        readable = demangle(a.kernel) if a.kernel else None
        if a.attribute == MAX_DYNAMIC_SHARED:
            requests.append(_request(a, readable, here, others, fit_advice))
        else:
            settings.append(Setting(a.pid, a.api, a.kernel, readable, a.attribute_name, a.value,
                                    result_text(a.result_domain, a.result), a.refused))
    for launch in trace.launches:
        if launch.dynamic_bytes or launch.refused or (launch.static_bytes or 0):
            requests.append(_launch_request(launch, demangle(launch.kernel) if launch.kernel else None, here, others,
                                            fit_advice))
    untraced = tuple((p.pid, p.untraced) for p in trace.processes if p.untraced)
    kernels = {k for k in [*(a.kernel for a in trace.attribute_sets), *(lnch.kernel for lnch in trace.launches)] if k}
    return Explained(len(trace.processes), untraced, tuple(sorted({p.cupti_library for p in trace.processes
                                                                   if p.cupti_library})),
                     len(kernels), tuple(requests), tuple(settings), here.name if here else None,
                     tuple(t.short or t.name for t in others), trace.torn_lines)


def _request(a: AttributeSet, readable: str | None, here: Target | None, others: Sequence[Target],
             fit_advice: Callable[[str, int, Target | None], tuple[str, ...] | None]) -> Request:
    return Request(a.pid, "attribute", a.api, a.kernel, readable, a.value, a.static_bytes,
                   result_text(a.result_domain, a.result), a.refused, 1, None, None,
                   limit(here, a.value, a.static_bytes) if here else None,
                   tuple(limit(t, a.value, a.static_bytes) for t in others),
                   fit_advice(readable, a.value, here) if readable else None)


def _launch_request(launch: Launch, readable: str | None, here: Target | None, others: Sequence[Target],
                    fit_advice: Callable[[str, int, Target | None], tuple[str, ...] | None]) -> Request:
    kind = "graph node" if launch.graph_node else "launch"
    return Request(launch.pid, kind, launch.api + (" (captured)" if launch.captured else ""), launch.kernel, readable,
                   launch.dynamic_bytes, launch.static_bytes, result_text(launch.result_domain, launch.result),
                   launch.refused, launch.count, launch.block, launch.cluster,
                   limit(here, launch.dynamic_bytes, launch.static_bytes) if here else None,
                   tuple(limit(t, launch.dynamic_bytes, launch.static_bytes) for t in others),
                   fit_advice(readable, launch.dynamic_bytes, here) if readable and launch.refused else None)


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
