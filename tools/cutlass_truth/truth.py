"""Compile small host-only CUTLASS programs and record what the library itself computes for each case in
cases.py: ``DispatchPolicy::Stages``, the ``sizeof`` of the mainloop's, the epilogue's and the kernel's
``SharedStorage`` (and their parts), and ``GemmKernel::SharedStorageSize``. Each program instantiates the
collective builders the way CUTLASS's examples do (49, 57, 70, 72, 75, 79, 92): the epilogue first, then
the mainloop with ``StageCountAutoCarveout<sizeof(CollectiveEpilogue::SharedStorage)>`` (or ``StageCount<N>``).
The programs only take sizes of types, so they run on the CPU; nvcc compiles them for sm_90a, sm_100a or
sm_120a. A case the library refuses (a static_assert) is recorded with ``builds: false`` and the reason.
Refused cases, and cases marked ``device``, are compiled with their device code too
(``cutlass::device_kernel<GemmKernel>`` instantiated, to PTX, which needs no GPU), so the kernels' own
device-side static_asserts count; each such case is a program of its own, recorded as built or refused.

    python tools/cutlass_truth/truth.py --cutlass DIR --out tests/data/cutlass_truth.json
    python tools/cutlass_truth/truth.py --cutlass DIR --set rules --out tests/data/cutlass_truth_rules_4.7.0.json
    python tools/cutlass_truth/truth.py --cutlass DIR --set releases --out tests/data/cutlass_truth_release_VERSION.json

DIR is a CUTLASS checkout or any folder holding CUTLASS's ``include/`` (the ``nvidia-cutlass`` package's
``cutlass_library/source``, for one). Never run by ``make test``; its output is committed test data.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import CASES, REFUSED, RELEASES, RELEASES_REFUSED_BY_SOME, RULES, Case  # noqa: E402 - the case list lives beside this script

ELEMENTS = {"bf16": "cutlass::bfloat16_t", "fp16": "cutlass::half_t", "fp32": "float", "void": "void",
            "e4m3": "cutlass::float_e4m3_t", "e5m2": "cutlass::float_e5m2_t", "e2m1": "cutlass::float_e2m1_t",
            "e3m2": "cutlass::float_e3m2_t", "e2m3": "cutlass::float_e2m3_t",
            "nvfp4": "cutlass::nv_float4_t<cutlass::float_e2m1_t>",
            "mxfp4": "cutlass::mx_float4_t<cutlass::float_e2m1_t>",
            "mxfp6": "cutlass::mx_float6_t<cutlass::float_e3m2_t>",
            "mxfp8": "cutlass::mx_float8_t<cutlass::float_e4m3_t>",
            "mxfp4-f8f6f4": "cutlass::mx_float4_t<cutlass::float_e2m1_t>"}
BITS = {"bf16": 16, "fp16": 16, "fp32": 32, "e4m3": 8, "e5m2": 8, "e2m1": 4, "e3m2": 6, "e2m3": 6,
        "nvfp4": 4, "mxfp4": 4, "mxfp6": 6, "mxfp8": 8, "mxfp4-f8f6f4": 4}
BLOCK_SCALED = {"nvfp4", "mxfp4", "mxfp6", "mxfp8", "mxfp4-f8f6f4"}

HEADER = r"""
#include <cstdio>
#include <type_traits>
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
using namespace cute;
// A value of the type, or -1 where the type has no such member.
#define PROBE(NAME, EXPR) \
  template <class T, class = void> struct NAME { static constexpr long long v = -1; }; \
  template <class T> struct NAME<T, std::void_t<decltype(EXPR)>> { static constexpr long long v = (long long)(EXPR); };
