"""The ``fit`` subcommand: the command line parsed once into a frozen FitQuery, the kernel's sizes and
the targets gathered, evaluated, and the text to print returned with the exit code. Called by cli.py
only, which prints."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisect_smem.analysis.fit import FIT_SCHEMA, RULES
from bisect_smem.analysis.fit.compiled import cubin_static_smem, ptx_static
from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION
from bisect_smem.analysis.fit.cutlass.gemm import SCHEDULES, GemmKernel
from bisect_smem.analysis.fit.cutlass.types import operand
from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.gemm import DOES_NOT_BUILD, evaluate_cutlass
from bisect_smem.analysis.fit.targets import DOES_NOT_FIT, UNKNOWN, FitRequest, FitResult, Target, check_bound, evaluate
from bisect_smem.analysis.fit.tiles import Tile
from bisect_smem.analysis.fit.triton import TRITON_VERSION
from bisect_smem.analysis.fit.triton.rule import MAX_STAGES, TritonKernel, evaluate_triton, stages_giving, triton_dtype
from bisect_smem.app.cli.argtypes import parse_stages
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs import writer
from bisect_smem.app.render.fit import render, render_explain, render_gemm
from bisect_smem.app.run import fit_targets
from bisect_smem.core import input as reader
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.model import to_jsonable
from bisect_smem.core.profiles import PROFILES, ArchProfile, find_profile, profile_names
from bisect_smem.core.sizes import parse_count, parse_size, shown

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_INCOMPLETE = 0, 1, 4
# Triton's OutOfResources text. Numbers are ASCII digits; more than MAX_DIGITS is refused by parse_count.
TRITON_MESSAGE = re.compile(r"Required:\s*(\S+?)\s*,\s*Hardware limit:\s*(\S+?)(?=[\s.,;)]|$)", re.IGNORECASE)
CUTLASS_ONLY = ("--dtype-a", "--dtype-b", "--c-dtype", "--d-dtype", "--schedule", "--grouped", "--epilogue")


@dataclass(frozen=True)
class Kernels:
    """The GEMM kernels asked about: CUTLASS's (one per tile) or Triton's, and the stages (None: auto)."""

    rule: str
    cutlass: tuple[GemmKernel, ...]
    triton: tuple[TritonKernel, ...]
    stages: int | None


@dataclass(frozen=True)
class FitQuery:
    """What ``fit`` is asked, parsed once from the command line; files are read later."""

    dynamic: int | None
    static: int | None
    threads: int
    compiled: Path | None
    ptx: bool
    kernel: str | None
    kernels: Kernels | None
    explained: Explained | None
    profiles: tuple[ArchProfile, ...]
    target_files: tuple[str, ...]
    simulate: tuple[str, ...]
    local: bool
    json: str | None
    verbose: bool


def parse_query(args: argparse.Namespace) -> FitQuery:
    """The FitQuery of the ``fit`` command line; every conflict between options is a UsageError here."""
    explained = parse_explain(args.explain) if args.explain is not None else None
    kernels = parse_kernels(args, explained)
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
    text = args.bytes if args.bytes is not None else args.dynamic
    dynamic = parse_size(text, "dynamic size") if text is not None else None
    static = parse_size(args.static, "static size") if args.static is not None else None
    threads = parse_count(args.threads, "--threads")
    return FitQuery(dynamic, static, threads, Path(compiled) if compiled else None, bool(args.ptx), args.kernel,
                    kernels, explained, tuple(published(args.arch, bool(args.target))), tuple(args.target or ()),
                    tuple(args.simulate or ()), not (args.no_local or args.target or args.simulate), args.json,
                    args.verbose)


def _given(args: argparse.Namespace) -> list[str]:
    """The GEMM options given, by name."""
    values = (("--stages", args.stages), ("--dtype", args.dtype), ("--dtype-a", args.dtype_a),
              ("--dtype-b", args.dtype_b), ("--epilogue", args.epilogue), ("--c-dtype", args.c_dtype),
              ("--d-dtype", args.d_dtype), ("--schedule", args.schedule), ("--grouped", args.grouped or None),
              ("--rule", args.rule), ("--warps", args.warps))
    return [name for name, value in values if value is not None]


def parse_kernels(args: argparse.Namespace, explained: Explained | None) -> Kernels | None:
    """The GEMM kernels from --tile and its options; the options without --tile are a usage error."""
    given = _given(args)
    if not args.tile:
        if given:
            raise UsageError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to "
                             "--tile MxNxK: add --tile or drop them")
        return None
    if explained is not None and args.stages not in (None, "auto"):
        raise UsageError("--explain shows the stage counts of --tile that fit: drop --stages")
    if args.dtype is not None and not args.dtype.strip():
        raise UsageError("--dtype is empty: name a type (bf16, fp16, fp32, e4m3, nvfp4, ...)")
    stages = None if explained is not None or args.stages in (None, "auto") else args.stages
    tiles = list(dict.fromkeys(Tile.parse(text) for text in args.tile))
    # Triton's message is about a Triton kernel: its tiles are Triton's unless --rule says otherwise.
    rule = args.rule or ("triton" if explained is not None and explained.kind == "triton" else "cutlass")
    if rule == "triton":
        wrong = [name for name in given if name in CUTLASS_ONLY]
        if wrong:
            raise UsageError(f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} CUTLASS's: drop "
                             f"{'it' if len(wrong) == 1 else 'them'} with --rule triton")
        dtype = triton_dtype(args.dtype or "fp16")
        warps = parse_count(args.warps, "--warps") if args.warps is not None else 4
        found = tuple(TritonKernel(t.m, t.n, t.k, dtype, stages, warps) for t in tiles)
        return Kernels(rule, (), found, stages)
    if args.warps is not None:
        raise UsageError("--warps is Triton's num_warps: add --rule triton or drop it")
    if args.dtype is not None:
        operand(args.dtype, "--dtype")
    dtype = args.dtype or "fp16"
    epilogue = check_bound(parse_size(args.epilogue, "--epilogue"), "--epilogue") if args.epilogue else None
    found_c = tuple(GemmKernel(t.m, t.n, t.k, args.dtype_a or dtype, args.dtype_b or dtype, args.c_dtype or "bf16",
                               args.d_dtype or "bf16", args.schedule or "auto", args.grouped, stages, epilogue)
                    for t in tiles)
    return Kernels(rule, found_c, (), stages)


def parse_explain(text: str) -> Explained:
    """Triton's "out of resource: shared memory, Required: X, Hardware limit: Y", or a byte count (CUTLASS)."""
    match = TRITON_MESSAGE.search(text)
    if match:
        required = check_bound(parse_count(match.group(1), "--explain's Required"), "--explain's Required")
        limit = check_bound(parse_count(match.group(2), "--explain's Hardware limit"), "--explain's Hardware limit")
        if limit < 1:
            raise UsageError(f"--explain's Hardware limit must be >= 1 B: no GPU allows {limit} B of shared memory")
        if required <= limit:
            raise UsageError(f"--explain's Required ({required} B) must be more than the Hardware limit ({limit} B): "
                             "Triton raises OutOfResources only when the kernel needs more than the GPU allows")
        kind = "triton"
    else:
        try:
            required, limit, kind = check_bound(parse_size(text, "--explain"), "--explain"), None, "bytes"
        except UsageError:
            raise UsageError("--explain takes Triton's message (\"out of resource: shared memory, Required: X, "
                             "Hardware limit: Y\") or the kernel's shared memory in bytes, e.g. CUTLASS's "
                             f"sizeof(GemmKernel::SharedStorage), with --arch (got {shown(text)})") from None
    matches = tuple(p.key for p in PROFILES if limit is not None and p.max_smem_per_block_optin_bytes == limit)
    return Explained(kind, required, limit, matches)


