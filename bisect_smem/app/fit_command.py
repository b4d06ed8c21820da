"""The ``fit`` subcommand: gather the kernel's sizes and the targets, evaluate, and return the text to print
with the exit code. Called by cli.py only, which prints."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bisect_smem.analysis.fit.compiled import cubin_static_smem, ptx_static_smem
from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION
from bisect_smem.analysis.fit.cutlass.gemm import SCHEDULES, GemmKernel
from bisect_smem.analysis.fit.gemm import DOES_NOT_BUILD, evaluate_cutlass
from bisect_smem.analysis.fit.targets import DOES_NOT_FIT, UNKNOWN, FitRequest, FitResult, Target, check_bound, evaluate
from bisect_smem.analysis.fit.tiles import Tile
from bisect_smem.app import output
from bisect_smem.app.argtypes import parse_stages, positive_int
from bisect_smem.app.render.fit import render, render_explain, render_gemm
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.model import Report, to_jsonable
from bisect_smem.core.profiles import PROFILES, ArchProfile, find_profile, profile_names
from bisect_smem.core.saved import Baseline, load_baseline, load_saved
from bisect_smem.core.sizes import parse_size

FIT_SCHEMA = "bisect_smem/fit/v1"
EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 4
TRITON_MESSAGE = re.compile(r"Required:\s*(\d+)\s*,\s*Hardware limit:\s*(\d+)", re.IGNORECASE)

@dataclass(frozen=True)
class FitOutput:
    """What cli.py prints on stdout, and the exit code."""

    text: str
    code: int

@dataclass(frozen=True)
class Explained:
    """A library's shared-memory error: what the kernel needs and, from Triton, the limit it met."""

    kind: str  # "triton" or "bytes"
    required_bytes: int
    hardware_limit_bytes: int | None
    limit_matches: tuple[str, ...]

@dataclass(frozen=True)
class Gemm:
    """The CUTLASS kernels asked about (one per tile) and the stage count (None: auto)."""

    kernels: tuple[GemmKernel, ...]
    stages: int | None

def build_gemm(args: argparse.Namespace) -> Gemm | None:
    """The CUTLASS kernels from --tile and its options; the options without --tile are a usage error."""
    options = [name for name, value in (("--stages", args.stages), ("--dtype", args.dtype), ("--dtype-a", args.dtype_a),
                                        ("--dtype-b", args.dtype_b), ("--epilogue", args.epilogue),
                                        ("--c-dtype", args.c_dtype), ("--d-dtype", args.d_dtype),
                                        ("--schedule", args.schedule), ("--grouped", args.grouped or None))
               if value is not None]
    if not args.tile:
        if options:
            raise UsageError(f"{', '.join(options)} {'applies' if len(options) == 1 else 'apply'} only to "
                             "--tile MxNxK: add --tile or drop them")
        return None
    if args.explain and args.stages not in (None, "auto"):
        raise UsageError("--explain shows the stage counts of --tile that fit: drop --stages")
    dtype = "fp16" if args.dtype is None else args.dtype
    epilogue = check_bound(parse_size(args.epilogue, "--epilogue"), "--epilogue") if args.epilogue else None
    auto = args.explain or args.stages in (None, "auto")
    stages = None if auto else args.stages
    tiles = list(dict.fromkeys(Tile.parse(text) for text in args.tile))
    kernels = tuple(GemmKernel(t.m, t.n, t.k, args.dtype_a or dtype, args.dtype_b or dtype, args.c_dtype or "bf16",
                               args.d_dtype or "bf16", args.schedule or "auto", args.grouped, stages, epilogue)
                    for t in tiles)
    return Gemm(kernels, stages)

def build_request(args: argparse.Namespace, gemm: Gemm | None, explained: Explained | None) -> tuple[FitRequest, str]:
    """The kernel's fixed sizes from the arguments, and a line saying where they came from."""
    sources = [name for name, value in (("BYTES", args.bytes), ("--dynamic", args.dynamic),
                                        ("--tile", None if explained else args.tile), ("--explain", args.explain))
               if value is not None]
    if len(sources) > 1:
        raise UsageError(f"give the dynamic size once (got {' and '.join(sources)})")
    if args.cubin and args.ptx:
        raise UsageError("give --cubin or --ptx, not both")
    compiled = args.cubin or args.ptx
    if args.kernel is not None and not compiled:
        raise UsageError("--kernel names a kernel in --cubin or --ptx: add one of them or drop --kernel")
    if compiled and args.static is not None:
        raise UsageError("the static size comes from the compiled file: drop --static")
    if not sources and not compiled:
        raise UsageError("fit needs a size: BYTES, --tile, --explain, or --cubin/--ptx with --kernel")
    notes = []
    if explained is not None:
        dynamic = explained.required_bytes
    elif gemm is not None:
        dynamic = 0
        notes.append(_gemm_note(gemm))
    else:
        text = args.bytes if args.bytes is not None else args.dynamic
        dynamic = parse_size(text, "dynamic size") if text is not None else 0
    static = parse_size(args.static, "static size") if args.static is not None else 0
    if compiled:
        name, static, how = read_static(Path(compiled), args.kernel, ptx=bool(args.ptx), ask_driver=_local(args))
        notes.append(f"static {static} B of {name}, {how}")
    request = FitRequest(dynamic, static, args.threads)
    return request, "; ".join(notes)

