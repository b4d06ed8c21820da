"""Compile the MoE grouped GEMM as TensorRT-LLM's and FlashInfer's moe_gemm_tma_ws_launcher.inl builds it, at
the candidates FlashInfer's kernel generator emits (flashinfer/jit/gemm/cutlass/generate_kernels.py), and
record what CUTLASS computes for each (as truth.py does):

- sm_120 (generate_sm120_grouped_gemm_operations): NVFP4 x NVFP4 and MXFP8 activations x MXFP4 weights (the
  launcher's is_mx_fpx path), ptr-array, KernelScheduleAuto, a TmaWarpSpecialized epilogue with C typed as D,
  cluster 1x1x1, fp16 and bf16 out;
- sm_90 (generate_sm90_grouped_gemm_operations): f16, bf16, f32 and e4m3 (fp16 or bf16 out), the ptr-array
  cooperative schedules (FP8FastAccum for e4m3), no C, clusters 1x1, 2x1, 1x2 and 2x2 where the generator
  keeps them (is_gemm_op_valid);
- sm_100 (generate_sm100_grouped_gemm_operations): f16, bf16, f32, e4m3, MXFP8, NVFP4 and MXFP8 x MXFP4, no C,
  the ptr-array 1-SM kernels at cluster 1x1 and the 2-SM ones at cluster 2x1 (the MMA tile's M twice the
  generator's), the TMA epilogue or the one with no shared memory (D aligned to 256 bits), a 128x64 epilogue
  tile for NVFP4 at N 256, static or dynamic clusters (``_dynamic``); the full list is 720 kernels (1440 with
  dynamic clusters), so a representative set (SM100_SET) is compiled unless told: --stride N adds every Nth of
  the full list, --edges the kernels the generator leaves out (SM100_EDGES), --every all of them;

each with StageCountAutoCarveout<sizeof(epilogue SharedStorage)>, epilogue fusion NONE and FINALIZE, with and
without swap_ab (A and B swapped, C and D column-major). A case CUTLASS refuses is recorded with
``builds: false`` and its static_assert.

    python tools/cutlass_truth/moe.py --cutlass DIR --extensions DIR --arch 120 --out tests/data/cutlass_truth_moe_4.7.0.json
    python tools/cutlass_truth/moe.py --cutlass DIR --extensions DIR --arch 100 --out tests/data/cutlass_truth_moe_sm100_4.7.0.json
    python tools/cutlass_truth/moe.py ... --arch 100 --stride 30 --out T --merge    (then --edges --per-program 1)
    python tools/cutlass_truth/moe.py ... --arch 100 --device --per-program 1 --name CASE --out tests/data/cutlass_truth_moe_sm100_device_4.7.0.json

DIR is a folder holding CUTLASS's ``include/``; --extensions the ``cutlass_extensions/include`` folder of
FlashInfer or TensorRT-LLM (the FINALIZE fusion's sm90_visitor_scatter.hpp). --only keeps the cases whose
name holds every one of its words, --name the case of that exact name; --merge keeps the rows of an existing
table that this run does not rebuild; --device compiles each kernel's device code too.
Never run by ``make test``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from itertools import product
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from truth import HEADER, build_and_run, cutlass_version, nvcc_version, refusal  # noqa: E402 - the shared probe

SCATTER = "#include \"cutlass_extensions/epilogue/fusion/sm90_visitor_scatter.hpp\"\n"
# The launcher's element types (TllmToCutlassTypeAdapter) and their bits.
CUTLASS_TYPES = {"nvfp4": "cutlass::float_e2m1_t", "mxfp4": "cutlass::float_e2m1_t", "mxfp8": "cutlass::float_e4m3_t",
                 "e4m3": "cutlass::float_e4m3_t", "fp16": "cutlass::half_t", "bf16": "cutlass::bfloat16_t",
                 "fp32": "float"}
BITS = {"nvfp4": 4, "mxfp4": 4, "mxfp8": 8, "e4m3": 8, "fp16": 16, "bf16": 16, "fp32": 32}
# sm_120's block-scaled mainloop types (ElementActBlockScaled, ElementWeightBlockScaled).
BLOCK_SCALED = {"nvfp4": "cutlass::nv_float4_t<cutlass::float_e2m1_t>",
                "mxfp8": "cutlass::mx_float8_t<cutlass::float_e4m3_t>",
                "mxfp4": "cutlass::mx_float4_t<cutlass::float_e2m1_t>"}


def sm120_candidates() -> list[dict]:
    """generate_sm120_grouped_gemm_operations: e2m1 x e2m1 and (e4m3, e2m1) with is_mx_fpx; the mixed pair only
    at 128xNx128; fp16 and bf16 out; cluster 1x1x1."""
    tiles = ((128, 32, 128), (128, 32, 256), (128, 64, 128), (128, 64, 256), (128, 128, 128), (128, 128, 256),
             (256, 128, 128), (128, 256, 128))
    out = []
    for (act, weight), fusion, tile, swap, d in product((("nvfp4", "nvfp4"), ("mxfp8", "mxfp4")), ("none", "finalize"),
                                                       tiles, (True, False), ("fp16", "bf16")):
        if act == "mxfp8" and tile not in ((128, 32, 128), (128, 64, 128), (128, 128, 128)):
            continue
        out.append(_case(120, act, weight, d, tile, (1, 1, 1), fusion, swap))
    return out


def sm90_candidates() -> list[dict]:
    """generate_sm90_grouped_gemm_operations: M 128 at N 16 to 256 and 256x128, K 128 bytes; clusters 1 or 2
    along M and N where is_gemm_op_valid keeps them; e4m3 out fp16 or bf16, the others their own type."""
    out = []
    shapes = [(128, n) for n in (16, 32, 64, 128, 256)] + [(256, 128)]
    for dtype, fusion, (m, n), (cm, cn), swap in product(("fp16", "bf16", "fp32", "e4m3"), ("none", "finalize"), shapes,
                                                         product((1, 2), (1, 2)), (True, False)):
        if (cm == 2 and m < 128) or (cn == 2 and n < 128):
            continue
        for d in (("fp16", "bf16") if dtype == "e4m3" else (dtype,)):
            out.append(_case(90, dtype, dtype, d, (m, n, 1024 // BITS[dtype]), (cm, cn, 1), fusion, swap))
    return out


def sm100_valid(act: str, weight: str, tile: tuple[int, int, int], cluster_m: int, epilogue: str, fusion: str) -> bool:
    """is_gemm_op_valid_sm100 for arch 100 (cluster 1x1 or 2x1 only): FINALIZE only with the TMA epilogue; tile M
    64 or 128; fp4 and MX operands at M 128, N 64, 128 or 256, never with no shared memory; e4m3 at N 8 or 16
    with cluster 1x1 where N is a multiple of 16 or M is 64; else N 32 to 256 in 32s, 64s for 2 SMs."""
    m, n, _ = tile
    if fusion == "finalize" and epilogue != "tma":
        return False
    if m not in (64, 128):
        return False
    if BITS[act] == 4 or BITS[weight] == 4 or act == "mxfp8":
        if n not in (64, 128, 256) or m != 128 or epilogue == "nosmem":
            return False
    if act == "e4m3" and n in (8, 16) and cluster_m == 1:
        return m != 128 or n % 16 == 0
    if n % 32 or n < 32 or n > 256:
        return False
    return not (cluster_m == 2 and n % 64)


def sm100_candidates() -> list[dict]:
    """generate_sm100_grouped_gemm_operations for arch 100: every kernel is_gemm_op_valid_sm100 keeps (static
    clusters; a dynamic one builds the same storage)."""
    out = []
    pairs = (("fp16", "fp16"), ("bf16", "bf16"), ("fp32", "fp32"), ("e4m3", "e4m3"), ("mxfp8", "mxfp8"),
             ("nvfp4", "nvfp4"), ("mxfp8", "mxfp4"))
    for (act, weight), fusion, m, n, cm, epilogue, swap in product(pairs, ("none", "finalize"), (64, 128),
                                                                   (8, 16, 32, 64, 128, 192, 256), (1, 2),
                                                                   ("nosmem", "tma"), (True, False)):
        k = 256 if act == "e4m3" and n == 8 else 1024 // BITS[act]
        if not sm100_valid(act, weight, (m, n, k), cm, epilogue, fusion):
            continue
        for d in (("fp16", "bf16") if BITS[act] <= 8 else (act,)):
            out.append(_case(100, act, weight, d, (m, n, k), (cm, 1, 1), fusion, swap, epilogue))
    return out


# The representative sm_100 set: each type family, 1 and 2 SMs, each epilogue, FINALIZE, swap_ab, the NVFP4 128x64
# epilogue tile at N 256, and dynamic clusters; (types, out, tile, cluster M, epilogue, fusion, swap_ab, dynamic).
SM100_SET = (
    ("bf16", "bf16", (128, 128, 64), 1, "tma", "none", False, False),
    ("bf16", "bf16", (128, 128, 64), 2, "tma", "none", False, False),
    ("bf16", "bf16", (128, 128, 64), 1, "nosmem", "none", False, False),
    ("bf16", "bf16", (128, 128, 64), 2, "nosmem", "none", False, False),
    ("bf16", "bf16", (128, 128, 64), 1, "tma", "finalize", False, False),
    ("bf16", "bf16", (128, 128, 64), 2, "tma", "finalize", False, False),
    ("bf16", "bf16", (128, 128, 64), 1, "tma", "none", True, False),
    ("bf16", "bf16", (128, 128, 64), 1, "tma", "finalize", True, False),
    ("bf16", "bf16", (128, 128, 64), 2, "nosmem", "none", True, False),
    ("bf16", "bf16", (128, 128, 64), 2, "tma", "none", False, True),
    ("bf16", "bf16", (64, 256, 64), 1, "tma", "none", False, False),
    ("bf16", "bf16", (64, 64, 64), 2, "tma", "none", False, False),
    ("bf16", "bf16", (128, 256, 64), 1, "tma", "finalize", True, False),
    ("fp16", "fp16", (128, 256, 64), 2, "tma", "finalize", True, False),
    ("fp16", "fp16", (64, 32, 64), 1, "nosmem", "none", False, False),
    ("fp32", "fp32", (128, 128, 32), 1, "tma", "none", False, False),
    ("fp32", "fp32", (128, 256, 32), 2, "tma", "finalize", False, False),
    ("fp32", "fp32", (64, 32, 32), 1, "nosmem", "none", True, False),
    ("e4m3", "bf16", (128, 128, 128), 1, "tma", "none", False, False),
    ("e4m3", "fp16", (128, 16, 128), 1, "tma", "finalize", True, False),
    ("e4m3", "bf16", (64, 8, 256), 1, "nosmem", "none", False, False),
    ("e4m3", "bf16", (128, 192, 128), 2, "tma", "finalize", False, False),
    ("mxfp8", "bf16", (128, 128, 128), 2, "tma", "none", False, False),
    ("mxfp8", "fp16", (128, 256, 128), 1, "tma", "finalize", True, False),
    ("nvfp4", "bf16", (128, 256, 256), 1, "tma", "none", False, False),
    ("nvfp4", "bf16", (128, 256, 256), 2, "tma", "finalize", False, False),
    ("nvfp4", "bf16", (128, 256, 256), 2, "tma", "none", True, True),
    ("nvfp4", "fp16", (128, 128, 256), 1, "tma", "none", True, False),
    ("nvfp4", "bf16", (128, 64, 256), 2, "tma", "finalize", True, False),
    ("mxfp8-mxfp4", "bf16", (128, 128, 128), 1, "tma", "finalize", False, False),
    ("mxfp8-mxfp4", "fp16", (128, 256, 128), 2, "tma", "none", True, False),
)


# Kernels the sm_100 generator does not emit, each compiled alone (--edges): where CUTLASS refuses them, in its words.
SM100_EDGES = (
    ("nvfp4", "bf16", (128, 128, 256), 1, "nosmem", "none", False, False),
    ("mxfp8-mxfp4", "bf16", (128, 128, 128), 2, "nosmem", "none", False, False),
    ("bf16", "bf16", (128, 128, 64), 1, "nosmem", "finalize", False, False),
    ("bf16", "bf16", (128, 160, 64), 2, "tma", "none", False, False),
    ("bf16", "bf16", (128, 160, 64), 2, "nosmem", "none", False, False),
    ("e4m3", "bf16", (128, 8, 256), 1, "tma", "none", False, False),
    ("bf16", "bf16", (64, 32, 64), 2, "tma", "none", False, False),
    ("fp32", "fp32", (128, 256, 32), 1, "tma", "none", False, False),
    ("nvfp4", "bf16", (128, 192, 256), 1, "tma", "none", False, False),
    ("nvfp4", "bf16", (64, 128, 256), 1, "tma", "none", False, False),
    ("bf16", "bf16", (128, 128, 64), 4, "tma", "none", False, False),
    ("bf16", "bf16", (128, 96, 64), 1, "nosmem", "none", False, False),
)


def sm100_set(edges: bool = False) -> list[dict]:
    """SM100_SET (or SM100_EDGES) as cases."""
    out = []
    for types, d, tile, cm, epilogue, fusion, swap, dynamic in SM100_EDGES if edges else SM100_SET:
        act, _, weight = types.partition("-")
        out.append(_case(100, act, weight or act, d, tile, (cm, 1, 1), fusion, swap, epilogue, dynamic))
    return out


def _case(arch: int, act: str, weight: str, d: str, tile: tuple[int, int, int], cluster: tuple[int, int, int],
          fusion: str, swap_ab: bool, epilogue: str = "tma", dynamic: bool = False) -> dict:
    """One candidate as committed: fit's names for the activation (a) and weight (b) types, the output (d);
    on sm_100 the tile is the generator's (per CTA: the MMA tile's M is twice it at cluster 2x1), the epilogue
    ``tma`` or ``nosmem``, and ``dynamic`` a cluster shape given at run time."""
    types = act if act == weight else f"{act}-{weight}"
    name = (f"sm{arch}_moe_{types}_d{d}_{'x'.join(map(str, tile))}_cluster{'x'.join(map(str, cluster))}_{fusion}"
            f"{'_nosmem' if epilogue == 'nosmem' else ''}{'_swap_ab' if swap_ab else ''}"
            f"{'_dynamic' if dynamic else ''}")
    row = {"arch": arch, "launcher": "trtllm-moe", "a": act, "b": weight, "c": d if arch == 120 else "void", "d": d,
           "tile": list(tile), "cluster": list(cluster), "fusion": fusion, "swap_ab": swap_ab, "name": name}
    return row | ({"epilogue": epilogue, "dynamic_cluster": dynamic} if arch == 100 else {})


def program(index: int, case: dict) -> str:
    """One case: the launcher's epilogue (default or FINALIZE), mainloop and GemmKernel, as it spells them."""
    if case["arch"] == 100:
        return program_sm100(index, case)
    m, n, k = case["tile"]
    cm, cn, ck = case["cluster"]
    arch, act, weight, out = case["arch"], case["a"], case["b"], case["d"]
    mx = act != weight  # IsWFP4AFP8: FP8 activations with FP4 weights
    if arch == 120:
        opclass, schedule = "cutlass::arch::OpClassBlockScaledTensorOp", "cutlass::gemm::collective::KernelScheduleAuto"
        epilogue_schedule, element_c = "cutlass::epilogue::TmaWarpSpecialized", CUTLASS_TYPES[out]
        main_act, main_weight = BLOCK_SCALED[act], BLOCK_SCALED[weight]
    else:
        opclass = "cutlass::arch::OpClassTensorOp"
        schedule = ("cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8FastAccum" if act == "e4m3" else
                    "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative")
        epilogue_schedule, element_c = "cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative", "void"
        main_act, main_weight = CUTLASS_TYPES[act], CUTLASS_TYPES[weight]
    align_act, align_weight = 128 // BITS[act], 128 if mx else 128 // BITS[weight]
    # AlignmentC is 128 bits of the activation type (ElementType), AlignmentD 128 bits of the output.
    align_c, align_d = 128 // BITS[act], 128 // BITS[out]
    # With swap_ab the kernel computes D^T: A is the weight, and C and D are the transposed (column-major) layouts.
    a, b, align_a, align_b = ((main_weight, main_act, align_weight, align_act) if case["swap_ab"] else
                              (main_act, main_weight, align_act, align_weight))
    layout = "cutlass::layout::ColumnMajor" if case["swap_ab"] else "cutlass::layout::RowMajor"
    head = (f"cutlass::arch::Sm{arch}, {opclass}, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto, "
            f"float, float, {element_c}, {layout}*, {align_c}")
    if case["fusion"] == "finalize":
        op = "ScaledAccPerRowBiasPerColScaleScatter" if case["swap_ab"] else "ScaledAccPerColBiasPerRowScaleScatter"
        epilogue = (f"{head}, void, {layout}*, {align_d}, {epilogue_schedule}, cutlass::epilogue::fusion::"
                    f"{op}<{layout}, {CUTLASS_TYPES[out]}, float, {CUTLASS_TYPES[out]}, float>")
    else:
        epilogue = f"{head}, {CUTLASS_TYPES[out]}, {layout}*, {align_d}, {epilogue_schedule}"
    return f"""
namespace case{index} {{
using Tile = Shape<_{m},_{n},_{k}>;
using Cluster = Shape<_{cm},_{cn},_{ck}>;
using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<{epilogue}>::CollectiveOp;
using Main = typename cutlass::gemm::collective::CollectiveBuilder<cutlass::arch::Sm{arch},
    {opclass}, {a}, cutlass::layout::RowMajor*, {align_a},
    {b}, cutlass::layout::ColumnMajor*, {align_b}, float, Tile, Cluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
    {schedule}>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<
    cutlass::gemm::GroupProblemShape<Shape<int64_t,int64_t,int64_t>>, Main, Epi, void, void>;
}}
"""


