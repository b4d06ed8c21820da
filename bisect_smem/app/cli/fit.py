"""The ``fit`` subcommand: the command line parsed once into a frozen FitQuery (every bad value refused
before anything is read or measured), the targets gathered, the public API asked (bisect_smem.api), and its
Fit handed to render/ as text or JSON, with the exit code; a --json file goes out through the one writer.
Called by main.py only, which prints."""

from __future__ import annotations

import argparse
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from bisect_smem import api
from bisect_smem.analysis.fit.answer import Fit
from bisect_smem.analysis.fit.explain import Explained
from bisect_smem.analysis.fit.rule import GemmRule
from bisect_smem.analysis.fit.rules import DEFAULT_RULE, RULES
from bisect_smem.analysis.fit.targets import Target, check_bound
from bisect_smem.analysis.fit.tiles import Tile
from bisect_smem.app.cli.argtypes import Once, parse_stages
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs import stderr, writer
from bisect_smem.app.outputs.delivery import Delivery
from bisect_smem.app.outputs.terminal import text_width
from bisect_smem.app.render.fit import render_explained, render_fit
from bisect_smem.app.render.fit_json import render_json
from bisect_smem.app.render.width import wrapped
from bisect_smem.app.run import fit_targets
from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.profiles import ArchProfile
from bisect_smem.core.sizes import parse_count, parse_size, shown

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_INCOMPLETE = 0, 1, 4


@frozen
class Kernels:
    """The GEMM kernels asked about: the library rule that counts them, its tiles (none: a launcher's list),
    the operands' type, the stages (None: the library's automatic count) and the rule's own options given, by
    name (``schedule``, ``launcher``)."""

    rule: GemmRule
    tiles: tuple[Tile, ...]
    dtype: str | None
    stages: int | None
    options: tuple[tuple[str, Any], ...]
    listing: bool = False  # without --tile: every kernel of a launcher's list


@frozen
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
    if not sources and not compiled and not (kernels is not None and kernels.listing):
        raise UsageError("fit needs a size: BYTES, --tile, --explain, or --cubin/--ptx with --kernel")
    text = args.bytes if args.bytes is not None else args.dynamic
    dynamic = parse_size(text, "dynamic size") if text is not None else None
    static = parse_size(args.static, "static size") if args.static is not None else None
    if args.tile and args.threads is not None:
        raise UsageError("--threads applies to a size, not to --tile: a library's GEMM kernel sets its own block "
                         "size; drop --threads")
    threads = parse_count(args.threads, "--threads") if args.threads else api.DEFAULT_THREADS
    return FitQuery(dynamic, static, threads, Path(compiled) if compiled else None, bool(args.ptx), args.kernel,
                    kernels, explained, tuple(fit_targets.published(args.arch, bool(args.target))), tuple(args.target or ()),
                    tuple(args.simulate or ()), not (args.no_local or args.target or args.simulate), args.json,
                    args.verbose)


def _given(args: argparse.Namespace) -> list[str]:
    """The GEMM options given, by name: the shared ones, then each library's own."""
    values = (("--stages", args.stages), ("--dtype", args.dtype), ("--rule", args.rule))
    return [name for name, value in values if value is not None] + [o for r in RULES.values() for o in r.given(args)]


def _wrong_library(rule: GemmRule, args: argparse.Namespace) -> None:
    """Another library's own options beside ``rule``'s tile: a UsageError naming them and their library."""
    for other in RULES.values():
        wrong = other.given(args) if other is not rule else []
        if wrong:
            one = len(wrong) == 1
            fix = (f"drop {'it' if one else 'them'} with --rule {rule.name}" if args.rule else
                   f"add --rule {other.name} or drop {'it' if one else 'them'}")
            raise UsageError(f"{', '.join(wrong)} {'is' if one else 'are'} {other.library}'s: {fix}")


def parse_kernels(args: argparse.Namespace, explained: Explained | None) -> Kernels | None:
    """The GEMM kernels from --tile and its options; the options without --tile are a usage error."""
    given = _given(args)
    if not args.tile and explained is None and (listed := _listing(args)) is not None:
        return listed
    if not args.tile:
        if args.rule:
            _wrong_library(RULES[args.rule], args)
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
    # A library's own message is about that library's kernel: its tiles are that library's unless --rule
    # says otherwise.
    rule = RULES[args.rule or (explained.kind if explained is not None and explained.kind in RULES else DEFAULT_RULE)]
    _wrong_library(rule, args)
    rule.kernels(args, tiles, args.dtype, stages)  # every bad value refused now, before anything is measured
    return Kernels(rule, tuple(tiles), args.dtype, stages, _own_options(rule, args))


