"""What ``fit`` shows: the answer on the first line, then (for several targets or --verbose) the table,
and for a GEMM kernel where every byte goes. Text only; cli.py prints it."""

from __future__ import annotations

from tabulate import tabulate

from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.targets import DOES_NOT_BUILD, DOES_NOT_FIT, UNKNOWN, FitRequest, FitResult
from bisect_smem.core.text import dash


def margin(r: FitResult) -> str:
    """``over by N`` or ``N to spare`` against the opt-in limit."""
    if r.over_bytes is None:
        return "-"
    return f"over by {r.over_bytes}" if r.over_bytes > 0 else f"{-r.over_bytes} to spare"


def _head(request: FitRequest, source: str) -> str:
    return (f"kernel: {request.dynamic_bytes} B dynamic + {request.static_bytes} B static = {request.total_bytes} B "
            f"per block, {request.threads} threads" + (f" ({source})" if source else ""))


def short_name(r: FitResult) -> str:
    """``sm_120``, ``device 0``, or a measured model with its driver."""
    return r.target_short or r.target


def answer(r: FitResult) -> str:
    """One target's answer in a sentence: fits, with which margin, or why not."""
    where = short_name(r)
    if r.verdict == UNKNOWN:
        return f"{where}: limit unknown"
    if r.verdict == DOES_NOT_FIT:
        return f"{where}: does not fit: {r.total_bytes} B against {r.optin_limit_bytes} B, over by {r.over_bytes} B"
    how = "without opt-in" if r.verdict == "fits without opt-in" else "with opt-in"
    return f"{where}: fits {how}: {r.total_bytes} of {r.optin_limit_bytes} B, {dash(r.blocks_per_sm)} block(s)/SM"


def render(request: FitRequest, source: str, results: list[FitResult], verbose: bool = False) -> str:
    """One size against every target: the answer line, then (several targets, --verbose) the table."""
    lines = ["; ".join(answer(r) for r in results) or "no targets",
             _head(request, source)]
    if verbose or len(results) > 1:
        rows = [(r.target, r.kind, r.verdict, dash(r.optin_limit_bytes), margin(r), dash(r.blocks_per_sm))
                for r in results]
        lines.append(tabulate(rows, headers=("target", "limits", "verdict", "opt-in limit B", "margin B",
                                             "blocks/SM"), disable_numparse=True))
    return "\n".join(lines)


def launch_bytes(r: FitResult) -> int | None:
    """What the launch asks for: CUTLASS's SharedStorageSize or Triton's metadata.shared."""
    return r.triton_shared_bytes if r.triton_version else r.shared_storage_bytes


def triton_answer(r: FitResult) -> str:
    """Triton's matmul on one target: "num_stages 3 fits on sm_90: 196608 of 232448 B; 4 would need ..."."""
    where = short_name(r)
    if r.triton_shared_bytes is None:
        return f"{where}: no num_stages: {r.build_reason}"
    if r.verdict == UNKNOWN:
        return f"{where}: num_stages {dash(r.stages)}; limit unknown"
    if r.verdict == DOES_NOT_FIT:
        return (f"num_stages {r.stages} does not fit on {where}: {r.triton_shared_bytes} B against "
                f"{r.optin_limit_bytes} B, over by {r.over_bytes} B (OutOfResources)")
    more = f"; {r.stages + 1} would need {r.next_stage_bytes} B" if r.next_stage_bytes else ""
    return f"num_stages {r.stages} fits on {where}: {r.triton_shared_bytes} of {r.optin_limit_bytes} B{more}"


