"""The status fields of a report: per device its status, its rows counted and the first reason, and for
the run its result, exit code and error. Computed once from the verdict rows (and, with --compare, the
regressions against the baseline), so that no consumer has to recount them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from bisect_smem.core.model import DeviceReport, Report, Verdict
from bisect_smem.core.rows import Conclusion
from bisect_smem.core.status import DeviceSummary, Status, VerdictCounts, result_for
from bisect_smem.core.text import dash

# Each verdict by the field of VerdictCounts that counts it.
_COUNTED = {Conclusion.MATCH: "match", Conclusion.MISMATCH: "mismatch", Conclusion.DIFFERS: "differs",
            Conclusion.INFO: "info", Conclusion.ERROR: "error"}


def counts(dev: DeviceReport) -> VerdictCounts:
    """The device's rows counted by verdict."""
    tally = dict.fromkeys(_COUNTED.values(), 0)
    for v in dev.verdicts:
        tally[_COUNTED[v.verdict]] += 1
    return VerdictCounts(**tally)


def reason_line(v: Verdict) -> str:
    """One row in one line: ``MISMATCH opt-in dynamic ceiling, ...: reported 232448 (driver), measured 204800``."""
    source = f" ({v.source})" if v.source else ""
    text = f"{v.verdict} {v.quantity}: reported {dash(v.reported)}{source}, measured {dash(v.measured)}"
    if v.note:
        text += f"; {v.note}"
    return " ".join(text.split())


def summarize(dev: DeviceReport, strict: bool = False, regressions: Sequence[str] = ()) -> DeviceSummary:
    """``fail`` on a mismatch, a regression or (``strict``) a row that differs; else ``incomplete`` when a
    row or the device could not be measured; else ``pass``. The reason is the first row (or regression,
    or device error) behind that status."""
    failing = [v for v in dev.verdicts if v.verdict == Conclusion.MISMATCH or (strict and v.verdict == Conclusion.DIFFERS)]
    if failing or regressions:
        reason = reason_line(failing[0]) if failing else f"regression: {regressions[0]}"
        return DeviceSummary(Status.FAIL, counts(dev), reason)
    if dev.incomplete:
        errors = [v for v in dev.verdicts if v.verdict == Conclusion.ERROR]
        reason = reason_line(errors[0]) if errors else " ".join(str(dev.error).split())
        return DeviceSummary(Status.INCOMPLETE, counts(dev), reason)
    return DeviceSummary(Status.PASS, counts(dev), None)


def run_error(report: Report) -> str | None:
    """Why the run is not complete: the first device that was not measured completely, or None."""
    for dev in report.devices:
        if dev.summary is not None and dev.summary.status == Status.INCOMPLETE:
            return f"device {dev.index}: {dev.summary.reason}"
    return None


def with_status(report: Report, exit_code: int, strict: bool = False,
                regressions: Mapping[int, Sequence[str]] | None = None, error: str | None = None) -> Report:
    """The report with every device's summary and the run's ``result``, ``exit_code`` and ``error``
    (``error`` as given, else the first incomplete device's reason, else None)."""
    regressions = regressions or {}
    devices = tuple(replace(d, summary=summarize(d, strict, regressions.get(d.index, ()))) for d in report.devices)
    done = replace(report, devices=devices, result=result_for(exit_code), exit_code=exit_code)
    return replace(done, error=error if error is not None else run_error(done))
