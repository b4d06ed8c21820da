"""A trace, explained, as text within 100 columns (processes, kernels, attribute sets, refusals worst first
with their causes, kernels that would not fit on the other targets) and as the JSON summary of schema
trace.v2, whose records are the frozen dataclasses below (TraceSummary and what it holds): the summary is made
of them, and its published schema is generated from them (outputs/trace_schema.py). Identical requests are
one line with a count."""

from __future__ import annotations

import dataclasses
import json
import operator
import typing
from collections.abc import Callable
from typing import Any

from bisect_smem.analysis.trace import Cause, Explained, Limit, PastTableKernel, Request, Setting, shorten
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_REGISTERS_PER_BLOCK,
    MAX_THREADS_PER_BLOCK,
    block_registers,
)
from bisect_smem.core.trace_events import Skip, Skipped

WIDTH = 100
TRACE_SCHEMA = "bisect_smem/trace/v2"
NAME_WIDTH = 96
MOST_LISTED = 20  # requests listed per section; the JSON has them all
MOST_PAST_TABLE = 5  # kernels named of the launches past the collector's table


def _name(request: Request | Any, width: int = NAME_WIDTH) -> str:
    name = request.readable or request.kernel or "an unnamed kernel"
    return shorten(name, width)


def _static(lim: Limit) -> int:
    """The static footprint the limit was lessened by (its opt-in limit less what it accepts)."""
    return lim.optin_limit_bytes - lim.accepts_bytes if lim.optin_limit_bytes is not None else 0


def _limit_text(lim: Limit, where: str) -> str:
    if lim.accepts_bytes is None:
        return f"{where}: no limit known"
    verdict = f"over by {lim.over_bytes} B" if lim.over_bytes > 0 else f"fits, {-lim.over_bytes} B to spare"
    return f"{where} accepts at most {lim.accepts_bytes} B with {_static(lim)} B static: {verdict}"


def _short_limit(lim: Limit) -> str:
    return f"{lim.target} accepts {lim.accepts_bytes} B with {_static(lim)} B static: over by {lim.over_bytes} B"


def _where(r: Request) -> str:
    return "this GPU" if r.here is None or len(r.here.target) > 24 else f"this {r.here.target}"


