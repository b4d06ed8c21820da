"""sm_100's UMMA GEMM on one or two SMs, dense and block-scaled (gemm/collective/builders/
sm100_umma_builder.inl, sm100_blockscaled_umma_builder.inl, sm100_pipeline_carveout.inl,
sm100_mma_warpspecialized.hpp, sm100_blockscaled_mma_warpspecialized.hpp,
kernel/sm100_gemm_tma_warpspecialized.hpp). A 2-SM tile is split between two CTAs: each holds half
of A's rows and half of B's columns, and the kernel's storage is per CTA.

The MoE launcher's sm_100 branch (moe_gemm_tma_ws_launcher.inl, IsSM10x) is the grouped kernel with its own
choices (as_launched): the 2-SM kernel where the cluster's M is 2, with an MMA tile of twice the generator's
M; no C; the TMA epilogue or the one with no shared memory; a 128x64 epilogue tile for NVFP4 at N 256; the
FINALIZE fusion's row broadcast; with swap_ab, the weights as A and column-major C and D."""

from __future__ import annotations

from dataclasses import replace

from bisect_smem.analysis.fit.cutlass import SM100_2SM_EPILOGUE_N, has, launchers
from bisect_smem.analysis.fit.cutlass import epilogue as epi
from bisect_smem.analysis.fit.cutlass.gemm import MIN_STAGES, Build, GemmKernel, auto_stage_count
from bisect_smem.analysis.fit.cutlass.layout import Part, aligned16, array, barriers, struct
from bisect_smem.analysis.fit.cutlass.sm90 import epilogue_parts, parts
from bisect_smem.core.hardware import ceil_div, round_up

CAPACITY_BYTES = 232448  # cutlass::arch::sm100_smem_capacity_bytes
TMEM_COLUMNS, TMEM_ROWS = 512, 128
SCHEDULER_STAGES = {False: 2, True: 8}  # a grouped kernel's static group scheduler runs 8 deep
CLC_RESPONSE_BYTES = 16
# Grouped: the four tensor-map updater warps' and the kernel's tensor maps (five copies), each response
# carrying two more 16-bit fields (WithTensorMapUpdateInfo).
TENSORMAP_COPIES, GROUPED_RESPONSE_BYTES = 5, CLC_RESPONSE_BYTES + 4
NO_SMEM_TILE_N = 64  # the NoSmem epilogue's tile: the CTA's M by min(64, N)
SF_BLOCK_MN, SF_BLOCK_K = 128, 4  # a scale-factor atom: 128 rows by 4 factors along K


def alloc_bytes(g: GemmKernel, bits: int) -> float:
    """Shared-memory bytes per element: narrow types take a byte except in the fp4 (MXF4/NVF4) MMA."""
    mxf4 = (g.op_a.kind == g.op_b.kind == "f4" and g.block_scaled and g.op_a.scale_vector == g.op_b.scale_vector
            and not (g.op_a.byte_elements or g.op_b.byte_elements))
    return bits / 8 if bits >= 8 or mxf4 else 1


def scale_factors(mn: int, k: int, vector: int) -> int:
    """Scale factors of one operand tile: MN padded to 128 rows, K/vector padded to 4 factors (1 B each)."""
    return round_up(mn, SF_BLOCK_MN) * round_up(ceil_div(k, vector), SF_BLOCK_K)