def gemm_answer(r: FitResult) -> str:
    """A CUTLASS kernel on one target: "3 stages fit on sm_120: 97280 of 101376 B; 4 would need 124928 B"."""
    if r.triton_version:
        return triton_answer(r)
    where = short_name(r)
    if r.shared_storage_bytes is None:
        return f"{where}: no stage count: {r.build_reason}"
    if r.verdict == DOES_NOT_BUILD:
        return (f"{where}: does not build: {r.build_reason} ({r.stages} stage(s) of {r.stage_bytes} B, "
                f"{r.shared_storage_bytes} B)")
    if r.verdict == UNKNOWN:
        return f"{where}: {r.stages} stages, {_asked(r)}; limit unknown"
    if r.verdict == DOES_NOT_FIT:
        return _does_not_fit(r, where)
    more = f"; {r.stages + 1} would need {r.next_stage_bytes} B" if r.next_stage_bytes else ""
    return f"{r.stages} stages fit on {where}: {_asked(r, ' of')} {r.optin_limit_bytes} B{more}"


def _asked(r: FitResult, joint: str = "") -> str:
    """The launch's bytes as counted against the limit: SharedStorageSize, and the --static bytes beside it."""
    static = r.total_bytes - (r.shared_storage_bytes or 0)
    if not static:
        return f"{r.shared_storage_bytes}{joint or ' B'}"
    return f"{r.shared_storage_bytes} B + {static} B static{joint}"


def _does_not_fit(r: FitResult, where: str) -> str:
    """A CUTLASS build over the limit: whose stage count it was (the builder's own overflow, said so),
    by how much, and what would fit instead."""
    if r.auto_rule_overflows:
        head = (f"CUTLASS {r.cutlass_version}'s auto rule picks {r.stages} stages; the kernel needs "
                f"{_asked(r)} against {r.optin_limit_bytes} B on {where}: over by {r.over_bytes} B. "
                "It compiles and fails at initialize() with Error Internal.")
    else:
        head = (f"{r.stages} stages do not fit on {where}: {_asked(r)} against "
                f"{r.optin_limit_bytes} B, over by {r.over_bytes} B.")
    instead = []
    if r.fitting_stages is not None:
        instead.append(f"{r.fitting_stages} stages fit (StageCount<{r.fitting_stages}>: {r.fitting_bytes} B)")
    if r.swap_ab_bytes is not None:
        instead.append(f"{'so does ' if instead else ''}swap_ab ({r.swap_ab_bytes} B){'' if instead else ' fits'}")
    return f"{head} {', and '.join(instead)}." if instead else head


def triton_breakdown(r: FitResult) -> list[str]:
    """Where Triton's metadata.shared comes from: the operands' buffers, and the epilogue's scratch that
    the allocator places over them once the loop is done."""
    lines = [f"{short_name(r)}: {r.triton_shared_bytes} B = metadata.shared ({r.stage_rule}, num_stages {r.stages}, "
             f"num_warps {r.warps}; the allocator's highest byte)"]
    lines += [f"  {bytes_:>7} B  {name}" for name, bytes_ in r.parts or ()]
    return lines


def breakdown(r: FitResult) -> list[str]:
    """Where every byte of one build goes, and against which limit."""
    if not r.parts:
        return []
    if r.triton_version:
        lines = triton_breakdown(r)
    else:
        lines = [f"{short_name(r)}: {r.shared_storage_bytes} B = GemmKernel::SharedStorageSize ({r.stage_rule}; "
                 f"stage {r.stage_bytes} B, builder capacity {r.capacity_bytes} B, epilogue carveout "
                 f"{r.epilogue_bytes} B)"]
        lines += [f"  {bytes_:>7} B  {name}" for name, bytes_ in r.parts]
    if r.optin_limit_bytes is not None:
        lines.append(f"  against the opt-in limit {r.optin_limit_bytes} B: {margin(r)}")
    return lines


