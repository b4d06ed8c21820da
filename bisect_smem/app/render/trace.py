"""A trace, explained, as text within 100 columns (processes, kernels, attribute sets, refusals worst first,
kernels that would not fit on the other targets) and as the JSON summary of schema trace.v1."""

from __future__ import annotations

import json
from typing import Any

from bisect_smem.analysis.trace import Explained, Limit, Request, shorten

WIDTH = 100
TRACE_SCHEMA = "bisect_smem/trace/v1"
NAME_WIDTH = 96
MOST_LISTED = 20  # requests listed per section; the JSON has them all


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


def request_lines(r: Request) -> list[str]:
    """One request: the kernel's name, then what it asked and what became of it, then the limit."""
    what = ("asked MaxDynamicSharedMemorySize = " if r.kind == "attribute" else f"{r.kind} with dynamic shared "
            "memory ") + f"{r.requested_bytes} B ({r.api}: {r.result})"
    if r.count > 1:
        what += f", {r.count} times"
    lines = [f"  {_name(r)}", f"    {what}"]
    if r.here is not None:
        where = f"this {r.here.target}" if len(r.here.target) <= 24 else "this GPU"
        lines.append(f"    {_limit_text(r.here, where)}")
    if r.fit:
        lines += [f"    {part}" for part in r.fit]
    return lines


def render_text(e: Explained) -> str:
    """The summary a person reads after the command's own output."""
    lines = ["", f"bisect-smem trace: {e.processes} process{'es' if e.processes != 1 else ''}, {e.kernels} kernel"
                 f"{'s' if e.kernels != 1 else ''}, {sum(r.kind == 'attribute' for r in e.requests) + len(e.settings)}"
                 f" attribute set(s), {len(e.refusals)} refusal(s)"]
    lines.append(f"  limits of the GPU it ran on: {e.here}" if e.here else "  limits: none known here (give --report REPORT.json or --arch)")
    if e.cupti_libraries:
        lines.append(f"  libcupti: {', '.join(e.cupti_libraries)}")
    lines += [f"  process {pid} ran untraced: {why}" for pid, why in e.untraced]
    if e.torn_lines:
        lines.append(f"  {e.torn_lines} line(s) cut short by a process that was killed while writing")
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
                     f"{s.value} ({s.api}: {s.result})")
    if e.targets and e.at_ceiling:
        lines.append(f"  ({len(e.at_ceiling)} attribute set(s) asked for exactly this GPU's ceiling: a library asking "
                     "for the device's maximum asks each GPU its own)")
    for target in e.targets:
        over = e.would_not_fit(target)
        lines.append(f"on {target}: {len(over)} request(s) would not fit" + (":" if over else ""))
        for r in over[:MOST_LISTED]:
            lim = next(lim for lim in r.elsewhere if lim.target == target)
            asked, limit = f"    asked {r.requested_bytes} B ({r.api})", _short_limit(lim)
            one = f"{asked}; {limit}"
            lines += [f"  {_name(r)}", *([one] if len(one) <= WIDTH else [asked, f"    {limit}"])]
    return "\n".join(line if len(line) <= WIDTH else line[:WIDTH - 1] + "…" for line in lines) + "\n"


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
        "requests": [{"pid": r.pid, "kind": r.kind, "api": r.api, "kernel": r.kernel, "readable": r.readable,
                      "requested_bytes": r.requested_bytes, "static_bytes": r.static_bytes, "result": r.result,
                      "refused": r.refused, "count": r.count, "block": list(r.block) if r.block else None,
                      "cluster": list(r.cluster) if r.cluster else None, "here": _limit_json(r.here),
                      "elsewhere": [_limit_json(lim) for lim in r.elsewhere],
                      "fit": "; ".join(r.fit) if r.fit else None} for r in e.requests],
        "settings": [{"pid": s.pid, "api": s.api, "kernel": s.kernel, "readable": s.readable, "attribute": s.attribute,
                      "value": s.value, "result": s.result, "refused": s.refused} for s in e.settings],
    }


def render_json(e: Explained) -> str:
    """The JSON summary as text, keys sorted."""
    return json.dumps(to_json(e), indent=2, sort_keys=True) + "\n"
