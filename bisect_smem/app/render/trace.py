"""A trace, explained, as text within 100 columns (processes, kernels, attribute sets, refusals worst first
with their causes, kernels that would not fit on the other targets) and as the JSON summary of schema
trace.v2. Identical requests are one line with a count."""

from __future__ import annotations

import json
from typing import Any

from bisect_smem.analysis.trace import Cause, Explained, Limit, Request, shorten
from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_REGISTERS_PER_BLOCK,
    MAX_THREADS_PER_BLOCK,
    block_registers,
)
from bisect_smem.core.trace_events import Skipped

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
                 f"{_kernel_limit(r)}: over by {r.requested_bytes - (r.kernel_limit_bytes or 0)} B"]
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


def _limit_json(lim: Limit | None) -> dict[str, Any] | None:
    if lim is None:
        return None
    return {"target": lim.target, "kind": lim.kind, "optin_limit_bytes": lim.optin_limit_bytes,
            "accepts_bytes": lim.accepts_bytes, "over_bytes": lim.over_bytes, "fits": lim.fits}


def to_json(e: Explained) -> dict[str, Any]:
    """The JSON summary: every request with its whole names, the limits it met, the counts."""
    return {
        "schema": TRACE_SCHEMA,
        "processes": e.processes,
        "untraced": [{"pid": pid, "reason": why} for pid, why in e.untraced],
        "cupti_libraries": list(e.cupti_libraries),
        "kernels": e.kernels,
        "limits": e.here,
        "targets": list(e.targets),
        "torn_lines": e.torn_lines,
        "past_table": [{"kernel": p.kernel, "readable": p.readable, "count": p.count, "processes": p.processes}
                       for p in e.past_table],
        "unwritable": [{"pid": n.pid, "errno": n.errno, "reason": n.reason, "path": n.path, "command": n.command}
                       for n in e.unwritable],
        "skipped": [{"kind": s.kind.name.lower(), "description": s.kind.value, "count": s.count, "first": s.first}
                    for s in e.skipped],
        "requests": [{"pid": r.pid, "kind": r.kind, "api": r.api, "kernel": r.kernel, "readable": r.readable,
                      "requested_bytes": r.requested_bytes, "static_bytes": r.static_bytes, "result": r.result,
                      "refused": r.refused, "count": r.count, "block": list(r.block) if r.block else None,
                      "cluster": list(r.cluster) if r.cluster else None, "here": _limit_json(r.here),
                      "elsewhere": [_limit_json(lim) for lim in r.elsewhere],
                      "fit": "; ".join(r.fit) if r.fit else None, "processes": r.processes,
                      "cause": r.cause.value if r.cause else None, "kernel_limit_bytes": r.kernel_limit_bytes,
                      "max_threads": r.max_threads, "registers": r.registers, "graph_nodes": r.graph_nodes}
                     for r in e.requests],
        "settings": [{"pid": s.pid, "api": s.api, "kernel": s.kernel, "readable": s.readable, "attribute": s.attribute,
                      "value": s.value, "result": s.result, "refused": s.refused, "count": s.count}
                     for s in e.settings],
    }


def render_json(e: Explained) -> str:
    """The JSON summary as text, keys sorted: by orjson where it is installed (the standard encoder indents in
    pure Python, ten times slower and six times the memory for a trace of a hundred thousand requests)."""
    document = to_json(e)
    try:
        import orjson  # deferred: optional (the fast extra); where it is missing the standard encoder serves
    except ImportError:  # pragma: no cover - the standard encoder alone
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