def accumulator_stages(g: GemmKernel, cta_m: int, two_sm: bool) -> int:
    """How many accumulators the tensor memory holds: block-scaled 1 for N = 256 else 2; dense up to 4."""
    if g.block_scaled:
        return 1 if g.n == 256 else 2
    if two_sm or cta_m > 64:
        return min(4, TMEM_ROWS * TMEM_COLUMNS // (cta_m * g.n))
    return min(4, TMEM_COLUMNS // g.n * 2)


def uses_two_sms(g: GemmKernel) -> bool:
    """Is it the 2-SM kernel? --schedule 2sm, or auto where KernelScheduleAuto picks it: a cluster even
    along M and a tile M that is a multiple of 128 (sm100_common.inl)."""
    if g.schedule == "auto":
        return g.cluster[0] % 2 == 0 and g.m % 128 == 0
    return g.schedule == "2sm"


def tile_ms(two_sm: bool, block_scaled: bool) -> tuple[int, ...]:
    """The MMA tile M the builder's trivial tiled MMA takes: dense 1-SM 64 or 128, 2-SM 128 or 256;
    block-scaled 1-SM 128, 2-SM 256 (sm100_make_blockscaled_{1,2}sm_trivial_tiled_mma)."""
    if block_scaled:
        return (256,) if two_sm else (128,)
    return (128, 256) if two_sm else (64, 128)


def tile_n_takes(n: int, block_scaled: bool) -> bool:
    """Does the trivial tiled MMA take tile N: dense a multiple of 8 up to 256, block-scaled 64, 128, 192, 256."""
    return n in (64, 128, 192, 256) if block_scaled else n % 8 == 0 and n <= 256


def mma_k(g: GemmKernel) -> int:
    """One UMMA's K: 32 bytes of the operand as the MMA reads it (64 packed fp4 elements in the MXF4/NVF4
    MMA; 32 of any type under 8 bits in the F8F6F4 one)."""
    return int(32 // alloc_bytes(g, g.op_a.bits))


def as_launched(g: GemmKernel) -> GemmKernel:
    """The kernel the MoE launcher's sm_100 branch asks CUTLASS for: at a cluster of 2 along M (Is2SM) the
    2-SM schedule and an MMA tile of twice the generator's M, else the 1-SM one; no C; MXFP4 weights beside
    MXFP8 activations through the MXF8F6F4 schedule (1 B an element); with swap_ab A is the weights."""
    two_sm = g.cluster[0] == 2
    weight = "mxfp4-f8f6f4" if g.b == "mxfp4" and g.a != g.b else g.b
    a, b = (weight, g.a) if g.swap_ab else (g.a, weight)
    return replace(g, m=g.m * 2 if two_sm else g.m, a=a, b=b, c="void", schedule="2sm" if two_sm else "1sm")


def launcher_epilogue(g: GemmKernel, cta_m: int, warps: list[int]) -> epi.Epilogue:
    """The launcher's sm_100 epilogue (``g`` as_launched): none in shared memory, or the TMA one with its
    FINALIZE row broadcast, column-major C and D with swap_ab, and a 128x64 tile for NVFP4 at N 256 (EpilogueSubTile;
    the launcher's IsFP4 is the activations' type)."""
    if g.epilogue_schedule == "nosmem":
        return epi.sm100_no_smem(g.grouped, callbacks=g.block_scaled)
    activations = g.b if g.swap_ab else g.a
    tile = (128, 64) if activations == "nvfp4" and g.n == 256 else None
    fusion = launchers.fusion_storage(g.fusion, g.swap_ab, g.n, g.d_bits)
    return epi.sm100(cta_m, g.n, g.c_bits, g.d_bits, warps, g.block_scaled, g.grouped, g.swap_ab, tile, fusion)


def refuse(g: GemmKernel) -> str | None:
    """Why sm_100's builders (or the MoE launcher) refuse this kernel (in their words), or None."""
    if g.launcher is not None and (reason := launchers.refuse("sm100", g.a, g.b)):
        return reason
    if g.launcher is not None:
        g = as_launched(g)
        if g.epilogue_schedule == "nosmem" and g.fusion == "finalize":
            # FINALIZE's D is void, and the epilogue without shared memory loads the accumulator by D's width.
            return "Unsupported data types"
        if g.epilogue_schedule == "nosmem" and g.n > NO_SMEM_TILE_N and g.n % NO_SMEM_TILE_N:
            # Its epilogue tile is the CTA's M by at most 64 columns, which must divide the tile's N (cute's words).
            return "Divisibility Condition"
    if g.schedule in ("cooperative", "pingpong"):
        return f"--schedule {g.schedule} is sm_90's and sm_120's; sm_100 has auto, 1sm, 2sm"
    if g.op_a.block_scaled != g.op_b.block_scaled or (g.block_scaled and g.op_a.scale_vector != g.op_b.scale_vector):
        return "A and B must both be block-scaled with one scale-factor vector size"
    two_sm = uses_two_sms(g)
    # The epilogue is built first: its schedule against the cluster, its tile, then the mainloop.
    if two_sm and g.cluster[0] % 2:
        return CLUSTER_MISMATCH
    if two_sm and has(g.cutlass_version, SM100_2SM_EPILOGUE_N) and max(g.c_bits, g.d_bits) == 16 and g.n > 128 \
            and g.n % 64 and g.epilogue_schedule == "tma":
        return TWO_SM_EPILOGUE_N
    if g.op_a.bits == g.op_b.bits == 16 and g.a != g.b:
        # The builder takes A and B of one 16-bit type (its non-F8F6F4 inputs must match).
        return "Unsupported data type for ElementA"
    if g.m not in tile_ms(two_sm, g.block_scaled):
        return "Invalid TileShape_M."
    if not tile_n_takes(g.n, g.block_scaled):
        return "Invalid TileShape_N."
    if g.k % mma_k(g):
        return "Static cluster shape used: TileShape should be evenly divided by TiledMma"
    return None


CLUSTER_MISMATCH = "schedule + cluster mismatch"
TWO_SM_EPILOGUE_N = ("SM100 2SM TMA epilogue: 16-bit element types (f16/bf16) with CtaN > 128 require CtaN to be "
                     "divisible by 64. CtaN=160 and CtaN=224 are unsupported. Use a CtaN that is a multiple of 64 "
                     "(e.g. 128, 192, 256) or use a 32-bit output type (f32).")


def _hint(g: GemmKernel, reason: str) -> str | None:
    """What builds where the 2-SM schedule was asked for without a cluster even along M."""
    if reason != CLUSTER_MISMATCH:
        return None
    m, n, k = g.cluster
    return f"the 2-SM kernel needs a cluster even along M: --cluster {m + 1}x{n}x{k}"


def build(g: GemmKernel) -> Build:
    """sm_100's CollectiveBuilder with KernelTmaWarpSpecialized1Sm/2Sm (or the block-scaled ones)."""
    reason = refuse(g)
    if reason:
        return Build("sm100", False, reason, hint=_hint(g, reason))
    g = as_launched(g) if g.launcher is not None else g
    two_sm = uses_two_sms(g)
    cta_m, cta_n = (g.m // 2, g.n // 2) if two_sm else (g.m, g.n)
    a = int(alloc_bytes(g, g.op_a.bits) * cta_m * g.k)
    b = int(alloc_bytes(g, g.op_b.bits) * cta_n * g.k)
    acc = accumulator_stages(g, cta_m, two_sm)
    capacity = CAPACITY_BYTES - carveout_of(g, acc)
    warps = epi.sm100_tmem_warps(two_sm, g.m)
    ep = launcher_epilogue(g, cta_m, warps) if g.launcher is not None else \
        epi.chosen(epi.sm100(cta_m, g.n, g.c_bits, g.d_bits, warps, g.block_scaled, g.grouped), g.epilogue_bytes)
    carveout = ep.shared.size
    sfa = scale_factors(cta_m, g.k, g.op_a.scale_vector) if g.block_scaled else 0
    sfb = scale_factors(g.n, g.k, g.op_b.scale_vector) if g.block_scaled else 0
    stage = a + b + sfa + sfb + (round_up(barriers(1).size, 128) if g.block_scaled else barriers(1).size)
    stages = g.stages or auto_stage_count(capacity, carveout, stage)
    arrays = [array(stages * x, 16) for x in ((a, b, sfa, sfb) if g.block_scaled else (a, b))]
    tensors = struct(*arrays, align=128)
    ml_maps = Part(epi.TMA_DESCRIPTOR_BYTES * (4 if g.block_scaled else 2), 128)
    mainloop = struct(tensors, *([ml_maps] if g.grouped else []), barriers(stages))
    kernel, pipes, responses = kernel_storage(g, tensors, barriers(stages), ml_maps, ep, acc)
    own = kernel.size - tensors.size - barriers(stages).size - ep.tensors.size - ep.pipeline.size
    named = [("A tiles", stages * a), ("B tiles", stages * b), ("scale factors SFA", stages * sfa),
             ("scale factors SFB", stages * sfb), ("mainloop barriers", barriers(stages).size), *epilogue_parts(ep),
             (f"kernel pipelines (accumulator x{acc}, scheduler, order, TMEM" + (", tensor-map ready)" if g.grouped
                                                                                   else ")"),
              pipes.size - barriers(stages).size - aligned16(ep.pipeline).size),
             ("scheduler responses and TMEM pointer", responses),
             *([(f"tensor maps ({TENSORMAP_COPIES} copies)", TENSORMAP_COPIES * _tensormaps(ml_maps, ep).size)]
               if g.grouped else [])]
    built = Build("sm100", stages >= MIN_STAGES, None, stages, stage, capacity, carveout, mainloop.size,
                  ep.shared.size, own, kernel.size, parts(named, kernel.size))
    if stages < MIN_STAGES:
        return replace(built, reason=too_few_stages(g, stages))
    if kernel.size > CAPACITY_BYTES:
        # The kernel's device code asserts it (a fixed StageCount<N> can ask for more than the builder would).
        return replace(built, builds=False, reason="SMEM usage exceeded capacity.", device_only=True)
    return built


def too_few_stages(g: GemmKernel, stages: int) -> str:
    """CUTLASS's words for fewer than 2 stages: the builder's for none, the mainloop's for one."""
    if stages == 0:
        return ("Smem usage is too high. Can't create any SMEM buffers for A, B, SFA, and SFB." if g.block_scaled
                else "Smem usage is too high. Can't create any SMEM buffers for A, and B.")
    return "Specialization requires Stages set to value 1 or more."


def carveout_of(g: GemmKernel, acc: int) -> int:
    """Sm100DenseGemmTmaUmmaCarveout::KernelSmemCarveout: what the builder takes off the capacity for the
    kernel's pipelines, responses and (grouped) tensor maps."""
    sched = SCHEDULER_STAGES[g.grouped]
    responses = 2 if g.grouped else 1
    carve = (16 * acc + 16 * sched * responses + 16 + 8 + 16 * sched + sched * CLC_RESPONSE_BYTES * responses
             + sched * 4)
    if g.grouped:
        carve += epi.TMA_DESCRIPTOR_BYTES * (4 if g.block_scaled else 2) * TENSORMAP_COPIES + 16 * sched
    return carve


def _tensormaps(ml_maps: Part, ep: epi.Epilogue) -> Part:
    return struct(Part(ep.tensormaps.size if ep.tensormaps else 0, 128), ml_maps, align=128)


def kernel_storage(g: GemmKernel, tensors: Part, ml_pipeline: Part, ml_maps: Part, ep: epi.Epilogue,
                   acc: int) -> tuple[Part, Part, int]:
    """(the kernel's SharedStorage, its pipelines, the scheduler responses' bytes) of
    sm100_gemm_tma_warpspecialized.hpp or (grouped) sm100_gemm_array_tma_warpspecialized.hpp."""
    sched = SCHEDULER_STAGES[g.grouped]
    pipes = [aligned16(ml_pipeline), aligned16(ep.pipeline), Part(16, 16), aligned16(barriers(sched)),
             aligned16(barriers(acc))]
    if g.grouped:
        # The static group scheduler: no CLC throttle (an empty pipeline), a tensor-map-ready pipeline.
        pipes += [Part(16, 16), Part(16, 16), aligned16(barriers(sched))]
        responses = 2 * sched * GROUPED_RESPONSE_BYTES
    else:
        pipes += [aligned16(barriers(sched)), Part(16, 16)]
        responses = sched * CLC_RESPONSE_BYTES
    pipeline = struct(*pipes, align=16)
    maps = [Part(TENSORMAP_COPIES * _tensormaps(ml_maps, ep).size, 128)] if g.grouped else []
    kernel = struct(pipeline, Part(responses, 16), Part(4, 4), *maps, struct(ep.tensors, tensors, align=128))
    return kernel, pipeline, responses + 4
