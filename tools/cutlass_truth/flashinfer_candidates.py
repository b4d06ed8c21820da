"""Run FlashInfer's own MoE kernel generator (flashinfer/jit/gemm/cutlass/generate_kernels.py,
generate_sm100_grouped_gemm_operations at arch 100) and record every grouped GEMM it emits for sm_100, in
fit's names: activation and weight types, output, the generator's CTA tile, cluster, fusion, swap_ab and
epilogue (tma or nosmem). Each kernel is emitted with a static and a dynamic cluster, which build the same
storage (tools/cutlass_truth/moe.py's ``_dynamic`` cases), so each is recorded once.

    python tools/cutlass_truth/flashinfer_candidates.py --flashinfer DIR --out tests/data/flashinfer_candidates_sm100.json

DIR is a FlashInfer checkout (the folder holding ``flashinfer/``); the generator needs nothing but Python.
Never run by ``make test``; its output is committed test data.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import types
from pathlib import Path


def generator(flashinfer: Path) -> types.ModuleType:
    """generate_kernels.py as a module of a bare ``flashinfer.jit.gemm.cutlass`` package (its relative import of
    cutlass_library.py works; FlashInfer's own __init__, which needs torch, is not run)."""
    folder = flashinfer / "flashinfer" / "jit" / "gemm" / "cutlass"
    for name in ("flashinfer", "flashinfer.jit", "flashinfer.jit.gemm", "flashinfer.jit.gemm.cutlass"):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)] if name.endswith("cutlass") else []
        sys.modules[name] = package
    spec = importlib.util.spec_from_file_location("flashinfer.jit.gemm.cutlass.generate_kernels",
                                                  folder / "generate_kernels.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def candidates(gen: types.ModuleType) -> list[dict]:
    """Every sm_100 grouped GEMM the generator emits (static clusters), in fit's names."""
    names = {gen.DataType.f16: "fp16", gen.DataType.bf16: "bf16", gen.DataType.f32: "fp32",
             gen.DataType.e4m3: "e4m3", gen.e2m1: "nvfp4"}
    found = set()
    for op in gen.generate_sm100_grouped_gemm_operations(True, 100):
        if op.dynamic_cga:
            continue
        act, weight = names[op.act_type], names[op.weight_type]
        if op.is_mx_fpx:  # e4m3 with ue8m0 scale factors: MXFP8 activations, MXFP8 or MXFP4 weights
            act, weight = "mxfp8", "mxfp4" if weight == "nvfp4" else "mxfp8"
        nosmem = op.epi_schedule == gen.EpilogueScheduleType.PtrArrayNoSmemWarpSpecialized1Sm
        finalize = op.epi_fusion == gen.TrtLlm_EpilogueFusion.epilogue_fusion_finalize
        found.add((act, weight, names[op.output_type], tuple(op.cta_shape), tuple(op.cga_shape),
                   "finalize" if finalize else "none", op.swap_ab, "nosmem" if nosmem else "tma"))
    keys = ("a", "b", "d", "tile", "cluster", "fusion", "swap_ab", "epilogue")
    return [dict(zip(keys, (list(v) if isinstance(v, tuple) else v for v in row), strict=True))
            for row in sorted(found)]


def main() -> int:
    """Write the generator's sm_100 kernels with the FlashInfer commit they came from."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flashinfer", type=Path, required=True, help="a FlashInfer checkout")
    parser.add_argument("--commit", default=None, help="the checkout's commit, recorded beside the list")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = candidates(generator(args.flashinfer))
    doc = {"made_by": "tools/cutlass_truth/flashinfer_candidates.py", "flashinfer_commit": args.commit,
           "generator": "generate_sm100_grouped_gemm_operations(True, 100)", "rows": rows}
    # One kernel a line: the list is long, and a diff of it should read as kernels added or removed.
    head = json.dumps({k: v for k, v in doc.items() if k != "rows"}, sort_keys=True)[:-1]
    lines = ",\n".join(json.dumps(row, sort_keys=True) for row in rows)
    args.out.write_text(f'{head}, "rows": [\n{lines}\n]}}\n')
    print(f"{len(rows)} kernels -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