PROBE(p_stages, T::DispatchPolicy::Stages)
PROBE(p_shared, sizeof(typename T::SharedStorage))
PROBE(p_tensors, sizeof(typename T::SharedStorage::TensorStorage))
PROBE(p_pipeline, sizeof(typename T::SharedStorage::PipelineStorage))
PROBE(p_tensormaps, sizeof(typename T::SharedStorage::TensorMapStorage))
PROBE(p_cosize_a, cute::cosize_v<typename T::SmemLayoutA>)
PROBE(p_cosize_b, cute::cosize_v<typename T::SmemLayoutB>)
PROBE(p_cosize_sfa, cute::cosize_v<typename T::SmemLayoutSFA>)
PROBE(p_cosize_sfb, cute::cosize_v<typename T::SmemLayoutSFB>)
PROBE(p_cosize_c, cute::cosize_v<typename T::SmemLayoutC>)
PROBE(p_cosize_d, cute::cosize_v<typename T::SmemLayoutD>)
PROBE(p_stages_c, T::StagesC)
PROBE(p_stages_d, T::StagesD)
PROBE(p_reuse_c, T::ReuseSmemC)
PROBE(p_align_c, T::SmemAlignmentC)
PROBE(p_align_d, T::SmemAlignmentD)
PROBE(p_fusion, sizeof(typename T::FusionCallbacks::SharedStorage))
PROBE(p_storage_size, T::SharedStorageSize)
template <class Mainloop, class Epilogue, class Kernel>
void show(const char* name) {
  std::printf("{\"name\": \"%s\", \"stages\": %lld, "
    "\"mainloop_bytes\": %lld, \"mainloop_tensor_bytes\": %lld, \"mainloop_pipeline_bytes\": %lld, "
    "\"mainloop_tensormap_bytes\": %lld, \"smem_a_elements\": %lld, \"smem_b_elements\": %lld, "
    "\"smem_sfa_elements\": %lld, \"smem_sfb_elements\": %lld, "
    "\"epilogue_bytes\": %lld, \"epilogue_tensor_bytes\": %lld, \"epilogue_pipeline_bytes\": %lld, "
    "\"epilogue_tensormap_bytes\": %lld, \"smem_c_elements\": %lld, \"smem_d_elements\": %lld, "
    "\"epilogue_stages_c\": %lld, \"epilogue_stages_d\": %lld, \"epilogue_reuse_c\": %lld, "
    "\"epilogue_align_c\": %lld, \"epilogue_align_d\": %lld, \"epilogue_fusion_bytes\": %lld, "
    "\"kernel_bytes\": %lld, \"kernel_tensor_bytes\": %lld, \"kernel_pipeline_bytes\": %lld, "
    "\"kernel_tensormap_bytes\": %lld, \"shared_storage_bytes\": %lld}\n", name,
    p_stages<Mainloop>::v, p_shared<Mainloop>::v, p_tensors<Mainloop>::v, p_pipeline<Mainloop>::v,
    p_tensormaps<Mainloop>::v, p_cosize_a<Mainloop>::v, p_cosize_b<Mainloop>::v,
    p_cosize_sfa<Mainloop>::v, p_cosize_sfb<Mainloop>::v,
    p_shared<Epilogue>::v, p_tensors<Epilogue>::v, p_pipeline<Epilogue>::v, p_tensormaps<Epilogue>::v,
    p_cosize_c<Epilogue>::v, p_cosize_d<Epilogue>::v, p_stages_c<Epilogue>::v, p_stages_d<Epilogue>::v,
    p_reuse_c<Epilogue>::v, p_align_c<Epilogue>::v, p_align_d<Epilogue>::v, p_fusion<Epilogue>::v,
    p_shared<Kernel>::v, p_tensors<Kernel>::v, p_pipeline<Kernel>::v, p_tensormaps<Kernel>::v,
    p_storage_size<Kernel>::v);
}
"""


def _alignment(dtype: str) -> int:
    """Elements per 16 B access; 128 elements for the sub-byte types (the F8F6F4 TMA requirement)."""
    if dtype == "void":
        return 8
    return 128 // BITS[dtype] if BITS[dtype] >= 8 else 128


def _schedules(case: Case) -> tuple[str, str, str]:
    """(operator class, kernel schedule, epilogue schedule) as CUTLASS spells them."""
    scaled = case.a in BLOCK_SCALED
    opclass = "cutlass::arch::OpClassBlockScaledTensorOp" if scaled else "cutlass::arch::OpClassTensorOp"
    ptr = "PtrArray" if case.grouped else ""
    if case.schedule == "auto":
        return opclass, "cutlass::gemm::collective::KernelScheduleAuto", "cutlass::epilogue::collective::EpilogueScheduleAuto"
    if case.arch == 100:
        sms = case.schedule[0]
        kind = ""
        if scaled:
            kind = {"nvfp4": "Nvf4", "mxfp4": "Mxf4"}.get(case.a, "Mxf8f6f4")
        return (opclass, f"cutlass::gemm::Kernel{ptr}TmaWarpSpecialized{sms}Sm{kind}Sm100",
                f"cutlass::epilogue::{ptr}TmaWarpSpecialized{sms}Sm")
    kernel = {"cooperative": "Cooperative", "pingpong": "Pingpong"}[case.schedule]
    if case.arch == 120:
        # Dense (F8F6F4) ptr-array kernels take the Sm120 schedules with their scheduler depth, as
        # CUTLASS's grouped tests do; block-scaled ones the generic ptr-array schedules (example 79d).
        dense_grouped = case.grouped and not scaled
        schedule = f"cutlass::gemm::Kernel{ptr}TmaWarpSpecialized{kernel}" + ("Sm120<2>" if dense_grouped else "")
        return opclass, schedule, "cutlass::epilogue::collective::EpilogueScheduleAuto"
    epilogue = f"{ptr}TmaWarpSpecializedCooperative" if kernel == "Cooperative" else f"{ptr}TmaWarpSpecialized"
    if case.grouped and kernel == "Pingpong":
        epilogue = "PtrArrayTmaWarpSpecializedPingpong"
    return opclass, f"cutlass::gemm::Kernel{ptr}TmaWarpSpecialized{kernel}", f"cutlass::epilogue::{epilogue}"


def program(case: Case, index: int) -> str:
    """The C++ of one case: its builders and GemmKernel in a namespace, and the line that prints it."""
    opclass, kernel, epilogue = _schedules(case)
    m, n, k = case.tile
    cm, cn, ck = case.cluster
    ptr = " *" if case.grouped else ""
    problem = "cutlass::gemm::GroupProblemShape<Shape<int,int,int>>" if case.grouped else "Shape<int,int,int,int>"
    stages = (f"cutlass::gemm::collective::StageCount<{case.stages}>" if case.stages else
              "cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>")
    d_align = _alignment(case.d)
    c_align = d_align if case.c == "void" else _alignment(case.c)
    return f"""