# sm_100's block-scaled mainloop types (cute::tuple<Element, ElementSF>: ue8m0 factors for MX, ue4m3 for NVFP4).
SM100_SF = {"nvfp4": "cutlass::float_ue4m3_t", "mxfp8": "cutlass::float_ue8m0_t", "mxfp4": "cutlass::float_ue8m0_t"}


def program_sm100(index: int, case: dict) -> str:
    """The launcher's sm_100 branch (IsSM10x): Is2SM where the cluster's M is 2, the MMA tile's M doubled; C void;
    the PtrArray TMA or NoSmem epilogue of 1 or 2 SMs (D aligned to 256 bits without shared memory); a 128x64
    epilogue tile for FP4 activations at N 256; FINALIZE on the static cluster; the Nvf4 or (MX) Mxf8f6f4
    block-scaled schedules, or the dense ones."""
    m, n, k = case["tile"]
    cm, cn, ck = case["cluster"]
    act, weight, out = case["a"], case["b"], case["d"]
    two_sm = cm == 2
    scaled = act in SM100_SF
    mx = scaled and act != "nvfp4"
    tma = case["epilogue"] == "tma"
    sms = "2Sm" if two_sm else "1Sm"
    opclass = "cutlass::arch::OpClassBlockScaledTensorOp" if scaled else "cutlass::arch::OpClassTensorOp"
    epilogue_schedule = f"cutlass::epilogue::PtrArray{'TmaWarpSpecialized' if tma else 'NoSmemWarpSpecialized'}{sms}"
    kind = ("Mxf8f6f4" if mx else "Nvf4") if scaled else ""
    schedule = f"cutlass::gemm::KernelPtrArrayTmaWarpSpecialized{sms}{kind}Sm100"
    main_act, main_weight = ((f"cute::tuple<{CUTLASS_TYPES[t]}, {SM100_SF[t]}>" if scaled else CUTLASS_TYPES[t])
                             for t in (act, weight))
    align_act, align_weight = 128 // BITS[act], 128 if act != weight and BITS[weight] == 4 else 128 // BITS[weight]
    align_c, align_d = 128 // BITS[act], (128 if tma else 256) // BITS[out]
    a, b, align_a, align_b = ((main_weight, main_act, align_weight, align_act) if case["swap_ab"] else
                              (main_act, main_weight, align_act, align_weight))
    layout = "cutlass::layout::ColumnMajor" if case["swap_ab"] else "cutlass::layout::RowMajor"
    subtile = ("Shape<_128,_64>" if BITS[act] == 4 and n == 256 else "cutlass::epilogue::collective::EpilogueTileAuto")
    cluster = "Shape<int32_t,int32_t,_1>" if case["dynamic_cluster"] else "Cluster"
    if case["fusion"] == "finalize":
        op = "ScaledAccPerRowBiasPerColScaleScatter" if case["swap_ab"] else "ScaledAccPerColBiasPerRowScaleScatter"
        epilogue = (f"cutlass::arch::Sm100, {opclass}, MmaTile, Cluster, {subtile}, float, float, void, {layout}*, "
                    f"{align_c}, void, {layout}*, {align_d}, {epilogue_schedule}, cutlass::epilogue::fusion::"
                    f"{op}<{layout}, {CUTLASS_TYPES[out]}, float, {CUTLASS_TYPES[out]}, float>")
    else:
        epilogue = (f"cutlass::arch::Sm100, {opclass}, MmaTile, {cluster}, {subtile}, float, float, void, {layout}*, "
                    f"{align_c}, {CUTLASS_TYPES[out]}, {layout}*, {align_d}, {epilogue_schedule}")
    return f"""
namespace case{index} {{
using MmaTile = Shape<_{m * (2 if two_sm else 1)},_{n},_{k}>;
using Cluster = Shape<_{cm},_{cn},_{ck}>;
using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<{epilogue}>::CollectiveOp;
using Main = typename cutlass::gemm::collective::CollectiveBuilder<cutlass::arch::Sm100,
    {opclass}, {a}, cutlass::layout::RowMajor*, {align_a},
    {b}, cutlass::layout::ColumnMajor*, {align_b}, float, MmaTile, {cluster},
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
    {schedule}>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<
    cutlass::gemm::GroupProblemShape<Shape<int64_t,int64_t,int64_t>>, Main, Epi, void, void>;
}}
"""