def _gemm_note(gemm: Gemm) -> str:
    k = gemm.kernels[0]
    tile = f"tile {k.m}x{k.n}x{k.k}, " if len(gemm.kernels) == 1 else ""
    types = k.a if k.a == k.b else f"A {k.a}, B {k.b}"
    stages = "stages auto (StageCountAutoCarveout)" if gemm.stages is None else f"{gemm.stages} stages (StageCount)"
    epilogue = f"epilogue {k.epilogue_bytes} B (given)" if k.epilogue_bytes is not None else f"C {k.c}, D {k.d}"
    return (f"{tile}{types}, {epilogue}, schedule {k.schedule}{', grouped' if k.grouped else ''}, {stages}: "
            f"CUTLASS {CUTLASS_VERSION}'s builders")


def read_static(path: Path, kernel: str | None, ptx: bool, ask_driver: bool = True) -> tuple[str, int, str]:
    """The kernel's static shared memory: from the driver where a local GPU may load the file, else the file."""
    name, static = (ptx_static_smem if ptx else cubin_static_smem)(path, kernel)
    if ask_driver:
        try:
            from bisect_smem.app.requests import backend_for

            backend = backend_for("cupy")
            loaded = backend.loaded_static_smem(path, name) if backend.is_available() else None
            if loaded is not None:
                if loaded != static:
                    return name, loaded, f"read by the driver (the file says {static} B)"
                return name, loaded, "read by the driver (the file agrees)"
        except BackendUnavailable:
            pass
    return name, static, f"read from the {'PTX' if ptx else 'cubin ELF sections'}"

def parse_explain(text: str) -> Explained:
    """Triton's "out of resource: shared memory, Required: X, Hardware limit: Y", or a byte count (CUTLASS)."""
    match = TRITON_MESSAGE.search(text)
    if match:
        required, limit = (check_bound(int(g), "Required") for g in match.groups())
        kind = "triton"
    else:
        try:
            required, limit, kind = check_bound(parse_size(text, "--explain"), "--explain"), None, "bytes"
        except UsageError:
            raise UsageError("--explain takes Triton's message (\"out of resource: shared memory, Required: X, "
                             "Hardware limit: Y\") or the kernel's shared memory in bytes, e.g. CUTLASS's "
                             f"sizeof(GemmKernel::SharedStorage), with --arch (got {text[:80]!r})") from None
    matches = tuple(p.key for p in PROFILES if limit is not None and p.max_smem_per_block_optin_bytes == limit)
    return Explained(kind, required, limit, matches)

def published(args: argparse.Namespace) -> list[ArchProfile]:
    """The published rows asked for: every --arch once, in order; all of them unless --arch or --target."""
    if not args.arch:
        return [] if args.target else list(PROFILES)
    profiles: dict[str, ArchProfile] = {}
    for name in args.arch:
        p = find_profile(name)
        if p is None:
            raise UsageError(f"unknown profile {name!r}; valid: {', '.join(profile_names())}")
        profiles.setdefault(p.key, p)
    return list(profiles.values())

def targets(args: argparse.Namespace) -> tuple[list[Target], str | None]:
    """Published architectures, then devices from --target files, then local devices measured now."""
    found = [Target.from_profile(p) for p in published(args)]
    for text in args.target or ():
        found += file_targets(text)
    local, note = local_devices(args)
    return found + [Target.from_report(d) for d in local], note

def _local(args: argparse.Namespace) -> bool:
    return not (args.no_local or args.target or args.simulate)

def file_targets(text: str) -> list[Target]:
    """Every device of a saved report, or every baseline of a folder laid out DIR/<gpu-model>/<driver>.json."""
    path = Path(text)
    if path.is_dir():
        files = sorted(path.glob("*/*.json"))
        if not files:
            raise UsageError(f"--target {text}: no baselines in it (expected {text}/<gpu-model>/<driver>.json)")
        return [_baseline_target(load_baseline(f)) for f in files]
    saved = load_saved(path, name=f"--target {path}")
    if not isinstance(saved, Report):
        return [_baseline_target(saved)]
    if not saved.devices:
        raise UsageError(f"--target {text}: the report has no devices")
    return [Target.from_report(dev, f"{dev.name} (cc {dev.compute_capability}), driver "
                                    f"{dev.context.get('nvml_driver_version') or 'unknown'} "
                                    f"[{path.name} device {dev.index}]", str(path))
            for dev in saved.devices]

