"""The ``trace`` subcommand: run a command with the CUPTI collector in every CUDA process it starts, then
explain each shared-memory request it made against the GPU's measured limits and the targets asked for.
``--from DIR`` explains a trace recorded before, without running anything."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs import stderr, writer
from bisect_smem.app.outputs.delivery import Delivery
from bisect_smem.app.render.trace import render_json, render_text, skipped_lines
from bisect_smem.app.run import fit_targets, trace_folder, tracing
from bisect_smem.app.run.trace_explain import explain_folder, recorded_limits
from bisect_smem.core.errors import BisectSmemError, ExitCode, UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.profiles import ArchProfile

HELP = SUBCOMMANDS["trace"]
EXIT_HELP = """exit codes:
  N    the command's own exit code (128+N when signal N ended it), whatever its trace holds; the trace is
       kept under --out, or in a new numbered folder (./bisect-smem-trace-1, -2, ...), which the summary
       names; lines of it that cannot be read are skipped and said on stderr
  1    with --strict: the command succeeded but a shared-memory request was refused
  2    bad usage: no command, --out already holds a trace (running or done), --out too long a path for the
       collector (3071 bytes), CUDA_INJECTION64_PATH already set (another tool, such as nsys or ncu, injects
       itself: trace refuses rather than run the command untraced)
  3    no libcupti (install nvidia-cuda-cupti), or no C compiler to build the collector for a command
       that is not Python (a Python command is traced by the ctypes collector then)
  126  the command was found but cannot be run; 127 the command was not found
A process in which another CUPTI subscriber was first runs untraced: the summary says which.
"""


@frozen
class TraceQuery:
    """What ``trace`` is asked, parsed once."""

    command: tuple[str, ...]
    out: Path | None  # None: a new numbered folder
    replay: bool  # --from: explain a trace recorded before
    here: tracing.HereAsked  # --report, --simulate, --no-measure
    arch: tuple[ArchProfile, ...]
    targets: tuple[str, ...]
    strict: bool
    json: str | None


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The subcommand's options."""
    p = sub.add_parser("trace", help=HELP, description=HELP + ".", epilog=EXIT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="DIR", help=f"where the per-process JSON lines go (it must hold no trace yet; "
                                                f"default: a new numbered folder, ./{trace_folder.STEM}-N)")
    p.add_argument("--from", dest="replay", metavar="DIR", help="explain the trace in DIR against the limits recorded with it "
                                                      "(or --report, --simulate); run nothing")
    p.add_argument("--report", metavar="REPORT.json", help="the measured limits of the GPU the command runs on "
                                                           "(a report of bisect-smem --json)")
    p.add_argument("--arch", action="append", metavar="PROFILE", help="also say which requests would not fit on "
                                                                     "this architecture (repeatable: 12.0, sm_120)")
    p.add_argument("--target", action="append", metavar="REPORT.json|BASELINE.json|DIR",
                   help="also say which requests would not fit on these measured devices (repeatable)")
    p.add_argument("--simulate", action="append", metavar="PROFILE", help="limits of a simulated device, for here")
    p.add_argument("--no-measure", action="store_true", help="without --report, do not measure the local GPU "
                                                             "before the command (a quick measurement otherwise)")
    p.add_argument("--strict", action="store_true", help="exit 1 when the command succeeded but a request was refused")
    p.add_argument("--json", metavar="PATH", help="write the summary as JSON ('-' for stdout, instead of the text)")
    p.add_argument("traced", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]")


def parse(args: argparse.Namespace) -> TraceQuery:
    """The query; a UsageError for a command line that cannot be run."""
    command = list(args.traced)
    if command and command[0] == "--":
        command = command[1:]
    if args.replay and command:
        raise UsageError("give either --from DIR or a command, not both")
    if not args.replay and not command:
        raise UsageError("trace needs a command: bisect-smem trace [options] -- COMMAND [ARGS...]")
    named = args.replay or args.out
    out = Path(named) if named else None
    here = tracing.HereAsked(args.report, tuple(args.simulate or ()), not args.no_measure)
    return TraceQuery(tuple(command), out, bool(args.replay), here, tuple(fit_targets.published(args.arch, True)),
                      tuple(args.target or ()), args.strict, args.json)


def run(args: argparse.Namespace) -> tuple[str, int]:
    """Run the command traced (or read --from), explain, and return the summary and the exit code."""
    q = parse(args)
    json_path = writer.output_path(q.json, "the trace summary")
    others = other_targets(q)
    if q.replay:
        assert q.out is not None  # noqa: S101 - parse gives --from its folder
        here, note = here_target(q)
        text, refused = summary(q, q.out, here, others, note, json_path)
        return text, ExitCode.MISMATCH if q.strict and refused else 0
    ran = tracing.run_command(q.command, q.out, q.here, stderr.say)
    try:
        text, refused = summary(q, ran.folder, ran.here, others, ran.note, json_path)
    except (BisectSmemError, OSError, MemoryError) as exc:  # the command ran: its exit code stands
        stderr.say(f"the trace in {ran.folder} could not be explained: {exc or type(exc).__name__}", "warning")
        return "", ran.exit_code
    kept = f"the trace is kept in {ran.folder}"
    if q.json == "-":
        stderr.say(f"bisect-smem trace: {kept}")
    else:
        text += f"  ({kept})\n"
    return text, ExitCode.MISMATCH if q.strict and ran.exit_code == 0 and refused else ran.exit_code


def summary(q: TraceQuery, folder: Path, here: Target | None, others: list[Target], note: str | None,
            json_path: Path | None) -> tuple[str, bool]:
    """The summary of the trace in ``folder`` (text, or JSON for ``--json -``), written to ``--json``'s file,
    and whether a request was refused."""
    explained = explain_folder(folder, here, others)
    for line in skipped_lines(explained.skipped):
        stderr.say(line, "warning")
    text = render_json(explained) if q.json == "-" else render_text(explained)
    if note and q.json != "-":
        text += f"  ({note})\n"
    if json_path is not None:
        delivery = Delivery()
        delivery.file(json_path, "the trace summary", render_json(explained))
        delivery.write()
    return text, bool(explained.refusals)


def here_target(q: TraceQuery) -> tuple[Target | None, str | None]:
    """The limits a trace read with --from is explained against: --report, --simulate, else those recorded with
    it (never measured now: this GPU may not be the one it ran on)."""
    if not q.here.report and not q.here.simulate:
        assert q.out is not None  # noqa: S101 - parse gives --from its folder
        return recorded_limits(q.out)
    return tracing.here_limits(replace(q.here, measure=False))


def other_targets(q: TraceQuery) -> list[Target]:
    """The targets of --arch and --target."""
    return fit_targets.targets(q.arch, q.targets, (), False)[0]

