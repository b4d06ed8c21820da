"""Compile the MoE grouped GEMM as TensorRT-LLM's and FlashInfer's moe_gemm_tma_ws_launcher.inl builds it
for sm_120 (NVFP4 x NVFP4, ptr-array, KernelScheduleAuto, a TmaWarpSpecialized epilogue, cluster 1x1x1,
C typed as D, StageCountAutoCarveout<sizeof(epilogue SharedStorage)>), with epilogue fusion NONE and
FINALIZE, each with and without swap_ab, and record what CUTLASS computes (as truth.py does).

    python tools/cutlass_truth/moe.py --cutlass DIR --extensions DIR --out tests/data/cutlass_truth_moe_4.7.0.json

DIR is a folder holding CUTLASS's ``include/``; --extensions the ``cutlass_extensions/include`` folder of
FlashInfer or TensorRT-LLM (the FINALIZE fusion's sm90_visitor_scatter.hpp). Never run by ``make test``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth import HEADER, cutlass_version, nvcc_version  # noqa: E402 - the shared probe program

TILES = ((128, 256, 128), (256, 128, 128), (128, 128, 128), (128, 128, 64), (128, 64, 128), (128, 32, 128))
NVFP4 = "cutlass::nv_float4_t<cutlass::float_e2m1_t>"
SCATTER = "#include \"cutlass_extensions/epilogue/fusion/sm90_visitor_scatter.hpp\"\n"


def program(index: int, tile: tuple[int, int, int], fusion: str, swap_ab: bool) -> str:
    """One case: the launcher's epilogue (default or FINALIZE), mainloop and GemmKernel, as it spells them."""
    m, n, k = tile
    # With swap_ab the kernel computes D^T: C and D are the transposed (column-major) layouts.
    layout = "cutlass::layout::ColumnMajor" if swap_ab else "cutlass::layout::RowMajor"
    # AlignmentC is 128 bits of the input type (fp4: 32 elements); AlignmentD 128 bits of the output (bf16).
    head = (f"cutlass::arch::Sm120, cutlass::arch::OpClassBlockScaledTensorOp, Tile, Cluster, "
            f"cutlass::epilogue::collective::EpilogueTileAuto, float, float, cutlass::bfloat16_t, {layout}*, 32")
    if fusion == "finalize":
        op = ("ScaledAccPerRowBiasPerColScaleScatter" if swap_ab else "ScaledAccPerColBiasPerRowScaleScatter")
        epilogue = (f"{head}, void, {layout}*, 8, cutlass::epilogue::TmaWarpSpecialized, cutlass::epilogue::fusion::"
                    f"{op}<{layout}, cutlass::bfloat16_t, float, cutlass::bfloat16_t, float>")
    else:
        epilogue = f"{head}, cutlass::bfloat16_t, {layout}*, 8, cutlass::epilogue::TmaWarpSpecialized"
    return f"""
namespace case{index} {{
using Tile = Shape<_{m},_{n},_{k}>;
using Cluster = Shape<_1,_1,_1>;
using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<{epilogue}>::CollectiveOp;
using Main = typename cutlass::gemm::collective::CollectiveBuilder<cutlass::arch::Sm120,
    cutlass::arch::OpClassBlockScaledTensorOp, {NVFP4}, cutlass::layout::RowMajor*, 32,
    {NVFP4}, cutlass::layout::ColumnMajor*, 32, float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
    cutlass::gemm::collective::KernelScheduleAuto>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<
    cutlass::gemm::GroupProblemShape<Shape<int64_t,int64_t,int64_t>>, Main, Epi, void, void>;
}}
"""


def cases() -> list[dict]:
    """Every tile with fusion none and finalize, each with and without swap_ab."""
    return [{"arch": 120, "launcher": "trtllm-moe", "a": "nvfp4", "b": "nvfp4", "c": "bf16", "d": "bf16",
             "tile": list(tile), "fusion": fusion, "swap_ab": swap,
             "name": f"sm120_moe_{'x'.join(map(str, tile))}_{fusion}{'_swap_ab' if swap else ''}"}
            for tile in TILES for fusion in ("none", "finalize") for swap in (False, True)]


def main() -> int:
    """Compile every case in one program, run it, and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutlass", type=Path, required=True, help="folder holding CUTLASS's include/")
    parser.add_argument("--extensions", type=Path, required=True, help="cutlass_extensions/include")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    start, todo = time.monotonic(), cases()
    body = "".join(program(i, tuple(c["tile"]), c["fusion"], c["swap_ab"]) for i, c in enumerate(todo))
    calls = "".join(f'  show<case{i}::Main, case{i}::Epi, case{i}::Kernel>("{c["name"]}");\n'
                    for i, c in enumerate(todo))
    header = HEADER.replace('#include "cutlass/gemm/kernel/gemm_universal.hpp"\n',
                            '#include "cutlass/gemm/kernel/gemm_universal.hpp"\n' + SCATTER)
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp) / "moe.cu", Path(tmp) / "moe"
        source.write_text(header + body + "int main() {\n" + calls + "  return 0;\n}\n")
        built = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_120a", "--expt-relaxed-constexpr", "-w", "-DNDEBUG",
                                f"-I{args.cutlass / 'include'}", f"-I{args.extensions}", "-o", str(binary),
                                str(source)], capture_output=True, text=True)
        if built.returncode != 0:
            print(built.stderr[-3000:], file=sys.stderr)
            return 1
        ran = subprocess.run([str(binary)], capture_output=True, text=True, check=True)
    measured = {r["name"]: r for r in map(json.loads, ran.stdout.splitlines())}
    rows = [c | measured[c["name"]] | {"builds": True} for c in todo]
    doc = {"cutlass_version": cutlass_version(args.cutlass), "nvcc": nvcc_version(),
           "made_by": "tools/cutlass_truth/moe.py", "rows": rows}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(rows)} rows in {time.monotonic() - start:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
