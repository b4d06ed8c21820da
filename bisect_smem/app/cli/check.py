"""The ``check`` subcommand: read the last report (written by a periodic job) and say in one line of at
most 80 bytes whether the node is fine. It measures nothing, imports no CUDA and reads one file, so it
fits a node-health agent's timeout (node-problem-detector: 5 s; Slurm's HealthCheckProgram: 60 s).
``--json`` writes the same verdict, line and exit code as a document (``bisect_smem/check/v1``).

Exit codes: 0 ok; 1 a problem (a mismatch, a regression); 2 unknown: the report is missing, unreadable,
older than --max-age, contradicts itself (analysis/consistency.py), or could not measure or compare (no
GPU, incomplete, no baseline).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bisect_smem.analysis.consistency import contradiction
from bisect_smem.app.cli import json_option
from bisect_smem.app.cli.argtypes import WEEK, positive_float
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.render.check import CheckLine, report_line, stale_line, unknown_line
from bisect_smem.core.environment import REPORT as REPORT_ENV
from bisect_smem.core.errors import BaselineError
from bisect_smem.core.jsonable import dumps
from bisect_smem.core.saved import load_report

DEFAULT_REPORT = "/var/lib/bisect-smem/report.json"
EPILOG = ("exit codes: 0 ok; 1 a problem (a mismatch or regression); 2 unknown (the report is missing, "
          "unreadable, older than --max-age, or could not measure or compare)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``bisect-smem check [REPORT.json] [--max-age S]``."""
    check = sub.add_parser("check", help=SUBCOMMANDS["check"],
                           epilog=EPILOG)
    check.add_argument("report", nargs="?", metavar="REPORT.json",
                       help=f"the report to read (default: ${REPORT_ENV}, else {DEFAULT_REPORT})")
    check.add_argument("--max-age", type=positive_float, metavar="S",
                       help="a report measured more than S seconds ago (or dated more than S seconds ahead) is stale (exit 2); "
                            f"at most {WEEK}")
    json_option.add(check, WHAT)


WHAT = "the verdict"


def report_path(given: str | None) -> Path:
    """The report to read: the argument, else $BISECT_SMEM_REPORT, else the default."""
    return Path(given or os.environ.get(REPORT_ENV) or DEFAULT_REPORT)


def check(path: Path, max_age_s: float | None, now: float | None = None) -> CheckLine:
    """The line and exit code for the report at ``path``."""
    if not path.exists():
        return unknown_line(f"no report at {path}")
    try:
        report = load_report(path)
        measured_at = report.created_unix_seconds
    except BaselineError as exc:
        return unknown_line(str(exc))
    age = (time.time() if now is None else now) - measured_at
    # A report dated ahead of this clock by more than the age allowed is no fresher than one that old.
    if max_age_s is not None and abs(age) > max_age_s:
        return stale_line(age, max_age_s)
    why = contradiction(report)
    if why is not None:
        return unknown_line(f"inconsistent report: {why}")
    return report_line(report)


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The ``check`` subcommand: the line for stdout and the exit code."""
    path = json_option.checked(args.json, WHAT)
    report = report_path(args.report)
    line = check(report, args.max_age)
    return json_option.shown(args.json, path, dumps(line.to_json(str(report))), line.text + "\n", WHAT), line.code
