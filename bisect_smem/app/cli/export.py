"""The ``export`` subcommand: a saved report as Prometheus metrics or as an NFD feature file, the same
text that ``--prom`` and ``--nfd`` write after a measurement. The report is read by core/saved.py."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bisect_smem.app.cli.argtypes import WEEK, Once, positive_float
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs import stderr, writer
from bisect_smem.app.outputs.delivery import Delivery
from bisect_smem.app.render import nfd, prom
from bisect_smem.core.errors import ExitCode, UsageError
from bisect_smem.core.saved import load_report
from bisect_smem.core.status import NFD_DEFAULT_EXPIRY_S

FORMATS = ("prom", "nfd")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``bisect-smem export prom|nfd REPORT.json [--output PATH]``."""
    export = sub.add_parser("export", help=SUBCOMMANDS["export"],
                            epilog="exit codes: 0 written; 2 the report cannot be read or the output written")
    export.add_argument("format", choices=FORMATS, help="prom: textfile-collector metrics; nfd: features.d labels")
    export.add_argument("report", metavar="REPORT.json", help="a report written by --json")
    export.add_argument("--output", action=Once, metavar="PATH", help="write PATH atomically instead of printing")
    export.add_argument("--nfd-expiry", type=positive_float, metavar="S",
                        help=f"nfd: labels expire S seconds after the measurement (default {NFD_DEFAULT_EXPIRY_S}; at most {WEEK})")


def render(kind: str, report_file: Path, expiry_s: float) -> str:
    """The text of ``kind`` for the report in ``report_file``; for NFD labels that have expired already (an
    old report), a warning on stderr: NFD drops every label of the file, which would pass unseen."""
    report = load_report(report_file)
    if kind == "prom":
        return prom.render(report)
    expires = nfd.expires_at(report, expiry_s)
    if expires <= time.time():
        stderr.say(f"these labels expired at {nfd.expiry_text(expires)} ({report_file} was measured {report.created_utc}, "
                   f"--nfd-expiry {expiry_s:g} s): NFD ignores them; measure again or give a longer --nfd-expiry",
                   "warning")
    return nfd.render(report, expiry_s)


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The text for stdout (nothing with --output) and exit code 0."""
    if args.nfd_expiry is not None and args.format != "nfd":
        raise UsageError("--nfd-expiry only applies to export nfd")
    path = writer.output_path(args.output, "the export") if args.output is not None else None
    text = render(args.format, Path(args.report), args.nfd_expiry or NFD_DEFAULT_EXPIRY_S)
    if path is None:
        return text, ExitCode.OK
    delivery = Delivery()
    delivery.file(path, "the export", text)
    delivery.write()
    return "", ExitCode.OK
