"""sm_90's TMA warp-specialized GEMM (gemm/collective/builders/sm90_gmma_builder.inl,
sm90_mma_tma_gmma_ss_warpspecialized.hpp, kernel/sm90_gemm_tma_warpspecialized_{cooperative,pingpong}.hpp
and their ptr-array variants): the stage rule, the mainloop's and the kernel's storage. sm_120's kernels
are laid out the same way, so the kernel storage here serves both."""

from __future__ import annotations

from dataclasses import replace

from bisect_smem.analysis.fit.cutlass import epilogue as epi
from bisect_smem.analysis.fit.cutlass import launchers
from bisect_smem.analysis.fit.cutlass.gemm import MIN_STAGES, Build, GemmKernel, auto_stage_count
from bisect_smem.analysis.fit.cutlass.layout import Part, aligned16, array, barriers, struct
from bisect_smem.core.hardware import round_down, round_up

CAPACITY_BYTES = 232448  # detail::sm90_smem_capacity_bytes
ALIGNMENT = 128  # compute_stage_count_or_override's rounding of stage, carveout and capacity
GROUPED_CARVEOUT = 2 * epi.TMA_DESCRIPTOR_BYTES + 16 * 8  # tensor maps of A and B, a scheduler pipeline of 8
ORDER_BARRIER = Part(16, 16)  # OrderedSequenceBarrier<1,2>: the load warps' order
MATH_ORDER_BARRIER = Part(32, 16)  # ping-pong's math warp groups take turns
SCHEDULER = Part(16, 16)
SCHEDULER_RESPONSES = Part(8 * 16, 16)  # a grouped kernel's eight tile-scheduler responses
SCHEDULER_PIPELINE = Part(16 * 8, 16)


def kernel_storage(ml_tensors: Part, ml_pipeline: Part, ml_maps: Part | None, ep: epi.Epilogue, pingpong: bool,
                   grouped: bool) -> Part:
    """The GemmKernel's SharedStorage: pipelines, scheduler, the epilogue's then the mainloop's tensors; a
    grouped kernel puts the tensors first and adds scheduler responses and the tensor maps."""
    math = [MATH_ORDER_BARRIER] if pingpong else []
    if not grouped:
        pipes = struct(aligned16(ml_pipeline), aligned16(ep.pipeline), *math, ORDER_BARRIER, align=16)
        return struct(pipes, SCHEDULER, struct(ep.tensors, ml_tensors, align=128))
    pipes = struct(SCHEDULER_PIPELINE, aligned16(ml_pipeline), aligned16(ep.pipeline), *math, ORDER_BARRIER, align=16)
    maps = [Part(m.size, 128) for m in (ml_maps, ep.tensormaps) if m is not None]
    return struct(struct(ml_tensors, ep.tensors, align=128), pipes, SCHEDULER_RESPONSES, struct(*maps, align=128))


def parts(named: list[tuple[str, int]], total: int) -> tuple[tuple[str, int], ...]:
    """Named byte counts, and the alignment padding that makes them add up to ``total``."""
    named = [(n, b) for n, b in named if b]
    return (*named, ("alignment padding", total - sum(b for _, b in named)))


def epilogue_parts(ep: epi.Epilogue) -> list[tuple[str, int]]:
    """The epilogue's named bytes (none for the epilogue without shared memory)."""
    if ep.tile is None:
        return [("epilogue storage (given)", ep.tensors.size)] if ep.tensors.size > 1 else []
    return [(f"epilogue C/D buffers ({ep.tile[0]}x{ep.tile[1]} tile, {ep.stages_c} C / {ep.stages_d} D stages)",
             ep.tensors.size), ("epilogue barriers", ep.pipeline.size)]


