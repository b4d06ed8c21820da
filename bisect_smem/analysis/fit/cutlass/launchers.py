"""Kernels as a library's own launcher builds them with CUTLASS: the type and schedule choices are the
launcher's, the bytes CUTLASS's. ``trtllm-moe`` is TensorRT-LLM's and FlashInfer's MoE grouped GEMM
(moe_gemm_tma_ws_launcher.inl): ptr-array and ``StageCountAutoCarveout<sizeof(epilogue SharedStorage)>``;
on sm_120 ``KernelScheduleAuto`` with a ``TmaWarpSpecialized`` epilogue, C typed as D and cluster 1x1x1,
on sm_90 the ptr-array cooperative schedules, no C, and the clusters the autotuner offers; on sm_100
(IsSM10x) the 1-SM kernel at cluster 1x1 and the 2-SM one at 2x1, whose MMA tile has twice the generator's
M, no C, the TMA epilogue or the one with no shared memory, a 128x64 epilogue tile for NVFP4 at N 256.
The kernels that exist are those FlashInfer's generator emits (flashinfer/jit/gemm/cutlass/
generate_kernels.py, generate_sm120_, generate_sm90_ and generate_sm100_grouped_gemm_operations):
CANDIDATES lists them, and a kernel outside the list is answered with a note that no build has it.
Its FINALIZE fusion (the FC2 epilogue: scatter, router scales, bias, from cutlass_extensions'
sm90_visitor_scatter.hpp) has a void D whose buffer is the output type, and keeps one row-broadcast
vector per CTA tile in shared memory: the bias per column (output type), or with swap_ab the router
scales per column (fp32)."""

from __future__ import annotations

from itertools import product

from bisect_smem.analysis.fit.cutlass.gemm import EPILOGUE_SCHEDULES, GemmKernel
from bisect_smem.analysis.fit.cutlass.layout import EMPTY, Part
from bisect_smem.analysis.fit.cutlass.types import operand
from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import B200_CC

SM100_CLUSTER_M = range(1, 3)  # 1 SM, or the 2-SM kernel of a 2x1 cluster

LAUNCHERS = ("trtllm-moe",)
FUSIONS = ("none", "finalize")
ROUTER_SCALE_BITS = 32  # ElementRouterScales = float
# The launcher's (activation, weight) pairs per family: sm_120 NVFP4 x NVFP4 and, through its is_mx_fpx path,
# MXFP8 activations with MXFP4 weights (isValidSM120MOESpecialisation; the one mixed pair its static_assert
# exempts, IsWFP4AFP8); sm_90 one type for both, f16, bf16, f32 or e4m3; sm_100 those, NVFP4, MXFP8 (e4m3
# with is_mx_fpx) and MXFP8 x MXFP4.
OPERANDS = {"sm120": (("nvfp4", "nvfp4"), ("mxfp8", "mxfp4")),
            "sm90": (("bf16", "bf16"), ("fp16", "fp16"), ("fp32", "fp32"), ("e4m3", "e4m3")),
            "sm100": (("nvfp4", "nvfp4"), ("mxfp8", "mxfp4"), ("mxfp8", "mxfp8"), ("e4m3", "e4m3"), ("bf16", "bf16"),
                      ("fp16", "fp16"), ("fp32", "fp32"))}
MODELLED_FAMILIES = tuple(OPERANDS)
MIXED = "TMA warp specialized MOE implementation does not support mixed input types"


@frozen
class Candidate:
    """One kernel the generator emits: activation and weight types, the output type, the CTA tile and the
    cluster (CTAs along M, N, K), the epilogue fusion and swap_ab, and on sm_100 the epilogue schedule."""

    act: str
    weight: str
    out: str
    tile: tuple[int, int, int]
    cluster: tuple[int, int, int]
    fusion: str
    swap_ab: bool
    epilogue: str = "tma"


def _k_tile(act: str) -> int:
    """The generator's and the dispatch's K: 128 bytes of the activation type (KtileBytes)."""
    return 1024 // operand(act).bits


def _sm120() -> tuple[Candidate, ...]:
    """generate_sm120_grouped_gemm_operations: eight tiles (K 64 or 128 B of fp4), the mixed pair only at
    128xNx128; fp16 and bf16 out; cluster 1x1x1."""
    tiles = ((128, 32, 128), (128, 32, 256), (128, 64, 128), (128, 64, 256), (128, 128, 128), (128, 128, 256),
             (256, 128, 128), (128, 256, 128))
    mixed_tiles = ((128, 32, 128), (128, 64, 128), (128, 128, 128))
    return tuple(Candidate(act, weight, out, tile, (1, 1, 1), fusion, swap)
                 for (act, weight), fusion, tile, swap, out in product(OPERANDS["sm120"], FUSIONS, tiles, (False, True),
                                                                      ("fp16", "bf16"))
                 if act == weight or tile in mixed_tiles)