def published(names: list[str] | None, targets: bool) -> list[ArchProfile]:
    """The published rows asked for: every --arch once, in order; all of them unless --arch or --target."""
    if not names:
        return [] if targets else list(PROFILES)
    profiles: dict[str, ArchProfile] = {}
    for name in names:
        p = find_profile(name)
        if p is None:
            raise UsageError(f"unknown profile {name!r}; valid: {', '.join(profile_names())}")
        profiles.setdefault(p.key, p)
    return list(profiles.values())


def kernel_request(query: FitQuery) -> tuple[FitRequest, str]:
    """The kernel's fixed sizes (FitRequest) and a line saying where they came from."""
    notes = []
    if query.explained is not None:
        dynamic = query.explained.required_bytes
    elif query.kernels is not None:
        dynamic = 0
        notes.append(_kernels_note(query.kernels))
    else:
        dynamic = query.dynamic or 0
    static = query.static or 0
    if query.compiled is not None:
        name, static, how = read_static(query.compiled, query.kernel, query.ptx, ask_driver=query.local)
        notes.append(f"static {static} B of {name}, {how}")
    return FitRequest(dynamic, static, query.threads), "; ".join(notes)


def _kernels_note(kernels: Kernels) -> str:
    if kernels.rule == "triton":
        t = kernels.triton[0]
        tile = f"tile {t.m}x{t.n}x{t.k}, " if len(kernels.triton) == 1 else ""
        stages = "num_stages auto (the most that load)" if kernels.stages is None else f"num_stages {kernels.stages}"
        return f"{tile}{t.dtype}, num_warps {t.warps}, {stages}: Triton {TRITON_VERSION}'s matmul"
    k = kernels.cutlass[0]
    tile = f"tile {k.m}x{k.n}x{k.k}, " if len(kernels.cutlass) == 1 else ""
    types = k.a if k.a == k.b else f"A {k.a}, B {k.b}"
    stages = "stages auto (StageCountAutoCarveout)" if kernels.stages is None else f"{kernels.stages} stages (StageCount)"
    epilogue = f"epilogue {k.epilogue_bytes} B (given)" if k.epilogue_bytes is not None else f"C {k.c}, D {k.d}"
    return (f"{tile}{types}, {epilogue}, schedule {k.schedule}{', grouped' if k.grouped else ''}, {stages}: "
            f"CUTLASS {CUTLASS_VERSION}'s builders")


