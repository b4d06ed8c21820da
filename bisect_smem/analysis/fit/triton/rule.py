"""Triton's rule on a target: the ``metadata.shared`` of the matmul for the target's architecture, and
whether the launch fits. Triton loads a kernel only when ``metadata.shared`` is at most the device's
opt-in limit; above it, it raises OutOfResources ("out of resource: shared memory, Required: X,
Hardware limit: Y"). ``num_stages`` auto gives the most stages that load."""

from __future__ import annotations

from dataclasses import replace

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
from bisect_smem.analysis.fit.triton import B_LAYOUTS, LIBRARY, LOADS, TRITON_VERSION, WARPS
from bisect_smem.analysis.fit.triton.matmul import (
    DTYPES,
    THREADS_PER_WARP,
    Matmul,
    MatmulBuild,
    build,
    build_descriptor,
)
from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import (
    block_request_bytes,
    has_fp8_e4m3,
    has_ldmatrix,
    has_native_fp8_mma_sync,
    has_stmatrix,
    has_tma,
    tensor_core_mma,
)
from bisect_smem.core.sizes import shown

MAX_STAGES = 16  # the most num_stages searched
CHECKED_DIMS = (16, 32, 64, 128, 256)  # BLOCK sizes are powers of two (tl.arange); these are checked
# tf32 is fp32 operands: tl.dot's default input precision on NVIDIA multiplies them as tf32.
ALIASES = {"fp8": "fp8e4m3", "e4m3": "fp8e4m3", "tf32": "fp32"}
# The tensor-descriptor matmul, checked against compiles of it (triton_matmul_sm*_desc.json): 16-bit operands
# (an 8-bit or fp32 B stored N-major takes another path into the MMA) where TMA is (sm_90 on).
DESCRIPTOR_DTYPES = ("fp16", "bf16")
# Triton's words for what fit shows of its kernel.
LABELS = Labels(stages="num_stages", count="num_stages {}", fits="num_stages {} fits",
                does_not_fit="num_stages {} does not fit", no_count="no num_stages", fixed="num_stages={}",
                launch="metadata.shared", launch_in_full="metadata.shared",
                derivation="{stage_rule}, num_stages {stages}, num_warps {warps}; the allocator's highest byte",
                over="OutOfResources")


def triton_dtype(name: str) -> str:
    """The kernel's operand type for a --dtype name (fp8 and e4m3 are float8_e4m3fn)."""
    key = ALIASES.get(name, name)
    if key not in DTYPES:
        raise UsageError(f"--rule triton takes --dtype fp16, bf16, fp32 (tf32), fp8 (e4m3) or int8; got {shown(name)}")
    return key


@frozen
class TritonKernel:
    """The matmul asked about: BLOCK_M x BLOCK_N x BLOCK_K, operand type, num_stages (None: the most that
    fit), num_warps."""

    m: int
    n: int
    k: int
    dtype: str
    stages: int | None = None
    warps: int = 4
    b_layout: str | None = None  # "k" (B K-major) or "n" (N-major); None: fp8 K-major, the others N-major
    loads: str = "pointer"  # LOADS: the tutorial's pointer blocks, or tensor descriptors (not modelled)

    def __post_init__(self) -> None:
        triton_dtype(self.dtype)
        if self.b_layout not in (None, *B_LAYOUTS):
            raise UsageError(f"--b-layout must be one of {', '.join(B_LAYOUTS)} (got {shown(self.b_layout)})")
        if self.loads not in LOADS:
            raise UsageError(f"--loads must be one of {', '.join(LOADS)} (got {shown(self.loads)})")
        if self.warps not in WARPS:
            raise UsageError(f"--warps must be one of {', '.join(map(str, WARPS))} (got {self.warps})")
        if self.stages is not None and not 1 <= self.stages <= MAX_STAGES:
            raise UsageError(f"--stages must be in 1..{MAX_STAGES} for --rule triton (got {self.stages})")

    @property
    def b_major(self) -> str:
        """B's layout: as given, else K-major for fp8 (as Triton's fp8 examples store it), N-major otherwise."""
        if self.b_layout is not None:
            return self.b_layout
        return "k" if triton_dtype(self.dtype) == "fp8e4m3" else "n"

    def config(self, stages: int) -> Matmul:
        """The launch configuration with ``stages``."""
        return Matmul(self.m, self.n, self.k, triton_dtype(self.dtype), stages, self.warps, self.b_major == "k")


def not_modelled(kernel: TritonKernel, cc: tuple[int, int] | None) -> str | None:
    """Why the model gives no number here although Triton may compile it, or None."""
    mma = tensor_core_mma(cc)
    if mma is None:
        return "Triton's matmul is modelled for sm_80 to sm_89, sm_90, sm_10x and sm_12x, not for this architecture"
    if kernel.loads == "descriptor" and (triton_dtype(kernel.dtype) not in DESCRIPTOR_DTYPES or not has_tma(cc)
                                         or kernel.b_major == "k"):
        return ("not modelled: this rule is the pointer-arithmetic matmul (tl.load of pointer blocks); its "
                f"tensor-descriptor (TMA) matmul is modelled for {' and '.join(DESCRIPTOR_DTYPES)} operands, B "
                "N-major, on sm_90 on only")
    if any(d not in CHECKED_DIMS for d in (kernel.m, kernel.n, kernel.k)):
        return f"BLOCK sizes other than {', '.join(map(str, CHECKED_DIMS))} are not modelled"
    return None


