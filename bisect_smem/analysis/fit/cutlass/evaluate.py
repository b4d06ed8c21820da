"""A CUTLASS GEMM kernel on a target: the build CUTLASS makes for the target's architecture (its stage
count and SharedStorageSize), whether that launch fits the target's limits, and what one more stage
would need."""

from __future__ import annotations

from dataclasses import replace

from bisect_smem.analysis.fit.cutlass import LIBRARY, launchers, rules_release, sm90, sm100, sm120
from bisect_smem.analysis.fit.cutlass.gemm import MIN_STAGES, Build, GemmKernel
from bisect_smem.analysis.fit.targets import (
    DOES_NOT_BUILD,
    DOES_NOT_FIT,
    UNKNOWN,
    FitRequest,
    FitResult,
    Labels,
    Target,
    evaluate,
)
from bisect_smem.core.hardware import block_request_bytes, gemm_family

FAMILIES = {"sm90": sm90.build, "sm100": sm100.build, "sm120": sm120.build}
# Each family's smem capacity as its builders know it (detail::sm90_smem_capacity_bytes, ...): a kernel
# the automatic stage count makes larger than this is the builder's own overflow.
CAPACITY = {"sm90": sm90.CAPACITY_BYTES, "sm100": sm100.CAPACITY_BYTES, "sm120": sm120.CAPACITY_BYTES}
# CUTLASS's words for what fit shows of its kernel.
LABELS = Labels(fixed="StageCount<{}>", launch="SharedStorageSize", launch_in_full="GemmKernel::SharedStorageSize",
                derivation="{stage_rule}; stage {stage_bytes} B, builder capacity {capacity_bytes} B, epilogue "
                           "carveout {epilogue_bytes} B",
                overflow="It compiles and fails at initialize() with Error Internal.",
                size="CUTLASS: sizeof(SharedStorage), which cudaFuncSetAttribute(MaxDynamicSharedMemorySize) refuses "
                     "above the opt-in limit: 'Error Internal'",
                columns=(("kernel B", "kernel_bytes"),), variants=(("swap_ab", "swap_ab_bytes"),))


def cutlass_build(kernel: GemmKernel, target: Target) -> Build:
    """What CUTLASS builds of ``kernel`` for the target's architecture; no family: does not build."""
    family = gemm_family(target.compute_capability)
    if family is None:
        return Build("none", False, "no CUTLASS 3.x/4.x collective builder before sm_90 (or the architecture is "
                                    "unknown)")
    if kernel.launcher is not None and (reason := launchers.not_modelled(family, target.compute_capability)):
        return Build(family, False, reason, modelled=False)
    if kernel.epilogue_schedule != "tma" and family != "sm100":
        return Build(family, False, f"the MoE launcher's {launchers.arch_name(family)} kernels have one epilogue: "
                                    "--epilogue-schedule nosmem is its sm_100 choice")
    return FAMILIES[family](kernel)


def evaluate_cutlass(kernel: GemmKernel, static_bytes: int, threads: int, target: Target) -> FitResult:
    """``kernel`` built for ``target``: stages, every storage's bytes, and the launch against its limits."""
    built = cutlass_build(kernel, target)
    family = gemm_family(target.compute_capability)
    details = {"capacity_bytes": built.capacity_bytes, "kernel_bytes": built.kernel_bytes, "swap_ab_bytes": None}
    about = {"library": LIBRARY, "version": kernel.cutlass_version, "labels": LABELS,
             "tile": f"{kernel.m}x{kernel.n}x{kernel.k}", "stages_requested": kernel.stages or "auto",
             "stage_rule": f"cutlass {rules_release(kernel.cutlass_version)} {built.family}",
             "builds": built.builds if built.modelled else None, "build_reason": built.explained,
             "stages": built.stages, "stage_bytes": built.stage_bytes,
             "mainloop_bytes": built.mainloop_bytes, "epilogue_bytes": built.epilogue_bytes,
             "launch_bytes": built.shared_storage_bytes, "parts": [list(p) for p in built.parts],
             "auto_rule_overflows": (built.overflows(CAPACITY[family]) if family and kernel.stages is None
                                     and built.modelled else None), "details": details,
             "notes": tuple(n for n in [launchers.not_generated(family, kernel)] if n) if family and kernel.launcher
             else ()}
    total = built.shared_storage_bytes
    if total is None:
        result = evaluate(FitRequest(0, static_bytes, threads), target)
        verdict = DOES_NOT_BUILD if built.modelled else UNKNOWN
        return replace(result, verdict=verdict, over_bytes=None, blocks_per_sm=None,
                       error=result.error if built.modelled else built.reason, **about)
    result = replace(evaluate(FitRequest(total, static_bytes, threads), target), **about)
    if not built.builds:
        return replace(result, verdict=DOES_NOT_BUILD, blocks_per_sm=None)
    if result.verdict == DOES_NOT_FIT and result.optin_limit_bytes is not None:
        instead = _instead(kernel, built, static_bytes, result.optin_limit_bytes, family)
        swap_ab = instead.pop("swap_ab_bytes", None)
        return replace(result, **instead, details={**details, "swap_ab_bytes": swap_ab})
    if result.optin_limit_bytes is not None:
        # One more stage is shown only where it would not fit: a count that fits is no limit.
        more = FAMILIES[family](replace(kernel, stages=built.stages + 1)).shared_storage_bytes
        if more is not None and block_request_bytes(more, static_bytes) > result.optin_limit_bytes:
            result = replace(result, next_stage_bytes=more)
    return result


def _instead(kernel: GemmKernel, built: Build, static_bytes: int, limit: int, family: str) -> dict[str, int | None]:
    """What would fit where ``built`` does not: the most stages (StageCount<S>, at least 2) under ``limit``,
    and for a launcher's kernel without swap_ab, the swap_ab build when it fits."""
    def fitting(other: GemmKernel) -> int | None:
        """The other build's SharedStorageSize where it builds and fits beside the static bytes, else None."""
        b = FAMILIES[family](other)
        fits = b.builds and b.shared_storage_bytes is not None and \
            block_request_bytes(b.shared_storage_bytes, static_bytes) <= limit
        return b.shared_storage_bytes if fits else None

    found: dict[str, int | None] = {}
    for stages in range((built.stages or MIN_STAGES) - 1, MIN_STAGES - 1, -1):
        if (size := fitting(replace(kernel, stages=stages))) is not None:
            found.update(fitting_stages=stages, fitting_bytes=size)
            break
    if kernel.launcher is not None and not kernel.swap_ab:
        found["swap_ab_bytes"] = fitting(replace(kernel, swap_ab=True))
    return found