def read_static(path: Path, kernel: str | None, ptx: bool, ask_driver: bool = True) -> tuple[str, int, str]:
    """The kernel's static shared memory: from the driver where a local GPU may load the file, else the file."""
    if ptx:
        found = ptx_static(path, kernel)
        name, static, read_from = found.kernel, found.static_bytes, found.source
    else:
        (name, static), read_from = cubin_static_smem(path, kernel), "read from the cubin ELF sections"
    if ask_driver:
        try:
            loaded = fit_targets.driver_static_smem(path, name)
            if loaded is not None:
                if loaded != static:
                    return name, loaded, f"read by the driver (the file says {static} B)"
                return name, loaded, "read by the driver (the file agrees)"
        except BackendUnavailable:
            pass
    return name, static, read_from


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``fit`` subcommand and its options, under the tool's subcommands ``sub``."""
    fit = sub.add_parser("fit", help=SUBCOMMANDS["fit"],
                         description="Say, for each published architecture and each local device (measured), "
                                     "whether a launch fits without opt-in, with opt-in, or not at all, by how "
                                     "many bytes, and how many such blocks fit per SM; for GEMM tiles, how many "
                                     "pipeline stages fit by CUTLASS's rule or Triton's. Sizes: 110592, 108KiB, "
                                     "99K.",
                         epilog="exit codes: 0 fits everywhere asked; 1 does not fit (or does not build) somewhere; "
                                "2 bad input; 4 a target's limit could not be measured, or Triton's rule is not "
                                "modelled for it")
    # A tile like -1x2x3 is a (bad) value to explain, not an unknown option: as Python 3.13 does, a word
    # that starts with a minus and a digit is taken as a value.
    fit._negative_number_matcher = re.compile(r"^-\.?\d")
    fit.add_argument("bytes", nargs="?", help="dynamic shared memory per block")
    fit.add_argument("--dynamic", metavar="BYTES", help="dynamic shared memory (with --cubin or --ptx)")
    fit.add_argument("--static", metavar="BYTES", help="static shared memory (default 0)")
    fit.add_argument("--threads", default="128", metavar="N", help="threads per block (default 128)")
    fit.add_argument("--cubin", metavar="FILE", help="read the kernel's static shared memory from a cubin")
    fit.add_argument("--ptx", metavar="FILE", help="read the kernel's static shared memory from PTX")
    fit.add_argument("--kernel", metavar="NAME", help="the kernel in --cubin/--ptx (a unique part of its name; "
                                                      "not needed when the file has one kernel)")
    fit.add_argument("--tile", action="append", metavar="MxNxK",
                     help="a GEMM's tile (repeatable): CUTLASS's MMA tile (the stages its builder picks and the "
                          f"SharedStorageSize, as CUTLASS {CUTLASS_VERSION}) or, with --rule triton, BLOCK_M x "
                          f"BLOCK_N x BLOCK_K (num_stages and metadata.shared, as Triton {TRITON_VERSION})")
    fit.add_argument("--rule", choices=RULES, help="whose GEMM: cutlass (default) or triton (its tutorial matmul)")
    fit.add_argument("--stages", type=parse_stages, metavar="S|auto",
                     help="auto (default): CUTLASS's StageCountAutoCarveout, or the most num_stages Triton loads; "
                          f"S: StageCount<S> or num_stages=S (1..{MAX_STAGES} for Triton), its exact size and margin")
    fit.add_argument("--warps", metavar="N", help="Triton's num_warps: 4 (default) or 8")
    fit.add_argument("--dtype", help="the operands' type: bf16, fp16, tf32, fp32, e4m3, e5m2, int8, e3m2, e2m3, "
                                     "e2m1 (fp8, fp6, fp4), or block-scaled nvfp4, mxfp4, mxfp6, mxfp8 (default fp16; "
                                     "Triton: fp16, bf16, fp32, fp8)")
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
                     help="limits measured on a fleet: every device of a saved report (REPORT.json), a baseline "
                          "file, or every baseline in a baseline folder DIR/<gpu-model>/<driver>.json (repeatable; "
                          "implies --no-local; published rows only with --arch)")
    fit.add_argument("--simulate", action="append", metavar="PROFILE", help="add a simulated local device")
    fit.add_argument("--no-local", action="store_true", help="do not measure local GPUs")
    fit.add_argument("--json", metavar="PATH", help="write the result as JSON ('-' for stdout)")
    fit.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The ``fit`` subcommand: the text for stdout and the exit code."""
    for value in (args.cubin, args.ptx):  # refused before anything opens them: fit never waits on a FIFO
        reader.refuse_waiting(value)
    return answer(parse_query(args))


def exit_code(results: list[FitResult]) -> int:
    """1 when something does not fit or build; else 4 when a target's limit is unknown; else 0."""
    if any(r.verdict in (DOES_NOT_FIT, DOES_NOT_BUILD) for r in results):
        return EXIT_DOES_NOT_FIT
    return EXIT_INCOMPLETE if any(r.verdict == UNKNOWN for r in results) else EXIT_FITS