def _sm90() -> tuple[Candidate, ...]:
    """generate_sm90_grouped_gemm_operations: M 128 at N 16 to 256, and 256x128, K 128 B; clusters 1 or 2
    along M and N, 2 along N only where the tile's N is at least 128 (is_gemm_op_valid); e4m3 out fp16 or
    bf16, the others their own type."""
    shapes = [(128, n) for n in (16, 32, 64, 128, 256)] + [(256, 128)]
    found = []
    clusters = ((1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 2, 1))
    for (act, _), fusion, (m, n), cluster, swap in product(OPERANDS["sm90"], FUSIONS, shapes, clusters, (False, True)):
        if (cluster[0] == 2 and m < 128) or (cluster[1] == 2 and n < 128):
            continue
        for out in (("fp16", "bf16") if act == "e4m3" else (act,)):
            found.append(Candidate(act, act, out, (m, n, _k_tile(act)), cluster, fusion, swap))
    return tuple(found)


def _sm100_emits(act: str, weight: str, m: int, n: int, cluster_m: int, epilogue: str, fusion: str) -> bool:
    """is_gemm_op_valid_sm100 at arch 100: FINALIZE only with the TMA epilogue; M 64 or 128; fp4 and MX
    operands at M 128, N 64, 128 or 256, never without shared memory; e4m3 at N 8 or 16 only at cluster 1x1,
    where N is a multiple of 16 or M is 64; else N 32 to 256 in 32s, in 64s for 2 SMs."""
    if (fusion == "finalize" and epilogue != "tma") or m not in (64, 128):
        return False
    if operand(act).block_scaled or operand(weight).block_scaled:
        if n not in (64, 128, 256) or m != 128 or epilogue == "nosmem":
            return False
    if act == "e4m3" and n in (8, 16) and cluster_m == 1:
        return m != 128 or n % 16 == 0
    return n % 32 == 0 and 32 <= n <= 256 and not (cluster_m == 2 and n % 64)


def _sm100() -> tuple[Candidate, ...]:
    """generate_sm100_grouped_gemm_operations at arch 100: M 64 or 128 at N 8 to 256, K 128 B (256 for e4m3 at
    N 8), cluster 1x1 (1 SM) or 2x1 (2 SMs), the two epilogues, where _sm100_emits keeps them; fp8 and fp4 out
    fp16 or bf16, the others their own type. Each is generated with a static and a dynamic cluster too, which
    build the same storage (compiled), so each is listed once."""
    found = []
    for (act, weight), fusion, m, n, cluster_m, epilogue, swap in product(
            OPERANDS["sm100"], FUSIONS, (64, 128), (8, 16, 32, 64, 128, 192, 256), SM100_CLUSTER_M, EPILOGUE_SCHEDULES,
            (False, True)):
        if not _sm100_emits(act, weight, m, n, cluster_m, epilogue, fusion):
            continue
        k = 256 if act == "e4m3" and n == 8 else _k_tile(act)
        for out in (("fp16", "bf16") if operand(act).bits <= 8 else (act,)):
            found.append(Candidate(act, weight, out, (m, n, k), (cluster_m, 1, 1), fusion, swap, epilogue))
    return tuple(found)


CANDIDATES = {"sm120": _sm120(), "sm90": _sm90(), "sm100": _sm100()}


def check(launcher: str | None, fusion: str, swap_ab: bool, epilogue: str | None = None) -> None:
    """--fusion finalize, --swap-ab and --epilogue-schedule are a launcher's choices: without --launcher they are
    a UsageError."""
    if launcher is None and (fusion != "none" or swap_ab or epilogue is not None):
        raise UsageError("--fusion, --swap-ab and --epilogue-schedule are the MoE launcher's: add --launcher "
                         "trtllm-moe or drop them")
    if epilogue is not None and epilogue not in EPILOGUE_SCHEDULES:
        raise UsageError(f"unknown --epilogue-schedule {epilogue!r}; valid: {', '.join(EPILOGUE_SCHEDULES)}")
    if launcher is not None and launcher not in LAUNCHERS:
        raise UsageError(f"unknown --launcher {launcher!r}; valid: {', '.join(LAUNCHERS)}")
    if fusion not in FUSIONS:
        raise UsageError(f"unknown --fusion {fusion!r}; valid: {', '.join(FUSIONS)}")


