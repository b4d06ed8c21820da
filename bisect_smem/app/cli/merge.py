"""``merge``: many hosts' JSON reports in one table, per GPU model and driver, and who deviates from the
majority. Returns the text for stdout and the exit code (1 when any device deviates or a quantity ties)."""

from __future__ import annotations

import argparse

from bisect_smem.analysis.merge import Fleet, group_reports
from bisect_smem.app.cli import json_option
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.outputs.terminal import text_width
from bisect_smem.app.render import fleet
from bisect_smem.core.errors import BaselineError, ExitCode
from bisect_smem.core.frozen import frozen


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``merge`` subcommand, under the tool's subcommands ``sub``."""
    merge = sub.add_parser("merge", help=SUBCOMMANDS["merge"],
                           epilog="exit codes: 0 every device agrees with its group's majority; 1 some deviate; "
                                  "2 no file could be read as a report, or one file was given twice; 3 no report "
                                  "has a device, each saying no GPU was usable; 4 a report could not be read, has "
                                  "no device, or leaves a quantity not measured (the rest is merged)")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json")
    json_option.add(merge, WHAT)


WHAT = "the merged fleet"


@frozen
class MergeRequest:
    """The report files, as given (their paths label the devices)."""

    paths: tuple[str, ...]
    json: str | None  # --json: a path, '-' for stdout, or None


def parse(args: argparse.Namespace) -> MergeRequest:
    """The request from the parsed options."""
    return MergeRequest(tuple(args.reports), args.json)


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The merged table and every deviation, with the exit code of ``exit_code``."""
    request = parse(args)
    path = json_option.checked(request.json, WHAT)
    merged = group_reports(list(request.paths))
    if merged.unreadable and not merged.groups and not merged.unmeasured:
        # Nothing could be read: the whole merge is bad input, said in the reader's own line(s).
        first = merged.unreadable[0]
        more = f" (and {len(merged.unreadable) - 1} more file(s) that could not be read)" if len(merged.unreadable) > 1 else ""
        raise BaselineError(f"{first.path}: {first.why}{more}")
    code = exit_code(merged)
    return json_option.shown(request.json, path, fleet.merge_json(merged, code), fleet.merge(merged, text_width()),
                             WHAT), code


def exit_code(merged: Fleet) -> ExitCode:
    """1 when any device's value deviates or a quantity ties (whatever else happened, as a mismatch beside an
    incomplete measurement is 1); else 4 where a report could not be read, a device's run stopped with an
    error or left a quantity not measured; else, where a report lists no device, 3 when no report has one and
    each says no GPU was usable, otherwise 4: a node not measured leaves the fleet measured incompletely."""
    if any(g.ties or any(g.deviations.values()) for g in merged.groups):
        return ExitCode.MISMATCH
    stopped = any(m.error for g in merged.groups for m in g.members)
    if merged.unreadable or stopped or any(g.not_measured for g in merged.groups):
        return ExitCode.INCOMPLETE
    if not merged.unmeasured:
        return ExitCode.OK
    if not merged.groups and all(u.no_gpu for u in merged.unmeasured):
        return ExitCode.NO_GPU
    return ExitCode.INCOMPLETE
