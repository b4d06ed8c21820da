"""Compile the MoE grouped GEMM as TensorRT-LLM's and FlashInfer's moe_gemm_tma_ws_launcher.inl builds it
for sm_120 (NVFP4 x NVFP4, ptr-array, KernelScheduleAuto, a TmaWarpSpecialized epilogue, cluster 1x1x1,
C typed as D) or, with --arch 90, for sm_90 (bf16, the ptr-array cooperative schedules, no C), both with
StageCountAutoCarveout<sizeof(epilogue SharedStorage)>, with epilogue fusion NONE and FINALIZE, each with
and without swap_ab, and record what CUTLASS computes (as truth.py does).

    python tools/cutlass_truth/moe.py --cutlass DIR --extensions DIR --out tests/data/cutlass_truth_moe_4.7.0.json

DIR is a folder holding CUTLASS's ``include/``; --extensions the ``cutlass_extensions/include`` folder of
FlashInfer or TensorRT-LLM (the FINALIZE fusion's sm90_visitor_scatter.hpp). Never run by ``make test``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth import HEADER, build_and_run, cutlass_version, nvcc_version  # noqa: E402 - the shared probe program

TILES = ((128, 256, 128), (256, 128, 128), (128, 128, 128), (128, 128, 64), (128, 64, 128), (128, 32, 128))
NVFP4 = "cutlass::nv_float4_t<cutlass::float_e2m1_t>"
SCATTER = "#include \"cutlass_extensions/epilogue/fusion/sm90_visitor_scatter.hpp\"\n"


# What the launcher chooses per architecture: the operator class, the operand type and its alignment, C's
# type in the epilogue (sm_120 types C as D; sm_90 has no C), C's alignment, and the two schedules.
ARCHS = {
    120: ("cutlass::arch::OpClassBlockScaledTensorOp", NVFP4, 32, "cutlass::bfloat16_t", 32,
          "cutlass::epilogue::TmaWarpSpecialized", "cutlass::gemm::collective::KernelScheduleAuto"),
    90: ("cutlass::arch::OpClassTensorOp", "cutlass::bfloat16_t", 8, "void", 8,
         "cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative",
         "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative"),
}
TILES_BY_ARCH = {120: TILES, 90: ((128, 128, 64), (128, 256, 64), (256, 128, 64), (128, 64, 64))}


def program(index: int, arch: int, tile: tuple[int, int, int], fusion: str, swap_ab: bool) -> str:
    """One case: the launcher's epilogue (default or FINALIZE), mainloop and GemmKernel, as it spells them."""
    m, n, k = tile
    opclass, operand, align_ab, element_c, align_c, epilogue_schedule, schedule = ARCHS[arch]
    # With swap_ab the kernel computes D^T: C and D are the transposed (column-major) layouts.
    layout = "cutlass::layout::ColumnMajor" if swap_ab else "cutlass::layout::RowMajor"
    # AlignmentC is 128 bits of the input type; AlignmentD 128 bits of the output (bf16).
    head = (f"cutlass::arch::Sm{arch}, {opclass}, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto, "
            f"float, float, {element_c}, {layout}*, {align_c}")
    if fusion == "finalize":
        op = ("ScaledAccPerRowBiasPerColScaleScatter" if swap_ab else "ScaledAccPerColBiasPerRowScaleScatter")
        epilogue = (f"{head}, void, {layout}*, 8, {epilogue_schedule}, cutlass::epilogue::fusion::"
                    f"{op}<{layout}, cutlass::bfloat16_t, float, cutlass::bfloat16_t, float>")
    else:
        epilogue = f"{head}, cutlass::bfloat16_t, {layout}*, 8, {epilogue_schedule}"
    return f"""
namespace case{index} {{
using Tile = Shape<_{m},_{n},_{k}>;
using Cluster = Shape<_1,_1,_1>;
using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<{epilogue}>::CollectiveOp;
using Main = typename cutlass::gemm::collective::CollectiveBuilder<cutlass::arch::Sm{arch},
    {opclass}, {operand}, cutlass::layout::RowMajor*, {align_ab},
    {operand}, cutlass::layout::ColumnMajor*, {align_ab}, float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
    {schedule}>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<
    cutlass::gemm::GroupProblemShape<Shape<int64_t,int64_t,int64_t>>, Main, Epi, void, void>;
}}
"""


def cases(arch: int) -> list[dict]:
    """Every tile of ``arch`` with fusion none and finalize, each with and without swap_ab."""
    dtype = "nvfp4" if arch == 120 else "bf16"
    return [{"arch": arch, "launcher": "trtllm-moe", "a": dtype, "b": dtype, "c": "bf16", "d": "bf16",
             "tile": list(tile), "fusion": fusion, "swap_ab": swap,
             "name": f"sm{arch}_moe_{'x'.join(map(str, tile))}_{fusion}{'_swap_ab' if swap else ''}"}
            for tile in TILES_BY_ARCH[arch] for fusion in ("none", "finalize") for swap in (False, True)]


def main() -> int:
    """Compile every case in one program, run it, and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutlass", type=Path, required=True, help="folder holding CUTLASS's include/")
    parser.add_argument("--extensions", type=Path, required=True, help="cutlass_extensions/include")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--arch", type=int, choices=sorted(ARCHS), default=120)
    args = parser.parse_args()
    start, todo = time.monotonic(), cases(args.arch)
    body = "".join(program(i, args.arch, tuple(c["tile"]), c["fusion"], c["swap_ab"]) for i, c in enumerate(todo))
    header = HEADER.replace('#include "cutlass/gemm/kernel/gemm_universal.hpp"\n',
                            '#include "cutlass/gemm/kernel/gemm_universal.hpp"\n' + SCATTER)
    with tempfile.TemporaryDirectory() as tmp:
        results, log = build_and_run(header, body, [c["name"] for c in todo], args.arch,
                                     [args.cutlass / "include", args.extensions], Path(tmp), "moe")
    if log:
        print(log[-3000:], file=sys.stderr)
        return 1
    measured = {r["name"]: r for r in results}
    rows = [c | measured[c["name"]] | {"builds": True} for c in todo]
    doc = {"cutlass_version": cutlass_version(args.cutlass), "nvcc": nvcc_version(),
           "made_by": "tools/cutlass_truth/moe.py", "rows": rows}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(rows)} rows in {time.monotonic() - start:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