def build(cases: list[dict], arch: int, includes: list[Path], workdir: Path, tag: str,
          device: bool = False) -> list[dict]:
    """Rows for ``cases`` compiled in one program; where it does not build, each half again, down to the case
    that CUTLASS refuses (recorded with its static_assert). ``device``: with each kernel's device code (to PTX,
    truth.py's build_and_run), so its device-side static_asserts count; rows record ``device: true``."""
    header = HEADER.replace('#include "cutlass/gemm/kernel/gemm_universal.hpp"\n',
                            '#include "cutlass/gemm/kernel/gemm_universal.hpp"\n' + SCATTER)
    body = "".join(program(i, c) for i, c in enumerate(cases))
    results, log = build_and_run(header, body, [c["name"] for c in cases], arch, includes, workdir, tag, device)
    done = {"device": True} if device else {}
    if not log:
        measured = {r["name"]: r for r in results}
        return [c | measured[c["name"]] | {"builds": True} | done for c in cases]
    if len(cases) == 1:
        print(f"{cases[0]['name']}: refused: {refusal(log)}", file=sys.stderr)
        return [cases[0] | {"builds": False, "refusal": refusal(log)} | done]
    half = len(cases) // 2
    return (build(cases[:half], arch, includes, workdir, tag + "a", device)
            + build(cases[half:], arch, includes, workdir, tag + "b", device))


