"""The command line: the parser, and the dispatch to a command. The only module that exits.

Every command is a module with ``run(args) -> (text, code)``: the measuring command (no subcommand, its
options on the tool's parser: measure_options.py; the command: measure.py) and each subcommand of the
registry (commands.py), whose module is imported only when the command line names it. Any
BisectSmemError ends the run with one ``error:`` line and the code its class carries.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

from bisect_smem import __version__
from bisect_smem.app.cli import commands, interrupts, manual, measure_options
from bisect_smem.app.outputs import stderr, writer
from bisect_smem.app.outputs.delivery import NotAllDelivered
from bisect_smem.app.run import head_start
from bisect_smem.app.run.timeline import mark
from bisect_smem.core import session as sessions
from bisect_smem.core.errors import BisectSmemError, ExitCode, UsageError
from bisect_smem.core.session import Session
from bisect_smem.core.text import printable_lines

EXIT_CODES_HELP = manual.exit_codes_help()


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's: a text of one paragraph is filled to the terminal, one already set in rows (the exit codes)
    is kept as it is."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad usage in one line and exit code 2, as every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(ExitCode.USAGE, f"error: {stderr.bounded(message)} (see {self.prog} --help)\n")

    def _print_message(self, message: str, file: Any = None) -> None:
        # argparse drops a failed write; --help or --version into a full or closed stdout is exit 2, not 0.
        if message and file is sys.stdout:
            file.write(message)
            file.flush()
        else:
            super()._print_message(message, file)


class _SubcommandParser(_Parser):
    """A subcommand's parser: an argument it does not know is refused here, so that the line points at the
    subcommand's own help (argparse passes it up to the tool's parser, which names its own)."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The tool's parser, with the exit codes in the epilog. For a command line (``argv``) only the
    subcommands it names are whole and imported, the others a line in the list; without one, every
    subcommand is whole (the man page, the completions)."""
    parser = _Parser(
        prog="bisect-smem",
        description="Measure how much shared memory a CUDA kernel can really get on each GPU, and check it "
                    "against what the driver, the runtime, NVML and the published table report.",
        epilog=EXIT_CODES_HELP, formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"bisect-smem {__version__}")
    measure_options.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_SubcommandParser)
    whole = set(commands.SUBCOMMANDS) if argv is None else set(commands.named_in(list(argv)))
    for name, line in commands.SUBCOMMANDS.items():
        if name in whole:
            commands.load(name).add_parser(sub)
        else:
            sub.add_parser(name, help=line, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None, session: Session | None = None) -> int:
    """The command line: parse, run, and map every outcome to one line and an exit code. ``session``: the
    run's state, when the entry point made it (with workers started ahead); else a new one."""
    mark("parent start")
    stderr.replace_closed_stderr()
    if sys.stdout is None:
        return _fail(ExitCode.USAGE, "stdout is closed; nothing could be reported")
    with sessions.begin(session) as run:
        return _run(argv, run)


def _run(argv: Sequence[str] | None, session: Session) -> int:
    previous: dict[int, interrupts.Handler] = {}
    try:
        # SIGTERM or SIGHUP: raised where the program is, like KeyboardInterrupt (SIGINT, left to Python here),
        # so that the runner's cleanup ends every worker.
        previous = interrupts.install(session, (signal.SIGTERM, signal.SIGHUP))
        code = _main(argv)
        sys.stdout.flush()
        mark("output written")
        return code
    except OSError as exc:  # stdout to a full device, a broken pipe
        if interrupts.signal_of(exc) is not None:
            return _signalled(exc)
        stderr.silence_stdout()
        return _fail(ExitCode.USAGE, f"cannot write the output to stdout: {exc.strerror or exc}")
    except BaseException as exc:  # Ctrl-C, SIGTERM, SIGHUP, or one of them wrapped (a class being created)
        return _signalled(exc)
    finally:
        head_start.release(session)  # workers started for a run that never came (bad usage, --help)
        writer.close_planned()  # what was opened for outputs never written
        interrupts.restore(previous)


def _signalled(exc: BaseException) -> int:
    """The one line and 128 + N for a signal, naming the files written whole before it; anything that is
    no signal goes on up."""
    signum = interrupts.signal_of(exc)
    if signum is None:
        raise exc
    return _fail(interrupts.exit_code(signum), interrupts.ended_line(signum, writer.written()))


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    try:
        if args.command is not None:
            _refuse_options_before(parser, argv, args.command)
            command = commands.load(args.command)
        else:
            # Deferred: the measuring command loads the analysis and the renderers; a subcommand needs neither.
            from bisect_smem.app.cli import measure as command
        text, code = command.run(args)
    except NotAllDelivered as exc:  # every other file was written: the text is still printed
        sys.stdout.write(printable_lines(exc.text))
        return _fail(exc.exit_code, exc.describe())
    except BisectSmemError as exc:
        return _fail(exc.exit_code, exc.describe())
    sys.stdout.write(printable_lines(text))  # a name read from a device or a file changes only itself
    return code


def _refuse_options_before(parser: argparse.ArgumentParser, argv: list[str], command: str) -> None:
    """Options of the measuring command given before a subcommand would be silently dropped: refuse them."""
    takes_value = {name for action in parser._actions if action.nargs != 0 for name in action.option_strings}
    given, i = [], 0
    while i < len(argv) and argv[i] != command:
        name = argv[i].split("=", 1)[0]
        if name.startswith("-"):
            given.append(name)
            i += name in takes_value and "=" not in argv[i]
        i += 1
    if given:
        raise UsageError(f"{', '.join(given)} {'is an option' if len(given) == 1 else 'are options'} of measuring, "
                         f"not of `{command}`: give `{command}`'s own options after it")


def _fail(code: int, message: str) -> int:
    stderr.say(message, "error")
    return code