def render_gemm(source: str, results: list[FitResult], verbose: bool) -> str:
    """CUTLASS kernels: one answer per target (the first line is the first), then where the bytes go."""
    lines = [gemm_answer(r) for r in results]
    tiles = list(dict.fromkeys(r.tile for r in results))
    if len(tiles) > 1:
        lines = [f"{r.tile}: {line}" for r, line in zip(results, lines, strict=True)]
    lines.append(f"kernel: {source}" if source else "kernel:")
    if verbose or len(results) > 1:
        triton = any(r.triton_version for r in results)
        rows = [(r.tile, r.target, stages_cell(r), dash(r.stage_bytes), dash(r.mainloop_bytes),
                 dash(r.epilogue_bytes), *(() if triton else (dash(r.kernel_bytes),)), dash(launch_bytes(r)),
                 dash(r.optin_limit_bytes), margin(r) if launch_bytes(r) else "-") for r in results]
        total = "metadata.shared B" if triton else "SharedStorageSize B"
        lines.append(tabulate(rows, headers=("tile", "target", "num_stages" if triton else "stages", "B/stage",
                                             "mainloop B", "epilogue B", *(() if triton else ("kernel B",)), total,
                                             "opt-in limit B", "margin B"), disable_numparse=True))
    shown = results if verbose or len(results) <= 3 else results[:1]
    for r in shown:
        lines += breakdown(r)
    return "\n".join(lines)


def stages_cell(r: FitResult) -> str:
    """A stage count as a person reads it: ``4``, ``0: does not fit``, ``?`` when the limit is unknown."""
    if r.stages is None:
        return "-"
    if r.verdict == DOES_NOT_BUILD:
        return f"{r.stages}: does not build"
    if r.verdict == DOES_NOT_FIT:
        # Only counts that fit are suggested: the most StageCount<S> under the limit, or none.
        return f"{r.fitting_stages} (auto {r.stages} is over)" if r.fitting_stages else f"none ({r.stages} is over)"
    return "?" if r.verdict == UNKNOWN else str(r.stages)


def render_explain(request: FitRequest, explained: Explained, results: list[FitResult],
                   alternatives: list[FitResult], notes: tuple[str, ...] = (), library: str | None = None) -> str:
    """A library's shared-memory error: by how much it is over on which target, and what the tile allows.
    ``library`` is whose message or tiles these are (None: a byte count without tiles)."""
    need = explained.required_bytes
    if explained.hardware_limit_bytes is not None:
        limit = explained.hardware_limit_bytes
        over = f"over by {need - limit} B" if need > limit else f"{limit - need} B to spare"
        lines = [f"{library}: the kernel needs {need} B of shared memory; the GPU it ran on allows {limit} B: "
                 f"{over}."]
        if explained.limit_matches:
            lines.append(f"{limit} B is the published opt-in limit of {', '.join(explained.limit_matches)}.")
        else:
            lines.append(f"{limit} B is no published opt-in limit (a MIG slice or a virtual GPU may give less).")
    elif library in (None, "CUTLASS"):
        lines = [f"the kernel needs {need} B of shared memory per block (CUTLASS: sizeof(SharedStorage), which "
                 "cudaFuncSetAttribute(MaxDynamicSharedMemorySize) refuses above the opt-in limit: 'Error Internal')."]
    else:
        lines = [f"the kernel needs {need} B of shared memory per block ({library}'s tiles below)."]
    lines += notes
    tiles = list(dict.fromkeys(str(a.tile) for a in alternatives))
    by_target: dict[tuple[str, str], FitResult] = {(a.target, str(a.tile)): a for a in alternatives}
    rows = []
    for r in results:
        extra = [stages_cell(by_target[(r.target, t)]) for t in tiles]
        rows.append((r.target, r.kind, dash(r.optin_limit_bytes), r.verdict, margin(r), *extra))
    word = "num_stages" if any(a.triton_version for a in alternatives) else "stages"
    headers = ("target", "limits", "opt-in limit B", "verdict", "margin B", *(f"{t} {word} that fit" for t in tiles))
    lines.append(tabulate(rows, headers=headers, disable_numparse=True))
    if request.static_bytes:
        lines.append(f"with {request.static_bytes} B static")
    return "\n".join(lines)