def triton_refuses(kernel: TritonKernel, cc: tuple[int, int]) -> str | None:
    """Why Triton refuses to compile this matmul (either kernel) for this architecture, in its words, or None."""
    if triton_dtype(kernel.dtype) == "fp8e4m3" and not has_fp8_e4m3(cc):
        return ("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', "
                "'fp8e5')")
    min_k = 32 if DTYPES[triton_dtype(kernel.dtype)][0] == 8 else 16
    if kernel.k < min_k:
        return f"Input shapes should have M >= 1, N >= 1 and K >= {min_k}"
    return None


def refusal(kernel: TritonKernel, cc: tuple[int, int] | None) -> str | None:
    """Why there is no number for this kernel on this architecture (Triton refuses to compile it, in
    Triton's words, or it is not modelled), or None."""
    missing = not_modelled(kernel, cc)
    if cc is None or tensor_core_mma(cc) is None:
        return missing
    return triton_refuses(kernel, cc) or missing


def shared_of(kernel: TritonKernel, stages: int, cc: tuple[int, int]) -> MatmulBuild:
    """The build of ``kernel`` with ``stages`` for architecture ``cc``."""
    mma = tensor_core_mma(cc)
    # int8 is mma.sync's own type everywhere; fp8 only where the hardware multiplies it (else upcast to fp16).
    native = triton_dtype(kernel.dtype) == "int8" or has_native_fp8_mma_sync(cc)
    if kernel.loads == "descriptor":
        return build_descriptor(kernel.config(stages), mma == "wgmma", mma == "tcgen05")
    return build(kernel.config(stages), mma == "wgmma", has_ldmatrix(cc), has_stmatrix(cc), native, mma == "tcgen05")


def _about(kernel: TritonKernel, built: MatmulBuild | None, stages: int | None, reason: str | None) -> dict:
    about = {"library": LIBRARY, "version": TRITON_VERSION, "labels": LABELS,
             "tile": f"{kernel.m}x{kernel.n}x{kernel.k}", "stages_requested": kernel.stages or "auto",
             "builds": reason is None, "build_reason": reason, "stages": stages, "details": {"warps": kernel.warps}}
    if built is not None:
        loads = ", tensor descriptors" if kernel.loads == "descriptor" else ""
        about.update(stage_rule=f"triton {TRITON_VERSION} {built.mma.name}{loads}", launch_bytes=built.shared,
                     stage_bytes=built.a.tile + built.b.tile, mainloop_bytes=built.mainloop_bytes,
                     epilogue_bytes=built.epilogue_bytes, parts=[list(p) for p in built.parts])
    return about


def evaluate_triton(kernel: TritonKernel, target: Target) -> FitResult:
    """``kernel`` on ``target``: num_stages (given, or the most that load), metadata.shared, the verdict.
    The block is num_warps x 32 threads and all its shared memory is dynamic."""
    threads, static = kernel.warps * THREADS_PER_WARP, 0
    cc = target.compute_capability
    reason = refusal(kernel, cc)
    if reason is not None:
        # Not modelled: the answer is unknown (exit 4); refused by Triton: it does not build (exit 1).
        unknown = reason == not_modelled(kernel, cc)
        result = evaluate(FitRequest(0, static, threads), target)
        return replace(result, verdict=UNKNOWN if unknown else DOES_NOT_BUILD, over_bytes=None, blocks_per_sm=None,
                       error=reason if unknown else result.error,
                       **(_about(kernel, None, None, reason) | {"builds": None if unknown else False}))
    stages = kernel.stages or _most_stages(kernel, cc, target.optin_limit_bytes)
    built = shared_of(kernel, stages, cc)
    result = replace(evaluate(FitRequest(built.shared, static, threads), target), **_about(kernel, built, stages, None))
    if result.verdict == UNKNOWN and kernel.stages is None:
        return replace(result, stages=None)
    if result.verdict != DOES_NOT_FIT and stages < MAX_STAGES and target.optin_limit_bytes is not None:
        # One more stage is shown only where it would not fit: a count that fits is no limit.
        more = shared_of(kernel, stages + 1, cc).shared
        if block_request_bytes(more, static) > target.optin_limit_bytes:
            result = replace(result, next_stage_bytes=more)
    return result


def _most_stages(kernel: TritonKernel, cc: tuple[int, int], limit: int | None) -> int:
    """The largest num_stages whose metadata.shared is at most ``limit`` (1 when none is)."""
    best = 1
    for stages in range(1, MAX_STAGES + 1):
        if limit is not None and shared_of(kernel, stages, cc).shared <= limit:
            best = stages
    return best


def stages_giving(kernel: TritonKernel, cc: tuple[int, int] | None, required: int) -> list[int]:
    """The num_stages whose metadata.shared is exactly ``required`` on architecture ``cc``."""
    if refusal(kernel, cc) is not None or cc is None:
        return []
    return [s for s in range(1, MAX_STAGES + 1) if shared_of(kernel, s, cc).shared == required]