def evaluate_all(query: FitQuery, request: FitRequest, found: list[Target]) -> tuple[list[FitResult], list[FitResult]]:
    """(results, alternatives): the kernel on every target; with --explain and --tile, the tiles' stage
    counts beside the explained size."""
    kernels = query.kernels

    def gemm() -> list[FitResult]:
        if kernels is None:
            return []
        if kernels.rule == "triton":
            return [evaluate_triton(k, t) for k in kernels.triton for t in found]
        return [evaluate_cutlass(k, request.static_bytes, request.threads, t) for k in kernels.cutlass for t in found]

    if kernels is not None and query.explained is None:
        return gemm(), []
    return [evaluate(request, t) for t in found], gemm()


def answer(query: FitQuery) -> tuple[str, int]:
    """Evaluate the kernel against every target: the text for stdout (the answer or JSON) and the exit code."""
    request, source = kernel_request(query)
    json_path = writer.output_path(query.json, "the result")
    found, note = fit_targets.targets(query.profiles, query.target_files, query.simulate, query.local)
    results, alternatives = evaluate_all(query, request, found)
    varies = query.kernels is not None and query.explained is None
    shown_request = {**to_jsonable(request), "total_bytes": request.total_bytes}
    if varies:
        shown_request.update(dynamic_bytes=None, total_bytes=None)
    data = {"schema": FIT_SCHEMA, "request": shown_request, "source": source,
            "results": [to_jsonable(r) for r in results], "note": note,
            "gemm": _gemm_json(query.kernels), "explain": to_jsonable(query.explained),
            "alternatives": [to_jsonable(r) for r in alternatives]}
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if json_path is not None:
        try:
            writer.write_atomic(json_path, text)
        except OSError as exc:
            raise UsageError(f"cannot write the result to {json_path}: {exc.strerror or exc}") from None
    code = exit_code(results)
    if query.json == "-":
        return text, code
    return render_all(query, request, source, results, note, alternatives) + "\n", code


