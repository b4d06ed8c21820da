"""The tables ``fit`` shows: one size against every target, stage counts per target, tiles by targets,
and a library's error explained. Text only; cli.py prints it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tabulate import tabulate

from bisect_smem.analysis.fit import DOES_NOT_FIT, UNKNOWN, FitRequest, FitResult
from bisect_smem.core.text import dash

if TYPE_CHECKING:
    from bisect_smem.app.fit_command import Explained


def margin(r: FitResult) -> str:
    """``over by N`` or ``N to spare`` against the opt-in limit."""
    if r.over_bytes is None:
        return "-"
    return f"over by {r.over_bytes}" if r.over_bytes > 0 else f"{-r.over_bytes} to spare"


def _head(request: FitRequest, source: str) -> str:
    return (f"kernel: {request.dynamic_bytes} B dynamic + {request.static_bytes} B static = {request.total_bytes} B "
            f"per block, {request.threads} threads" + (f" ({source})" if source else ""))


def render(request: FitRequest, source: str, results: list[FitResult]) -> str:
    """One size against every target: verdict, margin, blocks per SM."""
    rows = [(r.target, r.kind, r.verdict, dash(r.optin_limit_bytes), margin(r), dash(r.blocks_per_sm))
            for r in results]
    table = tabulate(rows, headers=("target", "limits", "verdict", "opt-in limit B", "margin B", "blocks/SM"),
                     disable_numparse=True)
    return "\n".join([_head(request, source), table])


def stages_cell(r: FitResult) -> str:
    """A stage count as a person reads it: ``4``, ``0: does not fit``, ``?`` when the limit is unknown."""
    if r.verdict == UNKNOWN:
        return "?"
    return "0: does not fit" if r.stages == 0 else str(r.stages)


def render_stages(request: FitRequest, source: str, results: list[FitResult]) -> str:
    """One tile, ``--stages auto``: per target the stage count, the bytes used and the bytes left."""
    rows = []
    for r in results:
        left = "-" if r.left_bytes is None else (str(r.left_bytes) if r.left_bytes >= 0 else f"over by {-r.left_bytes}")
        rows.append((r.target, r.kind, dash(r.optin_limit_bytes), dash(r.stage_rule), stages_cell(r),
                     dash(r.stage_bytes), dash(r.used_bytes), left, dash(r.blocks_per_sm)))
    head = (f"kernel: {request.static_bytes} B static, {request.threads} threads"
            + (f" ({source})" if source else ""))
    table = tabulate(rows, headers=("target", "limits", "opt-in limit B", "rule", "stages", "B/stage", "used B",
                                    "left B", "blocks/SM"), disable_numparse=True)
    return "\n".join([head, table])


def short_label(r: FitResult) -> str:
    """A column header: ``sm_90``, ``device 0``, or a measured model with its driver."""
    if r.kind == "published":
        return r.target.split(" ")[0]
    if r.source is None:
        return r.target.split(":")[0]
    return f"{r.target.split(' (cc')[0]} {r.driver_version or ''}".strip()


def _matrix_cell(r: FitResult, auto: bool) -> str:
    if auto or r.verdict == UNKNOWN:
        return stages_cell(r)
    if r.verdict == DOES_NOT_FIT:
        return f"over by {r.over_bytes}"
    return "fits" if r.verdict == "fits without opt-in" else "opt-in"


def render_matrix(request: FitRequest, source: str, results: list[FitResult], auto: bool) -> str:
    """Tiles by targets: stage counts (auto) or whether the fixed stage count fits, one row per tile."""
    columns = list(dict.fromkeys(r.target for r in results))
    labels = {r.target: short_label(r) for r in results}
    by_tile: dict[str, dict[str, str]] = {}
    for r in results:
        by_tile.setdefault(str(r.tile), {})[r.target] = _matrix_cell(r, auto)
    rows = [(tile, *(cells.get(c, "-") for c in columns)) for tile, cells in by_tile.items()]
    what = "stages that fit" if auto else f"{results[0].stages_requested} stage(s)"
    head = (f"kernel: {what} per tile and target, {request.static_bytes} B static, {request.threads} threads"
            + (f" ({source})" if source else ""))
    table = tabulate(rows, headers=("tile", *(labels[c] for c in columns)), disable_numparse=True)
    legend = [f"  {c}" if c.startswith(f"{labels[c]}:") else f"  {labels[c]}: {c}" for c in columns if labels[c] != c]
    return "\n".join([head, table, *(["targets:", *legend] if legend else [])])


def render_explain(request: FitRequest, explained: Explained, results: list[FitResult],
                   alternatives: list[FitResult]) -> str:
    """A library's shared-memory error: by how much it is over on which target, and what the tile allows."""
    need = explained.required_bytes
    if explained.kind == "triton":
        limit = explained.hardware_limit_bytes or 0
        over = f"over by {need - limit} B" if need > limit else f"{limit - need} B to spare"
        lines = [f"Triton: the kernel needs {need} B of shared memory; the GPU it ran on allows {limit} B: {over}."]
        if explained.limit_matches:
            lines.append(f"{limit} B is the published opt-in limit of {', '.join(explained.limit_matches)}.")
        else:
            lines.append(f"{limit} B is no published opt-in limit (a MIG slice or a virtual GPU may give less).")
    else:
        lines = [f"the kernel needs {need} B of shared memory per block (CUTLASS: sizeof(SharedStorage), which "
                 "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) refuses above the opt-in limit: 'Error Internal')."]
    tiles = list(dict.fromkeys(str(a.tile) for a in alternatives))
    by_target: dict[tuple[str, str], FitResult] = {(a.target, str(a.tile)): a for a in alternatives}
    rows = []
    for r in results:
        extra = [stages_cell(by_target[(r.target, t)]) for t in tiles]
        rows.append((r.target, r.kind, dash(r.optin_limit_bytes), r.verdict, margin(r), *extra))
    headers = ("target", "limits", "opt-in limit B", "verdict", "margin B", *(f"{t} stages that fit" for t in tiles))
    lines.append(tabulate(rows, headers=headers, disable_numparse=True))
    if request.static_bytes:
        lines.append(f"with {request.static_bytes} B static")
    return "\n".join(lines)