def _listing(args: argparse.Namespace) -> Kernels | None:
    """Without --tile: every kernel a library's launcher builds (CUTLASS's --launcher), where a rule lists
    them; None where none does."""
    stages = None if args.stages in (None, "auto") else args.stages
    for rule in ([RULES[args.rule]] if args.rule else RULES.values()):
        if rule.listing(args, args.dtype, stages) is not None:
            _wrong_library(rule, args)
            return Kernels(rule, (), args.dtype, stages, _own_options(rule, args), listing=True)
    return None


def _own_options(rule: GemmRule, args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
    """``rule``'s own options that were given, by their argparse names (``--dtype-a`` is ``dtype_a``)."""
    names = [option.lstrip("-").replace("-", "_") for option in rule.given(args)]
    return tuple((name, getattr(args, name)) for name in names)


def parse_explain(text: str) -> Explained:
    """A library's own message (Triton's "out of resource: shared memory, Required: X, Hardware limit: Y"),
    or a byte count (CUTLASS's sizeof(SharedStorage))."""
    for rule in RULES.values():
        found = rule.parse_message(text)
        if found is not None:
            return found
    try:
        required = check_bound(parse_size(text, "--explain"), "--explain")
    except UsageError:
        raise UsageError("--explain takes Triton's message (\"out of resource: shared memory, Required: X, "
                         "Hardware limit: Y\") or the kernel's shared memory in bytes, e.g. CUTLASS's "
                         f"sizeof(GemmKernel::SharedStorage), with --arch (got {shown(text)})") from None
    if required < 1:
        raise UsageError("--explain 0: a kernel that needs no shared memory never fails for lack of it; give the "
                         "size the failing kernel asked for")
    return Explained("bytes", required, None, ())


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
    fit.add_argument("--threads", metavar="N", help=f"threads per block (default {api.DEFAULT_THREADS}; not with --tile)")
    fit.add_argument("--cubin", action=Once, metavar="FILE", help="read the kernel's static shared memory from a cubin")
    fit.add_argument("--ptx", action=Once, metavar="FILE", help="read the kernel's static shared memory from PTX")
    fit.add_argument("--kernel", metavar="NAME", help="the kernel in --cubin/--ptx (a unique part of its name; "
                                                      "not needed when the file has one kernel)")
    fit.add_argument("--tile", action="append", metavar="MxNxK",
                     help="a GEMM's tile (repeatable): CUTLASS's MMA tile (the stages its builder picks and the "
                          "SharedStorageSize) or, with --rule triton, BLOCK_M x BLOCK_N x BLOCK_K (num_stages and "
                          "metadata.shared); the library's release is named in every answer")
    fit.add_argument("--rule", choices=tuple(RULES), help="whose GEMM: " + ", ".join(
        f"{r.name} ({r.library} {r.version}{', default' if r.name == DEFAULT_RULE else ''})" for r in RULES.values()))
    fit.add_argument("--stages", type=parse_stages, metavar="S|auto",
                     help="auto (default): CUTLASS's StageCountAutoCarveout, or the most num_stages Triton loads; "
                          "S: StageCount<S> or num_stages=S, its exact size and margin")
    fit.add_argument("--dtype", help="the operands' type: bf16, fp16, tf32, fp32, e4m3, e5m2, int8, e3m2, e2m3, "
                                     "e2m1 (fp8, fp6, fp4), or block-scaled nvfp4, mxfp4, mxfp6, mxfp8, mxfp4-f8f6f4 (mxfp4 "
                                     "through CUTLASS's MXF8F6F4 schedule, a byte an element) (default fp16; "
                                     "Triton: fp16, bf16, fp32 or tf32, fp8, int8)")
    for rule in RULES.values():
        rule.add_options(fit.add_argument_group(f"{rule.library}'s kernel (with --tile)"))
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
    fit.add_argument("--json", action=Once, metavar="PATH", help="write the result as JSON ('-' for stdout)")
    fit.add_argument("--quiet", action="store_true", help="no progress on stderr")
    fit.add_argument("--trace", action=Once, metavar="DIR", help="the requests a traced command made (bisect-smem trace --out DIR): "
                                                    "which would not fit the targets (--arch, default every "
                                                    "published one; --target)")


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The ``fit`` subcommand: the text for stdout and the exit code."""
    if args.trace is not None:
        return traced_answer(args)
    return answer(parse_query(args))


def traced_answer(args: argparse.Namespace) -> tuple[str, int]:
    """``fit --trace DIR``: every request of a recorded trace against the targets; exit 1 when one would
    not fit a target, as for one kernel."""
    kernel = [name for name, value in (("BYTES", args.bytes), ("--dynamic", args.dynamic), ("--tile", args.tile),
                                       ("--explain", args.explain), ("--cubin", args.cubin), ("--ptx", args.ptx))
              if value is not None]
    if kernel:
        raise UsageError(f"--trace reads the kernels from the trace: drop {', '.join(kernel)}")
    # Deferred: only --trace renders a trace; the rest of fit never loads the trace's renderer.
    from bisect_smem.app.render import trace as trace_render

    profiles = tuple(fit_targets.published(args.arch, bool(args.target)))
    targets = fit_targets.targets(profiles, tuple(args.target or ()), (), False)[0]
    json_path = writer.output_path(args.json, "the fit result")
    explained = api.explain_trace(args.trace, targets, recorded=False)
    for line in trace_render.skipped_lines(explained.skipped):
        stderr.say(line, "warning")
    document = trace_render.render_json(explained)
    text = document if args.json == "-" else wrapped(trace_render.render_text(explained), text_width()) + "\n"
    _deliver(json_path, document, text, "the fit result")
    failing = any(explained.would_not_fit(t) for t in explained.targets)
    return text, EXIT_DOES_NOT_FIT if failing else EXIT_FITS


def _deliver(json_path: Path | None, document: str, text: str, what: str = "the result") -> None:
    """The --json file, written through the one writer before the text goes to stdout."""
    if json_path is not None:
        delivery = Delivery()
        delivery.file(json_path, what, document)
        delivery.write(text=text)


def exit_code(fit: Fit) -> int:
    """1 when something does not fit or build; else 4 when a target's limit is unknown; else 0."""
    if fit.fails:
        return EXIT_DOES_NOT_FIT
    return EXIT_INCOMPLETE if fit.unknown else EXIT_FITS


def static_size(query: FitQuery) -> tuple[int, str | None]:
    """The kernel's static shared memory (--static, or read from --cubin/--ptx) and, for a compiled kernel,
    the line that says where it was read."""
    if query.compiled is None:
        return query.static or 0, None
    name, static, how = fit_targets.compiled_static(query.compiled, query.kernel, query.ptx, ask_driver=query.local)
    return static, f"static {static} B of {name}, {how}"


def answer(query: FitQuery) -> tuple[str, int]:
    """The kernel on every target, through the public API: the text for stdout (the answer, or JSON) and the
    exit code."""
    kernels = query.kernels
    if kernels is not None and kernels.listing:
        static, read_from = query.static or 0, None  # a launcher's kernels: --static only, as given
    else:
        static, read_from = static_size(query)
    json_path = writer.output_path(query.json, "the result")
    found, note = fit_targets.targets(query.profiles, query.target_files, query.simulate, query.local)
    tiles = _tiles(kernels, static, found) if kernels is not None and not kernels.listing else None
    if kernels is not None and kernels.listing:
        options = dict(kernels.options)
        fit = api.fit_launcher(str(options.pop("launcher")), library=kernels.rule.name, dtype=kernels.dtype,
                               stages=kernels.stages, options=options, static_bytes=static, threads=query.threads,
                               targets=found)
    elif tiles is not None and query.explained is None:
        fit = tiles
    else:
        dynamic = query.explained.required_bytes if query.explained is not None else query.dynamic or 0
        fit = api.fit_bytes(dynamic, static_bytes=static, threads=query.threads, targets=found)
    if read_from is not None:
        fit = replace(fit, source="; ".join(filter(None, [fit.source, read_from])))
    document = render_json(fit, note, query.explained, tiles if query.explained is not None else None)
    text = document if query.json == "-" else _text(query, fit, tiles, note)
    _deliver(json_path, document, text)
    if kernels is not None and kernels.listing and not fit.results:
        return text, EXIT_DOES_NOT_FIT
    return text, exit_code(fit)


def _tiles(kernels: Kernels, static: int, found: list[Target]) -> Fit:
    """The --tile kernels on every target, as the public API counts them."""
    return api.fit_tile([str(t) for t in kernels.tiles], library=kernels.rule.name, dtype=kernels.dtype,
                        stages=kernels.stages, options=dict(kernels.options), static_bytes=static, targets=found)


def _text(query: FitQuery, fit: Fit, tiles: Fit | None, note: str | None) -> str:
    """The text a person reads, within the terminal's width: the answer first, then the table and the notes."""
    width = text_width()
    if query.explained is None:
        return render_fit(fit, note, width, query.verbose)
    rule = _explained_rule(query)
    # What the tiles' library makes of the message (its own rule's, whoever's message it is).
    notes = tiles.rule.explain_notes(tiles.kernels, query.explained, fit.results) if tiles and tiles.rule else ()
    return render_explained(fit, query.explained, tiles, note, width, tuple(notes), rule.library, rule.labels)


def _explained_rule(query: FitQuery) -> GemmRule:
    """Whose message (--explain) or tiles (--tile) these are; a byte count without tiles is the default
    rule's library's (its kernel's size)."""
    if query.explained is not None and query.explained.kind in RULES:
        return RULES[query.explained.kind]
    return query.kernels.rule if query.kernels is not None else RULES[DEFAULT_RULE]