def _wrapped(parts: list[str], indent: str) -> list[str]:
    """``parts`` joined by "; " into lines of at most WIDTH, broken between parts."""
    lines = [indent + parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 2 + len(part) <= WIDTH:
            lines[-1] += "; " + part
        else:
            lines[-1] += ";"
            lines.append(indent + part)
    return lines


def _kernel_limit(r: Request) -> str:
    """The kernel's MaxDynamicSharedMemorySize at the refusal, and what became of it."""
    state = {False: "MaxDynamicSharedMemorySize never raised", True: "MaxDynamicSharedMemorySize set to it",
             None: "its MaxDynamicSharedMemorySize"}[r.kernel_limit_raised]
    return f"this kernel's limit was {r.kernel_limit_bytes} B ({state})"


def cause_lines(r: Request) -> list[str]:
    """Why a refused request was refused, as far as its records tell: its cause, or what is known."""
    where, threads = _where(r), r.threads or 0
    if r.cause is Cause.GPU_LIMIT and r.here is not None:
        return [f"    {_limit_text(r.here, where)}"]
    if r.cause is Cause.KERNEL_LIMIT:
        parts = [f"asked {r.requested_bytes} B at launch",
                 f"{_kernel_limit(r)}: over by {r.over_kernel_limit_bytes} B"]
        if r.here is not None and r.here.accepts_bytes is not None:
            parts.append(f"{'the GPU' if where == 'this GPU' else where} accepts up to {r.here.accepts_bytes} B "
                         "after cudaFuncSetAttribute")
        else:
            parts.append("cudaFuncSetAttribute(MaxDynamicSharedMemorySize) raises it to what the GPU accepts")
        return _wrapped(parts, "    ")
    if r.cause is Cause.THREADS:
        most = (f"this kernel accepts at most {r.max_threads}" if r.max_threads is not None
                else f"a block has at most {MAX_THREADS_PER_BLOCK}")
        return _wrapped([f"a block of {threads} threads; {most} threads per block", "not shared memory"], "    ")
    if r.cause is Cause.REGISTERS:
        held = block_registers(r.registers or 0, threads)
        return _wrapped([f"{r.registers} registers x {threads} threads: {held} as warps are given them, over the "
                         f"{MAX_REGISTERS_PER_BLOCK} of a block", "not shared memory"], "    ")
    if r.cause is Cause.CLUSTER:
        cluster = "x".join(map(str, r.cluster)) if r.cluster and any(r.cluster) else None
        return _wrapped([f"the driver refused its cluster{f' of {cluster}' if cluster else ''} ({r.result})",
                         "not shared memory"], "    ")
    return _wrapped(_unknown(r, where), "    ")


def _unknown(r: Request, where: str) -> list[str]:
    """What is known of a refusal whose cause the records do not tell."""
    parts = []
    if r.here is not None and r.here.accepts_bytes is not None:
        parts.append(f"within what {where} accepts ({r.here.accepts_bytes} B with {_static(r.here)} B static)")
    else:
        parts.append("no limit of the GPU known here (give --report or --arch)")
    if r.kind != "attribute":
        if r.kernel_limit_bytes is not None:
            parts.append(f"within {_kernel_limit(r)}")
        elif r.requested_bytes + (r.static_bytes or 0) > DEFAULT_SMEM_PER_BLOCK_BYTES:
            parts.append("this kernel's own limit was not recorded: above 48 KiB a kernel must first raise "
                         "MaxDynamicSharedMemorySize")
    parts.append("the records do not tell why it was refused")
    return parts


def _what(r: Request) -> list[str]:
    """What the request asked, of which call, and what became of it: the parts of a sentence."""
    if r.kind == "attribute":
        parts = [f"asked MaxDynamicSharedMemorySize = {r.requested_bytes} B ({r.api}: {r.result})"]
    elif r.kind == "refused graph launch":
        parts = [f"{r.api} refused ({r.result})", f"of its {r.graph_nodes} kernel nodes, this one asks the most: "
                 f"{r.requested_bytes} B" if r.graph_nodes else "the graph's kernel nodes were not recorded"]
    else:
        parts = [f"{r.kind} with dynamic shared memory {r.requested_bytes} B ({r.api}: {r.result})"]
    if r.kind == "graph replay":
        parts.append(f"replayed {r.count} time{'s' if r.count != 1 else ''}" if r.count else "never replayed")
    elif r.count > 1:
        parts.append(f"{r.count} times")
    if r.processes > 1:
        parts[-1] += f" in {r.processes} processes"
    return parts


def request_lines(r: Request) -> list[str]:
    """One request: the kernel's name, then what it asked and what became of it, then the limit (for a
    refusal, its cause)."""
    lines = [f"  {_name(r)}", *_wrapped(_what(r), "    ")]
    if r.refused:
        lines += cause_lines(r)
    elif r.here is not None:
        lines.append(f"    {_limit_text(r.here, _where(r))}")
    if r.fit:
        lines += [f"    {part}" for part in r.fit]
    return lines


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def render_text(e: Explained) -> str:
    """The summary a person reads after the command's own output."""
    sets = sum(r.count for r in e.requests if r.kind == "attribute") + sum(s.count for s in e.settings)
    lines = ["", f"bisect-smem trace: {_plural(e.processes, 'process', 'processes')}, {_plural(e.kernels, 'kernel')}, "
                 f"{sets} attribute set(s), {len(e.refusals)} refusal(s)"]
    lines.append(f"  limits of the GPU it ran on: {e.here}" if e.here else "  limits: none known here (give --report REPORT.json or --arch)")
    if e.cupti_libraries:
        lines.append(f"  libcupti: {', '.join(e.cupti_libraries)}")
    lines += [f"  process {pid} ran untraced: {why}" for pid, why in e.untraced]
    for notice in e.unwritable[:MOST_LISTED]:
        lines.append(f"  process {notice.pid} ({notice.command or 'command not known'}) could not write its trace: "
                     f"{notice.reason} ({notice.path})")
    if len(e.unwritable) > MOST_LISTED:
        lines.append(f"  and {len(e.unwritable) - MOST_LISTED} more processes that could not write their traces")
    if e.torn_lines:
        lines.append(f"  {e.torn_lines} line(s) cut short by a process that was killed while writing")
    if e.past_table:
        launches = sum(p.count for p in e.past_table)
        lines.append(f"  {_plural(launches, 'launch', 'launches')} past the collector's table of configurations: "
                     "counted, their requests not recorded")
        for p in sorted(e.past_table, key=lambda p: -p.count)[:MOST_PAST_TABLE]:
            name = shorten(p.readable, NAME_WIDTH - 30) if p.readable else "kernels past both tables"
            lines.append(f"    {name}: {_plural(p.count, 'launch', 'launches')}")
    if e.refusals:
        lines.append("refused, worst first:")
        for r in e.refusals[:MOST_LISTED]:
            lines += request_lines(r)
    asked = [r for r in e.requests if not r.refused and r.kind == "attribute"]
    if asked:
        lines.append("attribute sets that succeeded:")
        for r in sorted(asked, key=lambda r: -r.requested_bytes)[:MOST_LISTED]:
            lines += request_lines(r)
    for s in e.settings[:MOST_LISTED]:
        lines.append(f"  {_name(s, NAME_WIDTH - 40)}: {s.attribute} = "
                     f"{s.value} ({s.api}: {s.result})" + (f", {s.count} times" if s.count > 1 else ""))
    if e.targets and e.at_ceiling:
        lines.append(f"  ({len(e.at_ceiling)} attribute set(s) asked for exactly this GPU's ceiling: a library asking "
                     "for the device's maximum asks each GPU its own)")
    for target in e.targets:
        over = e.would_not_fit(target)
        lines.append(f"on {target}: {len(over)} request(s) would not fit" + (":" if over else ""))
        for r in over[:MOST_LISTED]:
            lim = next(lim for lim in r.elsewhere if lim.target == target)
            asked_text, limit = f"    asked {r.requested_bytes} B ({r.api})", _short_limit(lim)
            one = f"{asked_text}; {limit}"
            lines += [f"  {_name(r)}", *([one] if len(one) <= WIDTH else [asked_text, f"    {limit}"])]
    return "\n".join(line if len(line) <= WIDTH else line[:WIDTH - 1] + "…" for line in lines) + "\n"


def skipped_lines(skipped: tuple[Skipped, ...]) -> list[str]:
    """One line per kind of line or file that could not be read, with its count and where it was first seen."""
    return [f"{s.kind.value}: {s.count} skipped (the first: {s.first})" for s in skipped]


@frozen(slots=True)
class UntracedProcess:
    """A process the collector could not trace, and why."""

    pid: int
    reason: str


@frozen(slots=True)
class UnwritableTrace:
    """A process whose collector could not write its trace: its errno, in words, and the file it tried."""

    pid: int
    errno: int
    reason: str
    path: str
    command: str


@frozen(slots=True)
class SkippedLines:
    """Lines or files of the trace of one kind that could not be read."""

    kind: str
    description: str
    count: int
    first: str  # the file (and line) of the first


@frozen(slots=True)
class RequestMade:
    """One distinct request: an attribute set of MaxDynamicSharedMemorySize, or a launch or graph node with
    dynamic shared memory, with the limits it met and, for a refusal, its cause."""

    pid: int
    kind: str
    api: str
    kernel: str | None
    readable: str | None
    requested_bytes: int
    static_bytes: int | None
    result: str
    refused: bool
    count: int
    block: tuple[int, int, int] | None
    cluster: tuple[int, int, int] | None
    here: Limit | None
    elsewhere: tuple[Limit, ...]
    fit: str | None
    processes: int
    cause: str | None
    kernel_limit_bytes: int | None
    max_threads: int | None
    registers: int | None
    graph_nodes: int
    over_kernel_limit_bytes: int | None


@frozen(slots=True)
class TraceSummary:
    """Every shared-memory request a traced command's CUDA processes made, explained against the limits of the
    GPU it ran on and of the other targets asked for, and what fit's library rules (CUTLASS, Triton) say of a
    kernel its name describes; identical requests are one entry with a count. Fields are only ever added."""

    schema: str
    processes: int
    untraced: tuple[UntracedProcess, ...]
    cupti_libraries: tuple[str, ...]
    kernels: int
    limits: str | None
    targets: tuple[str, ...]
    torn_lines: int
    past_table: tuple[PastTableKernel, ...]
    unwritable: tuple[UnwritableTrace, ...]
    skipped: tuple[SkippedLines, ...]
    requests: tuple[RequestMade, ...]
    settings: tuple[Setting, ...]


def skip_kind(kind: Skip) -> str:
    """A kind of skipped line as the JSON names it."""
    return kind.name.lower()


def _request_made(r: Request) -> RequestMade:
    return RequestMade(r.pid, r.kind, r.api, r.kernel, r.readable, r.requested_bytes, r.static_bytes, r.result,
                       r.refused, r.count, r.block, r.cluster, r.here, r.elsewhere, "; ".join(r.fit) if r.fit else None,
                       r.processes, r.cause.value if r.cause else None, r.kernel_limit_bytes, r.max_threads,
                       r.registers, r.graph_nodes, r.over_kernel_limit_bytes)


def summary(e: Explained) -> TraceSummary:
    """The JSON summary's records: every request with its whole names, the limits it met, the counts."""
    return TraceSummary(
        TRACE_SCHEMA, e.processes, tuple(UntracedProcess(pid, why) for pid, why in e.untraced),
        e.cupti_libraries, e.kernels, e.here, e.targets, e.torn_lines, e.past_table,
        tuple(UnwritableTrace(n.pid, n.errno, n.reason, n.path, n.command) for n in e.unwritable),
        tuple(SkippedLines(skip_kind(s.kind), s.kind.value, s.count, s.first) for s in e.skipped),
        tuple(map(_request_made, e.requests)), e.settings)


def _holds_records(annotation: Any) -> bool:
    return dataclasses.is_dataclass(annotation) or any(map(_holds_records, typing.get_args(annotation)))


_Layout = tuple[Callable[[Any], tuple[Any, ...]], tuple[str, ...], tuple[str, ...]]
_LAYOUTS: dict[type, _Layout] = {}


def _layout(record: type) -> _Layout:
    """A record type's field values getter, its field names, and the fields that hold records."""
    hints = typing.get_type_hints(record)
    names = tuple(f.name for f in dataclasses.fields(record))
    _LAYOUTS[record] = operator.attrgetter(*names), names, tuple(n for n in names if _holds_records(hints[n]))
    return _LAYOUTS[record]


def _plain(record: Any) -> dict[str, Any]:
    """A record as a dict, the records in it too (a tuple of numbers stays a tuple, which every JSON encoder
    writes as an array). Each record type is laid out once and read by attrgetter: a summary may hold a
    hundred thousand requests."""
    values, names, nested = _LAYOUTS.get(type(record)) or _layout(type(record))
    plain = dict(zip(names, values(record), strict=True))
    for name in nested:
        value = plain[name]
        if type(value) is tuple:
            plain[name] = [_plain(v) for v in value]
        elif value is not None:
            plain[name] = _plain(value)
    return plain


def to_json(e: Explained) -> dict[str, Any]:
    """The JSON summary as plain values."""
    return _plain(summary(e))


def render_json(e: Explained) -> str:
    """The JSON summary as text, keys sorted: by orjson where it is installed (the standard encoder indents in
    pure Python, ten times slower and six times the memory for a trace of a hundred thousand requests)."""
    document = to_json(e)
    try:
        import orjson  # deferred: optional (the fast extra); where it is missing the standard encoder serves
    except ImportError:  # pragma: no cover - the standard encoder alone
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
