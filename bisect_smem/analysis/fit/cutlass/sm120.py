"""sm_120's GEMM, dense (F8F6F4 types only) and block-scaled (gemm/collective/builders/
sm120_mma_builder.inl, sm120_blockscaled_mma_builder.inl, sm120_mma_tma.hpp,
sm120_blockscaled_mma_tma.hpp and the ptr-array variant). Its operand buffers are ``alignas(1024)``,
its scale-factor buffers ``alignas(16)``; its kernels are laid out like sm_90's."""

from __future__ import annotations

from dataclasses import replace

from bisect_smem.analysis.fit.cutlass import (
    SM120_DENSE_PTR_ARRAY,
    SM120_MX_PTR_ARRAY,
    SM120_N_FROM_8,
    SM120_RESERVES,
    SM120_SFB_128,
    has,
    launchers,
)
from bisect_smem.analysis.fit.cutlass import epilogue as epi
from bisect_smem.analysis.fit.cutlass.gemm import MIN_STAGES, Build, GemmKernel, auto_stage_count
from bisect_smem.analysis.fit.cutlass.layout import Part, aligned16, array, barriers, struct
from bisect_smem.analysis.fit.cutlass.sm90 import device_refusal, epilogue_parts, kernel_storage, parts
from bisect_smem.analysis.fit.cutlass.sm100 import alloc_bytes
from bisect_smem.core.hardware import ceil_div

CAPACITY_BYTES = 101376  # cutlass::arch::sm120_smem_capacity_bytes
SCHEDULER_STAGES = 3
CLC_RESPONSE_BYTES = 16
# What the block-scaled builder reserves for the kernel: a CLC pipeline and its responses, or (grouped)
# a scheduler pipeline of 8, two tensor maps and a tensor-map-ready pipeline.
RESERVED = {False: 16 * SCHEDULER_STAGES + SCHEDULER_STAGES * CLC_RESPONSE_BYTES,
            True: 16 * 8 + 2 * epi.TMA_DESCRIPTOR_BYTES + 16 * SCHEDULER_STAGES}
SF_BLOCK_MN = 128


def scale_factors(g: GemmKernel) -> tuple[int, int]:
    """SFA and SFB bytes of one stage: M in whole 128-row blocks (rounded down), N at least 128 (from 4.5.0;
    before, N rounded down as M)."""
    k_factors = ceil_div(g.k, g.op_a.scale_vector)
    n = max(g.n, SF_BLOCK_MN) if has(g.cutlass_version, SM120_SFB_128) else g.n
    return g.m // SF_BLOCK_MN * SF_BLOCK_MN * k_factors, n // SF_BLOCK_MN * SF_BLOCK_MN * k_factors