def default_output(act: str) -> str:
    """The output type a launcher kernel has unless told: its own type, or bf16 for fp8 and fp4 inputs
    (the generator's otypes: fp16 and bf16 only for those)."""
    return act if operand(act).bits >= 16 else "bf16"


def fusion_storage(fusion: str, swap_ab: bool, n: int, out_bits: int) -> Part:
    """The fusion callbacks' SharedStorage: empty for a linear combination; FINALIZE's row broadcast of
    the tile's N columns (the bias in the output type, or with swap_ab the router scales in fp32)."""
    if fusion == "none":
        return EMPTY
    bits = ROUTER_SCALE_BITS if swap_ab else out_bits
    return Part(n * bits // 8, 16)


# sm_100's branch is modelled where its kernels were built for: cc 10.0 (B200, GB200). On cc 10.3 the launcher
# takes its Sm103 branch for FP4 (K tripled, the Ultra schedules) and the EpilogueSubTile rule is sm_100's only.
SM100_MODELLED_CC = B200_CC


def not_modelled(family: str, compute_capability: tuple[int, int] | None = None) -> str | None:
    """Why this rule gives no bytes for the launcher's ``family`` kernel on ``compute_capability`` (it may well
    build), or None."""
    if family == "sm100" and compute_capability not in (None, SM100_MODELLED_CC):
        major, minor = compute_capability
        return (f"--launcher trtllm-moe's sm_100 branch is modelled for cc 10.0 (B200, GB200); its kernels for cc "
                f"{major}.{minor} are not modelled (sm_103 has its own branch; no committed build of them)")
    if family in MODELLED_FAMILIES:
        return None
    return (f"--launcher trtllm-moe is modelled for {', '.join(MODELLED_FAMILIES)}; its {family} kernel is not "
            "modelled (no committed build of it)")


def _pairs(family: str) -> str:
    return ", ".join(a if a == w else f"{a} x {w}" for a, w in OPERANDS[family])


def refuse(family: str, a: str, b: str) -> str | None:
    """Why the MoE launcher has no ``family`` kernel for these operands, in its own words where it has them."""
    if (a, b) in OPERANDS[family]:
        return None
    fp8_act_fp4_weight = operand(a).kind == "f8" and operand(b).kind == "f4"
    if a != b and not fp8_act_fp4_weight:
        return MIXED
    if family == "sm100":
        return f"the MoE launcher's sm_100 kernels take {_pairs(family)} (got {a if a == b else f'{a} x {b}'})"
    if family == "sm90":
        if operand(a).kind == "f4":
            return "FP4 is only supported by SM100"
        if fp8_act_fp4_weight or operand(a).block_scaled:
            return "Block scaled is only implemented for SM100"
        return f"the MoE launcher's sm_90 kernels take {_pairs(family)} (got {a if a == b else f'{a} x {b}'})"
    return f"the MoE launcher's sm_120 grouped GEMM takes {_pairs(family)} (got {a if a == b else f'{a} x {b}'})"


def candidates(family: str, act: str | None = None, weight: str | None = None, out: str | None = None,
               fusion: str | None = None, swap_ab: bool | None = None,
               epilogue: str | None = None) -> tuple[Candidate, ...]:
    """The generator's kernels for ``family``, narrowed to those given (None: any)."""
    return tuple(c for c in CANDIDATES.get(family, ())
                 if (act is None or c.act == act) and (weight is None or c.weight == weight)
                 and (out is None or c.out == out) and (fusion is None or c.fusion == fusion)
                 and (swap_ab is None or c.swap_ab == swap_ab) and (epilogue is None or c.epilogue == epilogue))


def kernel(found: Candidate, launcher: str, cutlass_version: str, stages: int | None = None) -> GemmKernel:
    """The GemmKernel of a candidate: grouped, A the activations and B the weights, C typed as D (the launcher
    gives sm_100 no C: its rule counts C as void there)."""
    m, n, k = found.tile
    return GemmKernel(m, n, k, found.act, found.weight, found.out, found.out, "auto", True, stages, None, launcher,
                      found.fusion, found.swap_ab, cutlass_version, found.cluster, found.epilogue)


def candidate(g: GemmKernel) -> Candidate:
    """The candidate a launcher's GemmKernel would be, generated or not."""
    return Candidate(g.a, g.b, g.d, (g.m, g.n, g.k), g.cluster, g.fusion, g.swap_ab, g.epilogue_schedule)


def arch_name(family: str) -> str:
    """``sm120`` -> ``sm_120``, as answers name an architecture."""
    return f"sm_{family.removeprefix('sm')}"


def not_generated(family: str, g: GemmKernel) -> str | None:
    """Why no FlashInfer build has this launcher kernel (its generator does not emit it), or None where it
    does (or the family has no list)."""
    found = candidate(g)
    if family not in CANDIDATES or found in CANDIDATES[family] or refuse(family, g.a, g.b):
        return None
    same = candidates(family, found.act, found.weight)
    outs = list(dict.fromkeys(c.out for c in same))
    where = f"FlashInfer's generator emits no such {arch_name(family)} kernel"
    if found.out not in outs:
        return f"{where}: output {' or '.join(outs)} only (got {found.out})"
    tiles = list(dict.fromkeys("x".join(map(str, c.tile)) for c in same))
    if found.tile not in {c.tile for c in same}:
        return f"{where}: no tile {'x'.join(map(str, found.tile))} (its tiles: {', '.join(tiles)})"
    clusters = list(dict.fromkeys("x".join(map(str, c.cluster)) for c in same if c.tile == found.tile))
    if found.cluster not in {c.cluster for c in same if c.tile == found.tile}:
        return (f"{where}: no cluster {'x'.join(map(str, found.cluster))} at this tile (its clusters: "
                f"{', '.join(clusters)})")
    epilogues = list(dict.fromkeys(c.epilogue for c in same if (c.tile, c.cluster, c.fusion) ==
                                   (found.tile, found.cluster, found.fusion)))
    return (f"{where}: no {found.epilogue} epilogue with fusion {found.fusion} here (its epilogues: "
            f"{', '.join(epilogues) or 'none'})")


@frozen
class Listing:
    """Every kernel a launcher's generator emits, narrowed by what was given (None: any): the activation and
    weight types (neither given: the family's first pair), the output type, fusion, swap_ab and cluster."""

    launcher: str
    cutlass_version: str
    act: str | None = None
    weight: str | None = None
    out: str | None = None
    fusion: str | None = None
    swap_ab: bool | None = None
    cluster: tuple[int, int, int] | None = None
    stages: int | None = None
    epilogue: str | None = None

    def pair(self, family: str) -> tuple[str, str]:
        """The (activation, weight) types listed on ``family``."""
        if self.act is None and self.weight is None:
            return OPERANDS.get(family, (("nvfp4", "nvfp4"),))[0]
        act = self.act or self.weight or ""
        return act, self.weight or act

    def kernels(self, family: str) -> tuple[GemmKernel, ...]:
        """The generator's kernels on ``family`` that match, in its order."""
        act, weight = self.pair(family)
        return tuple(kernel(c, self.launcher, self.cutlass_version, self.stages)
                     for c in candidates(family, act, weight, self.out, self.fusion, self.swap_ab, self.epilogue)
                     if self.cluster is None or c.cluster == self.cluster)

    def why_none(self, family: str | None) -> str:
        """Why ``family`` has none of these kernels: the launcher's own refusal, or what its generator emits."""
        if family not in CANDIDATES:
            return not_modelled(str(family)) if family else "no CUTLASS 3.x/4.x collective builder before sm_90"
        act, weight = self.pair(family)
        if reason := refuse(family, act, weight):
            return reason
        same = candidates(family, act, weight)
        for name, given, emitted in (("output", self.out, [c.out for c in same]),
                                     ("fusion", self.fusion, [c.fusion for c in same]),
                                     ("cluster", self.cluster, [c.cluster for c in same]),
                                     ("epilogue", self.epilogue, [c.epilogue for c in same])):
            if given is not None and given not in emitted:
                shown = dict.fromkeys("x".join(map(str, e)) if isinstance(e, tuple) else e for e in emitted)
                return f"FlashInfer's generator emits {arch_name(family)} kernels of these types with {name} " \
                       f"{' or '.join(shown)} only"
        if self.fusion == "finalize" and self.epilogue == "nosmem":
            return f"FlashInfer's generator emits {arch_name(family)} FINALIZE kernels with the tma epilogue only"
        return "FlashInfer's generator emits no such kernel"