def main() -> int:
    """Compile the candidates of --arch in programs of --per-program cases, run them, and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutlass", type=Path, required=True, help="folder holding CUTLASS's include/")
    parser.add_argument("--extensions", type=Path, required=True, help="cutlass_extensions/include")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--arch", type=int, choices=(90, 100, 120), default=120)
    parser.add_argument("--every", action="store_true", help="sm_100: every candidate, not the representative set")
    parser.add_argument("--stride", type=int, help="sm_100: every STRIDE-th candidate of the full list, from the "
                        "first (a sample across it beside the representative set)")
    parser.add_argument("--edges", action="store_true", help="sm_100: the kernels the generator does not emit, "
                        "SM100_EDGES (with --per-program 1, so a refusal names its case)")
    parser.add_argument("--only", nargs="*", default=(), help="keep the cases whose name holds all of these words")
    parser.add_argument("--name", action="append", help="keep the case of exactly this name (repeatable)")
    parser.add_argument("--missing-from", type=Path, help="drop the cases this table already holds")
    parser.add_argument("--merge", action="store_true", help="keep --out's rows that this run does not rebuild")
    parser.add_argument("--per-program", type=int, default=8, help="cases in one program (default 8)")
    parser.add_argument("--device", action="store_true", help="compile each kernel's device code too (to PTX): its "
                        "device-side static_asserts count")
    parser.add_argument("--output", choices=sorted(set(BITS) - set(BLOCK_SCALED)),
                        help="build the candidates with this output type instead of theirs (kernels the generator "
                             "does not emit, such as fp32 out on sm_120)")
    args = parser.parse_args()
    start = time.monotonic()
    todo = {120: sm120_candidates, 90: sm90_candidates,
            100: sm100_candidates if args.every else lambda: sm100_set(args.edges)}[args.arch]()
    if args.arch == 100 and args.stride:
        todo = sm100_candidates()[::args.stride]
    if args.output:
        todo = list({c["name"]: c for c in (_case(c["arch"], c["a"], c["b"], args.output, tuple(c["tile"]),
                                                  tuple(c["cluster"]), c["fusion"], c["swap_ab"])
                                            for c in todo)}.values())
    todo = [c for c in todo if (not args.only or all(word in c["name"] for word in args.only))
            and (not args.name or c["name"] in args.name)]
    if args.missing_from:
        held = {r["name"] for r in json.loads(args.missing_from.read_text())["rows"]}
        todo = [c for c in todo if c["name"] not in held]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(0, len(todo), args.per_program):
            rows += build(todo[i:i + args.per_program], args.arch, [args.cutlass / "include", args.extensions],
                          Path(tmp), f"moe{i}", args.device)
            print(f"{len(rows)}/{len(todo)} in {time.monotonic() - start:.0f} s", file=sys.stderr)
    if args.merge and args.out.exists():
        rebuilt = {r["name"] for r in rows}
        rows = [r for r in json.loads(args.out.read_text())["rows"] if r["name"] not in rebuilt] + rows
    doc = {"cutlass_version": cutlass_version(args.cutlass), "nvcc": nvcc_version(),
           "made_by": "tools/cutlass_truth/moe.py", "rows": sorted(rows, key=lambda r: r["name"])}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(rows)} rows in {time.monotonic() - start:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