def refuse(g: GemmKernel) -> str | None:
    """Why sm_120's builders (or the launcher) refuse these operands, or None."""
    if g.launcher is not None and (reason := launchers.refuse("sm120", g.a, g.b)):
        return reason
    if g.cluster != (1, 1, 1):
        return "no programmatic multicast on this arch"
    # The epilogue is built first: its tile must divide the CTA tile.
    narrow = has(g.cutlass_version, SM120_N_FROM_8)
    tile_m, tile_n = epi.sm120_tile(g.n, narrow)
    if g.n % tile_n:
        return "EPI_TILE_N must divide CTA_N"
    if g.m % tile_m:
        return "EPI_TILE_M must divide CTA_M"
    if g.block_scaled and g.n < (8 if narrow else 32):
        return "Invalid tile shape N."
    if g.block_scaled and g.grouped and g.schedule in ("cooperative", "pingpong") and not \
            has(g.cutlass_version, SM120_MX_PTR_ARRAY) and all(6 <= op.bits <= 8 for op in (g.op_a, g.op_b)):
        return "Incorrect SfVectorSize for MX_F4F6F8 is deduced."
    if g.block_scaled and (max(g.n, SF_BLOCK_MN) % SF_BLOCK_MN or (g.m > SF_BLOCK_MN and g.m % SF_BLOCK_MN)):
        # SFA's and SFB's tiles are M and N (at least 128) in 128-row blocks: cute's layout tiling refuses a
        # remainder (a tile M under 128 has no block at all: its TMA refuses it, in the device build).
        return "Shape Divisibility Condition"
    if g.schedule in ("1sm", "2sm"):
        return f"--schedule {g.schedule} is sm_100's; sm_120 has auto, cooperative, pingpong"
    if g.op_a.block_scaled != g.op_b.block_scaled or (g.block_scaled and g.op_a.scale_vector != g.op_b.scale_vector):
        return "A and B must both be block-scaled with one scale-factor vector size"
    if not g.block_scaled and not {g.op_a.kind, g.op_b.kind} <= {"f8", "f6", "f4"}:
        return "SM120 TmaWarpSpecialized builder currently only supports F8F6F4 MMA."
    if g.block_scaled and g.k % (128 // int(8 * alloc_bytes(g, g.op_a.bits))):
        # The K-major smem atoms are at least 16 B along K (32 packed fp4 elements, 16 of a byte each).
        return "No shared memory copy atom can be selected."
    if g.block_scaled and g.k % (64 if alloc_bytes(g, g.op_a.bits) < 1 else 32):
        # The tiled MMA's K permutation (PermTileK: 64 for MXF4/NVF4, 32 for F8F6F4): the compiler's words.
        return 'result of decltype qualifier "bool" is not a class or enumeration'
    if not g.block_scaled and g.grouped and not has(g.cutlass_version, SM120_DENSE_PTR_ARRAY):
        return "PtrArray kernel is not supported for this collective builder."
    if not g.block_scaled and {g.op_a.kind, g.op_b.kind} & {"f6", "f4"} and g.k % 128:
        return "TileSize and MNK Major does not met with MMA Mix 8-bit TMA load requirement"
    return None


def build(g: GemmKernel) -> Build:
    """sm_120's CollectiveBuilder: OpClassTensorOp (F8F6F4) or OpClassBlockScaledTensorOp."""
    reason = refuse(g)
    if reason:
        return Build("sm120", False, reason)
    pingpong = g.schedule == "pingpong"
    fusion = launchers.fusion_storage(g.fusion, g.swap_ab, g.n, g.d_bits)
    ep = epi.chosen(epi.sm120(g.m, g.n, g.c_bits, g.d_bits, g.grouped, column_major=g.swap_ab, fusion=fusion,
                              d_void=g.fusion == "finalize", narrow_n=has(g.cutlass_version, SM120_N_FROM_8)),
                    g.epilogue_bytes)
    carveout = ep.shared.size
    a = int(alloc_bytes(g, g.op_a.bits) * g.m * g.k)
    b = int(alloc_bytes(g, g.op_b.bits) * g.n * g.k)
    if g.block_scaled:
        sfa, sfb = scale_factors(g)
        stage = a + b + 128 + sfa + sfb
        # From 4.4.2 the builder takes the kernel's scheduler, CLC and tensor-map storage off the capacity.
        reserves = has(g.cutlass_version, SM120_RESERVES)
        capacity = CAPACITY_BYTES - (RESERVED[g.grouped] if reserves else 0)
    else:
        sfa = sfb = 0
        stage, capacity = a + b + barriers(1).size, CAPACITY_BYTES
    stages = g.stages or auto_stage_count(capacity, carveout, stage)
    arrays = [array(stages * a, 1024), array(stages * b, 1024)]
    if g.block_scaled:
        arrays += [array(stages * sfa, 16), array(stages * sfb, 16)]
    tensors = struct(*arrays, align=128)
    # Tensor maps of A and B, and (block-scaled) of SFA and SFB.
    maps = Part((4 if g.block_scaled else 2) * epi.TMA_DESCRIPTOR_BYTES, 128) if g.grouped else None
    mainloop = struct(tensors, *([maps] if maps else []), aligned16(barriers(stages)))
    kernel = kernel_storage(tensors, barriers(stages), maps, ep, pingpong, g.grouped)
    own = kernel.size - tensors.size - barriers(stages).size - ep.tensors.size - ep.pipeline.size
    named = [("A tiles", stages * a), ("B tiles", stages * b), ("scale factors SFA", stages * sfa),
             ("scale factors SFB", stages * sfb), ("mainloop barriers", barriers(stages).size), *epilogue_parts(ep),
             ("kernel pipelines, scheduler, alignment" + (", tensor maps" if g.grouped else ""), own)]
    built = Build("sm120", stages >= MIN_STAGES, None, stages, stage, capacity, carveout, mainloop.size,
                  ep.shared.size, own, kernel.size, parts(named, kernel.size))
    if stages < MIN_STAGES:
        return replace(built, reason="Specialization requires Stages set to value 2 or more.")
    if g.block_scaled and (g.m < SF_BLOCK_MN or (g.n < SF_BLOCK_MN and not has(g.cutlass_version, SM120_SFB_128))):
        # SFA's tile is M in whole 128-row blocks (and before 4.5.0 SFB's N): a tile under 128 has none, and
        # the scale factors' TMA, made for the kernel, refuses it.
        return replace(built, builds=False, device_only=True,
                       reason="TMA requires CTA_Tile and SLayout top-level size equivalence.")
    if reason := device_refusal(g, not pingpong):
        return replace(built, builds=False, reason=reason, device_only=True)
    return built