def _baseline_target(baseline: Baseline) -> Target:
    dev = baseline.device
    driver = str(baseline.provenance.get("driver_version") or dev.context.get("nvml_driver_version") or "unknown")
    where = f"{baseline.path.parent.name}/{baseline.path.name}"
    target = Target.from_report(dev, f"{dev.name} (cc {dev.compute_capability}), driver {driver} [baseline {where}]",
                                str(baseline.path))
    return replace(target, driver_version=driver)

def local_devices(args: argparse.Namespace) -> tuple[list[Any], str | None]:
    """Local devices measured now: simulated ones (--simulate), else the real ones unless --no-local or --target."""
    if not args.simulate and not _local(args):
        return [], None
    from bisect_smem.app.requests import build_request as run_request
    from bisect_smem.app.runner import run
    from bisect_smem.experiments.measure import MeasureConfig

    config = MeasureConfig(static_sizes=(0,), threads=(128,), residency=False, carveout=False)
    request = run_request(None, args.simulate, config=config)
    try:
        devices = run(request)
    except BackendUnavailable as exc:
        return [], f"no local GPU measured: {exc}"
    # A device whose ceilings could not be measured is shown as unknown, with why, rather than dropped.
    return list(devices), None

def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``fit`` subcommand and its options, under the tool's subcommands ``sub``."""
    fit = sub.add_parser("fit", help="would a kernel's shared memory fit? per architecture and local device",
                         description="Say, for each published architecture and each local device (measured), "
                                     "whether a launch fits without opt-in, with opt-in, or not at all, by how "
                                     "many bytes, and how many such blocks fit per SM; for GEMM tiles, how many "
                                     "pipeline stages fit by CUTLASS's rule. Sizes: 110592, 108KiB, 99K.",
                         epilog="exit codes: 0 fits everywhere asked; 1 does not fit somewhere; 2 bad input; "
                                "4 a target's limit could not be measured")
    # A tile like -1x2x3 is a (bad) value to explain, not an unknown option: as Python 3.13 does, a word
    # that starts with a minus and a digit is taken as a value.
    fit._negative_number_matcher = re.compile(r"^-\.?\d")
    fit.add_argument("bytes", nargs="?", help="dynamic shared memory per block")
    fit.add_argument("--dynamic", metavar="BYTES", help="dynamic shared memory (with --cubin or --ptx)")
    fit.add_argument("--static", metavar="BYTES", help="static shared memory (default 0)")
    fit.add_argument("--threads", type=positive_int, default=128, metavar="N", help="threads per block (default 128)")
    fit.add_argument("--cubin", metavar="FILE", help="read the kernel's static shared memory from a cubin")
    fit.add_argument("--ptx", metavar="FILE", help="read the kernel's static shared memory from PTX")
    fit.add_argument("--kernel", metavar="NAME", help="the kernel in --cubin/--ptx (a unique part of its name; "
                                                      "not needed when the file has one kernel)")
    fit.add_argument("--tile", action="append", metavar="MxNxK",
                     help="a CUTLASS GEMM's MMA tile (repeatable): the stages its builder picks per target and "
                          "the SharedStorageSize the launch asks for, byte for byte as CUTLASS " + CUTLASS_VERSION)
    fit.add_argument("--stages", type=parse_stages, metavar="S|auto",
                     help="auto (default): StageCountAutoCarveout; S: StageCount<S>, its exact size and margin")
    fit.add_argument("--dtype", help="both operands' type: bf16, fp16, tf32, fp32, e4m3, e5m2, int8, e3m2, e2m3, "
                                     "e2m1 (fp8, fp6, fp4), or block-scaled nvfp4, mxfp4, mxfp6, mxfp8 (default fp16)")
    fit.add_argument("--dtype-a", metavar="DTYPE", help="A's type (overrides --dtype)")
    fit.add_argument("--dtype-b", metavar="DTYPE", help="B's type (overrides --dtype)")
    fit.add_argument("--c-dtype", metavar="DTYPE", help="the epilogue's C: bf16 (default), fp16, fp32, void (no C)")
    fit.add_argument("--d-dtype", metavar="DTYPE", help="the epilogue's D: bf16 (default), fp16, fp32")
    fit.add_argument("--schedule", choices=SCHEDULES, help="auto (default: KernelScheduleAuto, "
                     "EpilogueScheduleAuto), cooperative, pingpong (sm_90, sm_120), 1sm, 2sm (sm_100)")
    fit.add_argument("--grouped", action="store_true", help="the grouped (ptr-array) kernel")
    fit.add_argument("--epilogue", metavar="BYTES", help="the epilogue's shared storage, instead of the default "
                                                         "epilogue's from --c-dtype and --d-dtype")
    fit.add_argument("--verbose", action="store_true", help="the per-target table and every byte, for every target")
    fit.add_argument("--explain", metavar="TEXT",
                     help="Triton's 'out of resource: shared memory, Required: X, Hardware limit: Y' message, or "
                          "a kernel's shared memory in bytes (CUTLASS): by how much it is over, per target; with "
                          "--tile, the stage counts that fit")
    fit.add_argument("--arch", action="append", metavar="PROFILE", help="only these architectures (repeatable)")
    fit.add_argument("--target", action="append", metavar="REPORT.json|BASELINE.json|DIR",
                     help="limits measured on a fleet: every device of a saved report, or every baseline in a "
                          "baseline folder (repeatable; implies --no-local; published rows only with --arch)")
    fit.add_argument("--simulate", action="append", metavar="PROFILE", help="add a simulated local device")
    fit.add_argument("--no-local", action="store_true", help="do not measure local GPUs")
    fit.add_argument("--json", metavar="PATH", help="write the result as JSON ('-' for stdout)")
    fit.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The ``fit`` subcommand: the text for stdout and the exit code."""
    result = run_fit(args)
    return result.text, result.code


def exit_code(results: list[FitResult]) -> int:
    """1 when something does not fit; else 4 when a target's limit is unknown; else 0."""
    if any(r.verdict in (DOES_NOT_FIT, DOES_NOT_BUILD) for r in results):
        return EXIT_DOES_NOT_FIT
    return EXIT_INCOMPLETE if any(r.verdict == UNKNOWN for r in results) else EXIT_FITS

