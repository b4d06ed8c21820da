"""The ``trace`` subcommand: run a command with the CUPTI collector in every CUDA process it starts, then
explain each shared-memory request it made against the GPU's measured limits and the targets asked for.
``--from DIR`` explains a trace recorded before, without running anything."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs import stderr, writer
from bisect_smem.app.render.trace import render_json, render_text, skipped_lines
from bisect_smem.app.run import fit_targets, notices, trace_folder
from bisect_smem.app.run.trace_explain import LIMITS_FILE, explain_folder, limits_document, recorded_limits
from bisect_smem.app.run.traced import INJECTION, CommandNotStarted, run_traced
from bisect_smem.core.errors import BisectSmemError, ExitCode, UsageError
from bisect_smem.core.profiles import ArchProfile
from bisect_smem.devices.collector import build, libcupti
from bisect_smem.devices.collector.environment import NOTIFY, TRACE_DIR

HELP = SUBCOMMANDS["trace"]
COLLECTOR_CHOICE = "BISECT_SMEM_COLLECTOR"  # "python": the ctypes collector even where cc builds the C one
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


class TraceUnavailable(BisectSmemError):
    """The collector cannot run here: no libcupti, or it cannot be built (exit 3)."""

    exit_code = ExitCode.NO_GPU


@dataclass(frozen=True)
class TraceQuery:
    """What ``trace`` is asked, parsed once."""

    command: tuple[str, ...]
    out: Path | None  # None: a new numbered folder
    replay: bool  # --from: explain a trace recorded before
    report: str | None
    arch: tuple[ArchProfile, ...]
    targets: tuple[str, ...]
    simulate: tuple[str, ...]
    measure: bool
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
    return TraceQuery(tuple(command), out, bool(args.replay), args.report, tuple(fit_targets.published(args.arch, True)),
                      tuple(args.target or ()), tuple(args.simulate or ()), not args.no_measure, args.strict, args.json)


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
    folder, here, note, code = traced(q)
    try:
        text, refused = summary(q, folder, here, others, note, json_path)
    except (BisectSmemError, OSError, MemoryError) as exc:  # the command ran: its exit code stands
        stderr.say(f"the trace in {folder} could not be explained: {exc or type(exc).__name__}", "warning")
        return "", code
    kept = f"the trace is kept in {folder}"
    if q.json == "-":
        stderr.say(f"bisect-smem trace: {kept}")
    else:
        text += f"  ({kept})\n"
    return text, ExitCode.MISMATCH if q.strict and code == 0 and refused else code


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
        writer.write_atomic(json_path, render_json(explained), what="the trace summary")
    return text, bool(explained.refusals)


def traced(q: TraceQuery) -> tuple[Path, Target | None, str | None, int]:
    """Run the command traced: its folder, the limits it was explained against (and a note on them), and its
    exit code. What would refuse the command is said before the folder is claimed or anything measured."""
    env, cupti = environment(q.command)
    claimed = trace_folder.claim(q.out, q.command)
    try:
        here, note = here_target(q)
        if here is not None:
            claimed.written.append(LIMITS_FILE)
            record_limits(claimed.path, here)
    except BaseException:
        claimed.release()
        raise
    try:
        with notices.Listener(claimed.path) as listener:
            env = {**env, TRACE_DIR: str(claimed.path), **({NOTIFY: listener.name} if listener.name else {})}
            stderr.say(f"bisect-smem trace: {cupti}")
            code = run_traced(q.command, env, alongside=listener.receiving())
    except CommandNotStarted:
        claimed.release()  # nothing ran in it: the same --out may be given again
        raise
    return claimed.path, here, note, code


def here_target(q: TraceQuery) -> tuple[Target | None, str | None]:
    """The limits of the GPU the command runs on: --report, --simulate, the limits recorded with a trace read
    with --from, or measured now, before the command (never for --from: that GPU may not be the one it ran on)."""
    if q.report:
        here = fit_targets.file_targets(q.report, "--report")[0]  # the GPU the command runs on is the report's first
        model = (here.short or "").replace(here.driver_version or "\0", "").strip()
        return replace(here, short=model or here.short), None
    if q.replay and not q.simulate:
        assert q.out is not None  # noqa: S101 - parse gives --from its folder
        return recorded_limits(q.out)
    if not q.simulate and not q.measure:
        return None, None
    devices, note = fit_targets.local_devices(q.simulate, True)
    if not devices:
        return None, note
    return replace(Target.from_report(devices[0]), short=devices[0].name), note


def record_limits(out: Path, here: Target) -> None:
    """Keep ``here`` beside the trace in ``out``, for --from."""
    writer.write_atomic(out / LIMITS_FILE, limits_document(here), exclusive=True,
                        what="the trace's limits")
    os.chmod(out / LIMITS_FILE, trace_folder.FILE_MODE)


def other_targets(q: TraceQuery) -> list[Target]:
    """The targets of --arch and --target."""
    return fit_targets.targets(q.arch, q.targets, (), False)[0]


def environment(command: tuple[str, ...]) -> tuple[dict[str, str], str]:
    """The command's environment: the tool's, with the collector and libcupti named (the trace folder and the
    notify socket are added once claimed), and the line that says which libcupti and why. The C collector goes
    in through CUDA_INJECTION64_PATH; where none can be built (no compiler, or BISECT_SMEM_COLLECTOR=python), a
    Python command gets the ctypes one through PYTHONPATH."""
    if os.environ.get(INJECTION):
        raise UsageError(f"{INJECTION} is already set ({os.environ[INJECTION]}): another tool injects itself into "
                         "CUDA processes; trace does not run the command untraced: unset it, or run without trace")
    choice = libcupti.choose([*libcupti.command_site_packages(command), *sys.path])
    if choice.found is None:
        raise TraceUnavailable(choice.says)
    env = {**os.environ, libcupti.OVERRIDE: choice.found.path}
    try:
        if os.environ.get(COLLECTOR_CHOICE) == "python":
            raise build.CollectorBuildError(f"{COLLECTOR_CHOICE}=python")
        return {**env, INJECTION: str(build.collector_library())}, choice.says
    except build.CollectorBuildError as exc:
        if not _is_python(command):
            raise TraceUnavailable(f"the collector cannot be built ({exc}): install a C compiler (cc); without one "
                                   "only Python commands are traced") from None
    fallback = str(build.SOURCE_DIR / "fallback")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [fallback, os.environ.get("PYTHONPATH")]))}, choice.says


def _is_python(command: tuple[str, ...]) -> bool:
    """A Python interpreter, or a script whose first line names one."""
    if "python" in Path(command[0]).name:
        return True
    found = shutil.which(command[0])
    try:
        with open(found or command[0], "rb") as script:
            return script.read(2) == b"#!" and b"python" in script.readline()
    except OSError:
        return False