namespace case{index} {{
using Tile = Shape<_{m},_{n},_{k}>;
using Cluster = Shape<_{cm},_{cn},_{ck}>;
using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm{case.arch}, {opclass}, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
    float, float, {ELEMENTS[case.c]}, cutlass::layout::RowMajor{ptr}, {c_align},
    {ELEMENTS[case.d]}, cutlass::layout::RowMajor{ptr}, {d_align}, {epilogue}>::CollectiveOp;
using Main = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm{case.arch}, {opclass},
    {ELEMENTS[case.a]}, cutlass::layout::RowMajor{ptr}, {_alignment(case.a)},
    {ELEMENTS[case.b]}, cutlass::layout::ColumnMajor{ptr}, {_alignment(case.b)},
    float, Tile, Cluster, {stages}, {kernel}>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<{problem}, Main, Epi, void>;
}}
"""


def compile_and_run(cutlass: Path, arch: int, cases: list[Case], workdir: Path, tag: str,
                    device: bool = False) -> tuple[list[dict], str]:
    """Build one program over ``cases`` for sm_{arch}a (``device``: with their kernels' device code) and run
    it: one JSON line a case, or the compiler's error."""
    body = "".join(program(c, i) for i, c in enumerate(cases))
    return build_and_run(HEADER, body, [c.name for c in cases], arch, [cutlass / "include"], workdir, tag, device)


def build_and_run(header: str, body: str, names: list[str], arch: int, includes: list[Path], workdir: Path,
                  tag: str, device: bool = False) -> tuple[list[dict], str]:
    """Compile ``header`` and ``body`` (namespaces case0, case1, ... each with Main, Epi and Kernel) with a main
    that shows each under its name, for sm_{arch}a, and run it: one JSON line a case, or the compiler's log.
    ``device``: each case's ``cutlass::device_kernel<Kernel>`` is instantiated too (taking its address is
    enough), compiled to PTX for compute_{arch}a: the kernel's device-side static_asserts fire, and no ptxas
    run or GPU is needed."""
    calls = "".join(f'  show<case{i}::Main, case{i}::Epi, case{i}::Kernel>("{name}");\n' for i, name in enumerate(names))
    kernels = "".join(f"  (void*)&cutlass::device_kernel<case{i}::Kernel>,\n" for i in range(len(names)))
    touch = f"void* const device_kernels[] = {{\n{kernels}}};\n" if device else ""
    source = workdir / f"{tag}.cu"
    source.write_text(header + body + touch + "int main() {\n" + calls + "  return 0;\n}\n")
    binary = workdir / tag
    cmd = ["nvcc", "-std=c++17", f"-gencode=arch=compute_{arch}a,code=compute_{arch}a", "--expt-relaxed-constexpr",
           "-w", "-DNDEBUG", *(f"-I{folder}" for folder in includes), "-o", str(binary), str(source)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode != 0:
        return [], built.stderr + built.stdout
    ran = subprocess.run([str(binary)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in ran.stdout.splitlines()], ""


def refusal(log: str) -> str:
    """The first static_assert message in a compiler log (what CUTLASS says when it refuses a build)."""
    found = re.search(r'static assertion failed with "([^"]+)"', log) or re.search(r"error: (.+)", log)
    return found.group(1).strip() if found else log.strip().splitlines()[0][:300]


def cutlass_version(cutlass: Path) -> str:
    """``major.minor.patch`` from include/cutlass/version.h."""
    text = (cutlass / "include" / "cutlass" / "version.h").read_text()
    parts = [re.search(rf"#define CUTLASS_{p}\s+(\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def nvcc_version() -> str:
    """nvcc's release, e.g. ``13.0``."""
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"release (\d+\.\d+)", out).group(1)


def jobs_of(cases: list[Case], alone: list[Case], per_program: int) -> list[tuple[int, list[Case], str, bool]]:
    """(arch, cases, tag, alone): host-only cases ``per_program`` to a program; device cases and ``alone`` (those
    a release may refuse) one a program, so one refusal names one case."""
    alone = [c for c in cases if c.device] + alone
    cases = [c for c in cases if not c.device]
    jobs = []
    for arch in sorted({c.arch for c in cases}):
        mine = [c for c in cases if c.arch == arch]
        jobs += [(arch, mine[i:i + per_program], f"sm{arch}_{i}", False) for i in range(0, len(mine), per_program)]
    return jobs + [(c.arch, [c], f"alone_{i}", True) for i, c in enumerate(alone)]


def run_jobs(cutlass: Path, jobs: list[tuple[int, list[Case], str, bool]], workers: int) -> tuple[list[dict], int]:
    """Compile and run every job: the rows (built, or where alone refused in CUTLASS's words) and how many cases
    of a shared program failed to build."""
    def run(job: tuple[int, list[Case], str, bool], tmp: Path) -> tuple[list[dict], str]:
        arch, cases, tag, _alone = job
        return compile_and_run(cutlass, arch, cases, tmp, tag, any(c.device for c in cases))

    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(workers) as pool:
        done = list(pool.map(lambda j: (j, run(j, Path(tmp))), jobs))
    rows, failures = [], 0
    for (_arch, cases, _tag, alone), (measured, log) in done:
        by_name = {r["name"]: r for r in measured}
        for case in cases:
            if case.name in by_name:
                rows.append(case.as_dict() | by_name[case.name] | {"builds": True})
            elif alone:
                rows.append(case.as_dict() | {"builds": False, "refusal": refusal(log)})
            else:
                failures += 1
                print(f"{case.name}: did not build:\n{log[-3000:]}", file=sys.stderr)
    return rows, failures


# Refused cases are compiled with their device code: a kernel's device-side assert is a refusal too.
SETS = {"cases": (CASES, [replace(c, device=True) for c in REFUSED]), "rules": (RULES, []),
        "releases": (RELEASES, RELEASES_REFUSED_BY_SOME)}


def main() -> int:
    """Compile every case of the set (or those of --arch) and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutlass", type=Path, required=True, help="folder holding CUTLASS's include/")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--set", choices=SETS, default="cases", help="cases (default): every family; rules: the "
                        "device-side and wording rules, each compiled with its device code; releases: the small set "
                        "that tells releases apart")
    parser.add_argument("--jobs", type=int, default=2, help="compilers at once (default 2)")
    parser.add_argument("--per-program", type=int, default=6, help="cases in one program (default 6)")
    parser.add_argument("--arch", type=int, action="append", help="only this arch (repeatable)")
    parser.add_argument("--name", action="append", help="only cases whose name holds this (repeatable)")
    args = parser.parse_args()
    start = time.monotonic()
    cases, refused = ([c for c in group if (not args.arch or c.arch in args.arch)
                       and (not args.name or any(part in c.name for part in args.name))] for group in SETS[args.set])
    rows, failures = run_jobs(args.cutlass, jobs_of(cases, refused, args.per_program), args.jobs)
    doc = {"cutlass_version": cutlass_version(args.cutlass), "nvcc": nvcc_version(),
           "made_by": "tools/cutlass_truth/truth.py", "rows": rows}
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"{len(rows)} rows ({failures} failed) in {time.monotonic() - start:.0f} s -> {args.out}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