def run_fit(args: argparse.Namespace) -> FitOutput:
    """Evaluate the kernel against every target; the text for stdout (table or JSON) and the exit code."""
    explained = parse_explain(args.explain) if args.explain is not None else None
    gemm = build_gemm(args)
    request, source = build_request(args, gemm, explained)
    json_path = output.output_path(args.json, "the result")
    found, note = targets(args)
    if gemm is not None and explained is None:
        results = [evaluate_cutlass(k, request.static_bytes, request.threads, t) for k in gemm.kernels for t in found]
    else:
        results = [evaluate(request, t) for t in found]
    alternatives = [evaluate_cutlass(k, request.static_bytes, request.threads, t)
                    for k in gemm.kernels for t in found] if gemm is not None and explained is not None else []
    varies = gemm is not None and explained is None
    shown_request = {**to_jsonable(request), "total_bytes": request.total_bytes}
    if varies:
        shown_request.update(dynamic_bytes=None, total_bytes=None)
    data = {"schema": FIT_SCHEMA, "request": shown_request, "source": source,
            "results": [to_jsonable(r) for r in results], "note": note,
            "gemm": _gemm_json(gemm), "explain": to_jsonable(explained),
            "alternatives": [to_jsonable(r) for r in alternatives]}
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if json_path is not None:
        try:
            output.write_atomic(json_path, text)
        except OSError as exc:
            raise UsageError(f"cannot write the result to {json_path}: {exc.strerror or exc}") from None
    code = exit_code(results)
    if args.json == "-":
        return FitOutput(text, code)
    return FitOutput(render_all(request, source, results, note, gemm, explained, alternatives, args.verbose)
                     + "\n", code)

def _gemm_json(gemm: Gemm | None) -> dict[str, Any] | None:
    if gemm is None:
        return None
    k = gemm.kernels[0]
    return {"tiles": [f"{g.m}x{g.n}x{g.k}" for g in gemm.kernels], "dtype_a": k.a, "dtype_b": k.b, "c_dtype": k.c,
            "d_dtype": k.d, "schedule": k.schedule, "grouped": k.grouped, "cutlass_version": CUTLASS_VERSION,
            "stages": "auto" if gemm.stages is None else gemm.stages, "epilogue_bytes": k.epilogue_bytes}


def render_all(request: FitRequest, source: str, results: list[FitResult], note: str | None, gemm: Gemm | None,
               explained: Explained | None, alternatives: list[FitResult], verbose: bool) -> str:
    """The text a person reads: the answer first, then the table and the notes."""
    if explained is not None:
        body = render_explain(request, explained, results, alternatives)
    elif gemm is not None:
        body = render_gemm(source, results, verbose)
    else:
        body = render(request, source, results, verbose)
    failures = [f"{r.target}: limit unknown: {r.error}" for r in results if r.verdict == UNKNOWN]
    return "\n".join([body, *dict.fromkeys(failures), *([note] if note else [])])
