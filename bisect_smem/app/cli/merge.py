"""``merge``: many hosts' JSON reports in one table, per GPU model and driver, and who deviates from the
majority. Returns the text for stdout and the exit code (1 when any device deviates or a quantity ties)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.core.errors import ExitCode

if TYPE_CHECKING:
    # Deferred to type checking: the fleet reader loads only when merging (see run).
    from bisect_smem.analysis.merge import Fleet


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``merge`` subcommand, under the tool's subcommands ``sub``."""
    merge = sub.add_parser("merge", help=SUBCOMMANDS["merge"],
                           epilog="exit codes: 0 every device agrees with its group's majority; 1 some deviate; "
                                  "2 a file is not a report; 3 no report has a device, each saying no GPU was "
                                  "usable; 4 some report has no device (a node not measured)")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json")


@dataclass(frozen=True)
class MergeRequest:
    """The report files, as given (their paths label the devices)."""

    paths: tuple[str, ...]


def parse(args: argparse.Namespace) -> MergeRequest:
    """The request from the parsed options."""
    return MergeRequest(tuple(args.reports))


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The merged table and every deviation, with the exit code of ``exit_code``."""
    # Deferred: the fleet reader (its process pool, orjson) loads only when merging, not with the parser.
    from bisect_smem.analysis.merge import group_reports
    from bisect_smem.app.render import fleet

    merged = group_reports(list(parse(args).paths))
    return fleet.merge(merged), exit_code(merged)


def exit_code(merged: Fleet) -> ExitCode:
    """1 when any device deviates or a quantity ties (whatever else happened, as a mismatch beside an
    incomplete measurement is 1); else, where a report lists no device, 3 when no report has one and each
    says no GPU was usable, otherwise 4: a node not measured leaves the fleet measured incompletely."""
    if any(g.deviations or g.ties for g in merged.groups):
        return ExitCode.MISMATCH
    if not merged.unmeasured:
        return ExitCode.OK
    if not merged.groups and all(u.no_gpu for u in merged.unmeasured):
        return ExitCode.NO_GPU
    return ExitCode.INCOMPLETE
