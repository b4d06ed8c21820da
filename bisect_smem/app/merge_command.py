"""``merge``: many hosts' JSON reports in one table, per GPU model and driver, and who deviates from the
majority. Returns the text for stdout and the exit code (1 when any device deviates or a quantity ties)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from bisect_smem.core.errors import ExitCode


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``merge`` subcommand, under the tool's subcommands ``sub``."""
    merge = sub.add_parser("merge", help="one table from many hosts' JSON reports; exit 1 when any deviates",
                           epilog="exit codes: 0 every device agrees with its group's majority; 1 some deviate; "
                                  "2 a file is not a report")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json")


@dataclass(frozen=True)
class MergeRequest:
    """The report files, as given (their paths label the devices)."""

    paths: tuple[str, ...]


def parse(args: argparse.Namespace) -> MergeRequest:
    """The request from the parsed options."""
    return MergeRequest(tuple(args.reports))


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The merged table and every deviation; exit 1 when any device deviates or a quantity ties."""
    # Deferred: the fleet reader (its process pool, orjson) loads only when merging, not with the parser.
    from bisect_smem.analysis.merge import group_reports
    from bisect_smem.app.render import fleet

    groups = group_reports(list(parse(args).paths))
    code = ExitCode.MISMATCH if any(g.deviations or g.ties for g in groups) else ExitCode.OK
    return fleet.merge(groups), code
