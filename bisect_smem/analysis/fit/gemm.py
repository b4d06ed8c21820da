"""A CUTLASS GEMM kernel on a target: the build CUTLASS makes for the target's architecture (its stage
count and SharedStorageSize), whether that launch fits the target's limits, and what one more stage
would need."""

from __future__ import annotations

from dataclasses import replace

from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION, sm90, sm100, sm120
from bisect_smem.analysis.fit.cutlass.gemm import Build, GemmKernel
from bisect_smem.analysis.fit.targets import DOES_NOT_FIT, FitRequest, FitResult, Target, evaluate
from bisect_smem.core.hardware import gemm_family

FAMILIES = {"sm90": sm90.build, "sm100": sm100.build, "sm120": sm120.build}
DOES_NOT_BUILD = "does not build"


def cutlass_build(kernel: GemmKernel, target: Target) -> Build:
    """What CUTLASS builds of ``kernel`` for the target's architecture; no family: does not build."""
    family = gemm_family(target.compute_capability)
    if family is None:
        return Build("none", False, "no CUTLASS 3.x/4.x collective builder before sm_90 (or the architecture is "
                                    "unknown)")
    return FAMILIES[family](kernel)


def evaluate_cutlass(kernel: GemmKernel, static_bytes: int, threads: int, target: Target) -> FitResult:
    """``kernel`` built for ``target``: stages, every storage's bytes, and the launch against its limits."""
    built = cutlass_build(kernel, target)
    about = {"tile": f"{kernel.m}x{kernel.n}x{kernel.k}", "stages_requested": kernel.stages or "auto",
             "stage_rule": f"cutlass {CUTLASS_VERSION} {built.family}", "cutlass_version": CUTLASS_VERSION,
             "builds": built.builds, "build_reason": built.reason, "stages": built.stages,
             "stage_bytes": built.stage_bytes, "capacity_bytes": built.capacity_bytes,
             "mainloop_bytes": built.mainloop_bytes, "epilogue_bytes": built.epilogue_bytes,
             "kernel_bytes": built.kernel_bytes, "shared_storage_bytes": built.shared_storage_bytes,
             "parts": [list(p) for p in built.parts]}
    total = built.shared_storage_bytes
    if total is None:
        result = evaluate(FitRequest(0, static_bytes, threads), target)
        return replace(result, verdict=DOES_NOT_BUILD, over_bytes=None, blocks_per_sm=None, **about)
    result = replace(evaluate(FitRequest(total, static_bytes, threads), target), **about)
    if not built.builds:
        result = replace(result, verdict=DOES_NOT_BUILD, blocks_per_sm=None)
    elif result.verdict != DOES_NOT_FIT and result.optin_limit_bytes is not None:
        more = FAMILIES[gemm_family(target.compute_capability)](replace(kernel, stages=built.stages + 1))
        result = replace(result, next_stage_bytes=more.shared_storage_bytes)
    return result