def _gemm_json(kernels: Kernels | None) -> dict[str, Any] | None:
    if kernels is None:
        return None
    if kernels.rule == "triton":
        t = kernels.triton[0]
        return {"rule": "triton", "tiles": [f"{g.m}x{g.n}x{g.k}" for g in kernels.triton], "dtype": t.dtype,
                "warps": t.warps, "triton_version": TRITON_VERSION,
                "stages": "auto" if kernels.stages is None else kernels.stages}
    k = kernels.cutlass[0]
    return {"rule": "cutlass", "tiles": [f"{g.m}x{g.n}x{g.k}" for g in kernels.cutlass], "dtype_a": k.a,
            "dtype_b": k.b, "c_dtype": k.c, "d_dtype": k.d, "schedule": k.schedule, "grouped": k.grouped,
            "cutlass_version": CUTLASS_VERSION, "stages": "auto" if kernels.stages is None else kernels.stages,
            "epilogue_bytes": k.epilogue_bytes}


def render_all(query: FitQuery, request: FitRequest, source: str, results: list[FitResult], note: str | None,
               alternatives: list[FitResult]) -> str:
    """The text a person reads: the answer first, then the table and the notes."""
    if query.explained is not None:
        body = render_explain(request, query.explained, results, alternatives, explain_notes(query, results))
    elif query.kernels is not None:
        body = render_gemm(source, results, query.verbose)
    else:
        body = render(request, source, results, query.verbose)
    failures = [f"{r.target}: limit unknown: {r.error}" for r in results
                if r.verdict == UNKNOWN and r.optin_limit_bytes is None]
    return "\n".join([body, *dict.fromkeys(failures), *([note] if note else [])])


def explain_notes(query: FitQuery, results: list[FitResult]) -> tuple[str, ...]:
    """For Triton's message and Triton tiles: which num_stages of each tile needs exactly Required."""
    explained, kernels = query.explained, query.kernels
    if explained is None or kernels is None or explained.kind != "triton" or kernels.rule != "triton":
        return ()
    need, lines = explained.required_bytes, []
    ccs = {r.target_short or r.target: r for r in results}
    for k in kernels.triton:
        what = f"{k.m}x{k.n}x{k.k} {k.dtype} (num_warps {k.warps})"
        hits = [f"num_stages {', '.join(map(str, s))} on {name}" for name, r in ccs.items()
                if (s := stages_giving(k, _cc(r), need))]
        lines.append(f"Required: {need} B is {what} with {'; '.join(hits)}." if hits else
                     f"Required: {need} B is no num_stages of {what} here: another tile, type or num_warps.")
    return tuple(lines)


def _cc(result: FitResult) -> tuple[int, int] | None:
    if result.compute_capability is None:
        return None
    major, minor = result.compute_capability.split(".")
    return int(major), int(minor)
