"""The exit code a measured report calls for: a mismatch (or, strict, a ``differs`` row) is 1, an
incomplete measurement 4; against baselines, what the comparisons found. The measuring command and the
public API judge a report alike; the code is then written into the report's status fields."""

from __future__ import annotations

from bisect_smem.analysis.baseline import Comparison
from bisect_smem.core.errors import ExitCode
from bisect_smem.core.model import DeviceReport


def compare_code(devices: tuple[DeviceReport, ...], comparisons: list[Comparison] | None,
                 allow_missing: bool) -> int | None:
    """The exit code the comparisons call for, so that it says what happened: 1 for any regression, whatever
    else; else 4 for a device measured incompletely or a baseline saved from an incomplete run; else 2 for a
    missing baseline (unless allowed); else 0. None without --compare."""
    if comparisons is None:
        return None
    if any(c.regressions for c in comparisons):
        return ExitCode.MISMATCH
    if any(d.incomplete for d in devices) or any(c.unmeasured or c.baseline_problem for c in comparisons):
        return ExitCode.INCOMPLETE
    if any(c.baseline is None for c in comparisons) and not allow_missing:
        return ExitCode.USAGE
    return ExitCode.OK


def exit_code(devices: tuple[DeviceReport, ...], compare_code: int | None, strict: bool) -> int:
    """1 for a mismatch (or, strict, a ``differs`` row), 4 for an incomplete measurement, else 0."""
    if compare_code is not None:
        # Against a baseline, what the device reports is no longer the reference: the baseline is.
        if compare_code != ExitCode.OK:
            return compare_code
        return ExitCode.INCOMPLETE if any(d.incomplete for d in devices) else ExitCode.OK
    if any(d.mismatches for d in devices):
        return ExitCode.MISMATCH
    if any(d.incomplete for d in devices):
        return ExitCode.INCOMPLETE
    # A device that does better than a prediction or a hint is shown and counted, and fails only when asked.
    if strict and any(d.differences for d in devices):
        return ExitCode.MISMATCH
    return ExitCode.OK