def refuse(g: GemmKernel) -> str | None:
    """Why sm_90 has no collective for these operands (or the launcher no kernel), or None."""
    if g.launcher is not None and (reason := launchers.refuse("sm90", g.a, g.b)):
        return reason
    for op in (g.op_a, g.op_b):
        if op.block_scaled:
            return f"sm_90 has no block-scaled MMA ({op.name}: from sm_100 on)"
        if op.kind in ("f4", "f6"):
            return f"sm_90 has no {op.name} MMA (fp4 and fp6 tensor cores from sm_100 on)"
    if (g.op_a.bits == 16) != (g.op_b.bits == 16) or (g.op_a.kind == "tf32") != (g.op_b.kind == "tf32"):
        return "operands of different widths take CUTLASS's mixed-input collective, which is not modelled"
    if g.op_a.bits == 16 and g.a != g.b:
        # fp16 x bf16: GMMA takes two 16-bit operands of one type.
        return "No eligible GMMA operator for request configuration."
    if g.schedule in ("1sm", "2sm"):
        return f"--schedule {g.schedule} is sm_100's; sm_90 has auto, cooperative, pingpong"
    if g.m % 64:
        return "Tile_M must be a multiple of 64."
    if g.k % (256 // g.op_a.bits):
        # One GMMA's K is 32 bytes of the operand: 16 fp16, 32 fp8, 8 tf32 elements.
        return f"Tile_K must be a multiple of {256 // g.op_a.bits}."
    if g.grouped and g.schedule == "auto":
        # EpilogueScheduleAuto is the non-TMA epilogue, which takes no ptr-array (grouped) strides.
        return "StrideCD must be rank-3: [M, N, L]"
    return None


COOPERATIVE_M = 128  # the cooperative kernels' two math warp groups split the tile's M


def device_refusal(g: GemmKernel, cooperative: bool) -> str | None:
    """What the kernel's device code asserts once the host build passes (the kernel's operator(), compiled
    only for the device): a cooperative kernel (sm_90's and sm_120's, grouped or not) needs tile M >= 128."""
    if cooperative and g.m < COOPERATIVE_M:
        return "Cooperative kernel requires Tile Size to be greater than or equal to 128 along the M-dimension."
    return None


def build(g: GemmKernel) -> Build:
    """sm_90's CollectiveBuilder for OpClassTensorOp with the TMA warp-specialized kernel and epilogue."""
    if g.launcher is not None:
        # The MoE launcher's sm_90 kernel is KernelPtrArrayTmaWarpSpecializedCooperative, whatever --schedule.
        g = replace(g, schedule="cooperative")
    reason = refuse(g)
    if reason:
        return Build("sm90", False, reason)
    pingpong = g.schedule == "pingpong" or (g.schedule == "auto" and g.m == 64)
    # The MoE launcher gives sm_90's kernel no C; its FINALIZE fusion keeps a row-broadcast vector.
    c_bits = 0 if g.launcher is not None else g.c_bits
    fusion = launchers.fusion_storage(g.fusion, g.swap_ab, g.n, g.d_bits)
    built = epi.NO_SMEM if g.schedule == "auto" else epi.sm90(g.m, g.n, c_bits, g.d_bits, not pingpong, g.grouped,
                                                              g.swap_ab, fusion)
    ep = epi.chosen(built, g.epilogue_bytes)
    carveout = ep.shared.size
    a, b = g.op_a.bits * g.m * g.k // 8, g.op_b.bits * g.n * g.k // 8
    stage = round_up(a + b, ALIGNMENT) + barriers(1).size
    capacity = CAPACITY_BYTES - (GROUPED_CARVEOUT if g.grouped else 0)
    stages = g.stages or auto_stage_count(round_down(capacity, ALIGNMENT), round_up(carveout, ALIGNMENT), stage)
    tensors = struct(array(stages * a, 16), array(stages * b, 16), align=128)
    maps = Part(2 * epi.TMA_DESCRIPTOR_BYTES, 128) if g.grouped else None
    mainloop = struct(tensors, *([maps] if maps else []), barriers(stages))
    kernel = kernel_storage(tensors, barriers(stages), maps, ep, pingpong, g.grouped)
    own = kernel.size - tensors.size - barriers(stages).size - ep.tensors.size - ep.pipeline.size
    named = [("A tiles", stages * a), ("B tiles", stages * b), ("mainloop barriers", barriers(stages).size),
             *epilogue_parts(ep), ("kernel pipelines, scheduler, alignment" + (", tensor maps" if g.grouped else ""), own)]
    built = Build("sm90", stages >= MIN_STAGES, None, stages, stage, capacity, carveout, mainloop.size,
                  ep.shared.size, own, kernel.size, parts(named, kernel.size))
    if stages < MIN_STAGES:
        return replace(built, reason="Specialization requires Stages set to value 2 or more.")
    if reason := device_refusal(g, not pingpong):
        return replace(built, builds=False, reason=reason, device_only=True)
    return built
