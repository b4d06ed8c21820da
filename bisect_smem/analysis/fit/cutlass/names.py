"""CUTLASS kernels by their demangled names: a collective whose name shows its stage count, tile and operand
type is the kernel fit counts, so a trace's request for it gets the builder's bytes beside what was asked."""

from __future__ import annotations

import re

from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION
from bisect_smem.analysis.fit.cutlass.evaluate import evaluate_cutlass
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.errors import BisectSmemError
from bisect_smem.core.hardware import gemm_family

_STAGES = re.compile(r"Mainloop(Sm\d+)\w*<(\d+)")
_TILE = re.compile(r"cute::tuple<cute::C<(\d+)>, ?cute::C<(\d+)>, ?cute::C<(\d+)> ?>, ?([\w:]+)")
_COLUMN_MAJOR = "cute::tuple<cute::C<1>, long, long>"  # an M-major (column-major) C or D stride
_CUTLASS_TYPES = {"cutlass::bfloat16_t": "bf16", "cutlass::half_t": "fp16", "cutlass::float_e4m3_t": "e4m3",
                  "cutlass::float_e5m2_t": "e5m2", "cutlass::tfloat32_t": "tf32", "float": "fp32", "signed": "int8"}


def recognize(readable: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
    """What fit says of a CUTLASS collective whose name shows its stage count, tile and operand type: its
    SharedStorageSize at that stage count, against what the process asked, and the stages the builder's
    auto count gives on ``target``. None where the name shows no such kernel or fit cannot model it."""
    stages, tile = _STAGES.search(readable), None
    if stages is None or target is None or gemm_family(target.compute_capability) != stages.group(1).lower():
        return None  # the collective was built for another family than the target's: fit would model another
    tile = next((t for t in _TILE.finditer(readable, stages.end()) if int(t.group(1)) >= 16), None)
    dtype = _CUTLASS_TYPES.get(tile.group(4)) if tile else None
    if tile is None or dtype is None:
        return None
    schedule = "cooperative" if "Cooperative" in readable else "pingpong" if "Pingpong" in readable else "auto"
    m, n, k, count = int(tile.group(1)), int(tile.group(2)), int(tile.group(3)), int(stages.group(2))
    head = f"fit (cutlass {CUTLASS_VERSION}, {m}x{n}x{k} {dtype}, {schedule}):"
    epilogue = readable[readable.find("CollectiveEpilogue<"):readable.find("FusionCallbacks")]
    if _COLUMN_MAJOR in epilogue:  # checked against a real build: column-major C/D add storage fit does not model
        return head, "  models row-major C and D; this kernel stores them column-major, so no byte count"
    try:
        kernel = GemmKernel(m, n, k, dtype, dtype, schedule=schedule, stages=count)
        built = evaluate_cutlass(kernel, 0, 128, target)
        auto = evaluate_cutlass(GemmKernel(m, n, k, dtype, dtype, schedule=schedule), 0, 128, target)
    except BisectSmemError:
        return None
    if built.launch_bytes is None:
        return None
    same = "the same as asked" if built.launch_bytes == requested_bytes else \
        f"the launch asked {requested_bytes} B: its epilogue or storage differs from the builder's"
    lines = (head, f"  {count} stages make SharedStorageSize {built.launch_bytes} B, {same}")
    if not auto.stages:
        return lines
    return (*lines, f"  the builder's auto count here: {auto.stages} stages, {auto.launch_bytes} B")
