"""Kernels as a library's own launcher builds them with CUTLASS: the type and schedule choices are the
launcher's, the bytes CUTLASS's. ``trtllm-moe`` is TensorRT-LLM's and FlashInfer's MoE grouped GEMM
(moe_gemm_tma_ws_launcher.inl): ptr-array, cluster 1x1x1 and ``StageCountAutoCarveout<sizeof(epilogue
SharedStorage)>``; on sm_120 ``KernelScheduleAuto`` with a ``TmaWarpSpecialized`` epilogue and C typed as
D, on sm_90 the ptr-array cooperative schedules and no C.
Its FINALIZE fusion (the FC2 epilogue: scatter, router scales, bias, from cutlass_extensions'
sm90_visitor_scatter.hpp) has a void D whose buffer is the output type, and keeps one row-broadcast
vector per CTA tile in shared memory: the bias per column (output type), or with swap_ab the router
scales per column (fp32)."""

from __future__ import annotations

from bisect_smem.analysis.fit.cutlass.layout import EMPTY, Part
from bisect_smem.core.errors import UsageError

LAUNCHERS = ("trtllm-moe",)
FUSIONS = ("none", "finalize")
ROUTER_SCALE_BITS = 32  # ElementRouterScales = float
# The operands the launcher's kernels take: sm_120's grouped GEMM only NVFP4 (get_candidate_configs_sm120:
# "SM120 group GEMM only supports nvfp4"); sm_90's bf16, fp16 and fp8 (e4m3), one type for A and B.
OPERANDS = {"sm120": ("nvfp4",), "sm90": ("bf16", "fp16", "e4m3")}
MODELLED_FAMILIES = tuple(OPERANDS)

def check(launcher: str | None, fusion: str, swap_ab: bool) -> None:
    """--fusion finalize and --swap-ab are a launcher's choices: without --launcher they are a UsageError."""
    if launcher is None and (fusion != "none" or swap_ab):
        raise UsageError("--fusion and --swap-ab are the MoE launcher's: add --launcher trtllm-moe or drop them")
    if launcher is not None and launcher not in LAUNCHERS:
        raise UsageError(f"unknown --launcher {launcher!r}; valid: {', '.join(LAUNCHERS)}")
    if fusion not in FUSIONS:
        raise UsageError(f"unknown --fusion {fusion!r}; valid: {', '.join(FUSIONS)}")


def fusion_storage(fusion: str, swap_ab: bool, n: int, out_bits: int) -> Part:
    """The fusion callbacks' SharedStorage: empty for a linear combination; FINALIZE's row broadcast of
    the tile's N columns (the bias in the output type, or with swap_ab the router scales in fp32)."""
    if fusion == "none":
        return EMPTY
    bits = ROUTER_SCALE_BITS if swap_ab else out_bits
    return Part(n * bits // 8, 16)


def not_modelled(family: str) -> str | None:
    """Why this rule gives no bytes for the launcher's ``family`` kernel (it may well build), or None."""
    if family in MODELLED_FAMILIES:
        return None
    return (f"--launcher trtllm-moe is modelled for {' and '.join(MODELLED_FAMILIES)}; its {family} kernel is not "
            "modelled (no committed build of it)")


def refuse(family: str, a: str, b: str) -> str | None:
    """Why the MoE launcher has no ``family`` kernel for these operands, in its own words where it has them."""
    if a != b:
        return "TMA warp specialized MOE implementation does not support mixed input types"
    if family == "sm90" and a not in OPERANDS[family]:
        return "FP4 is only supported by SM100" if a.endswith("fp4") else \
            f"the MoE launcher's sm_90 kernels take {', '.join(OPERANDS[family])} (got {a})"
    if family == "sm120" and a not in OPERANDS[family]:
        return f"the MoE launcher's sm_120 grouped GEMM takes nvfp4 only ('SM120 group GEMM only supports nvfp4'; got {a})"
    return None
