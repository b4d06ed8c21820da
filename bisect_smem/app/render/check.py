"""The one line a node-health agent reads: at most 80 bytes (node-problem-detector keeps no more), with
an exit code of 0 (ok), 1 (a problem) or 2 (unknown: a stale, missing or unreadable report, or one that
could not measure).

``smem ok: 8 GPUs, opt-in 232448 B`` / ``smem MISMATCH GPU-7d135d97 opt-in 204800 B, reported 232448``.
"""

from __future__ import annotations

from collections.abc import Callable

from bisect_smem.analysis.summary import summarize
from bisect_smem.core.frozen import frozen
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.rows import Family, RowParameters, Verdict
from bisect_smem.core.status import DeviceSummary

MAX_LINE_BYTES = 80
OK, PROBLEM, UNKNOWN = 0, 1, 2
CHECK_SCHEMA = "bisect_smem/check/v1"  # the schema id of what ``check --json`` writes
# Each word the line starts with (after "smem "), as ``check --json``'s verdict, and the exit code it goes with.
CHECK_VERDICTS: dict[str, int] = {"ok": OK, "mismatch": PROBLEM, "differs": PROBLEM, "regression": PROBLEM,
                            "fail": PROBLEM, "no_gpu": UNKNOWN, "incomplete": UNKNOWN, "stale": UNKNOWN,
                            "unknown": UNKNOWN}


def _percent(p: RowParameters) -> str:
    return f"{p.percent}%" if p.percent == p.last_percent else f"{p.percent}..{p.last_percent}%"


# Rows shortened for the line, by family: the short name, and whether the value is a byte count.
_SHORT: dict[Family, Callable[[RowParameters], tuple[str, bool]]] = {
    Family.PUBLISHED_OPTIN: lambda p: ("opt-in", True),
    Family.SPLIT_CEILING: lambda p: ("opt-in" if p.static_bytes == 0 else f"opt-in at {p.static_bytes} B static", True),
    Family.ATTRIBUTE_ACCEPT: lambda p: ("opt-in attribute", True),
    Family.DEFAULT_CEILING: lambda p: ("default", True),
    Family.PUBLISHED_SMEM_PER_SM: lambda p: ("per-SM", True),
    Family.SMEM_PER_SM: lambda p: ("per-SM", True),
    Family.PUBLISHED_RESERVED: lambda p: ("reserved", True),
    Family.RESERVED: lambda p: ("reserved", True),
    Family.GRANULARITY: lambda p: ("granularity", True),
    Family.RESIDENCY: lambda p: (f"blocks/SM at {p.dynamic_bytes} B", False),
    Family.CARVEOUT: lambda p: (f"blocks/SM at carveout {_percent(p)}", False),
}


@frozen
class CheckLine:
    """What the check prints, how it exits, and the verdict (a key of CHECK_VERDICTS) the line starts with."""

    text: str
    code: int
    verdict: str

    def to_json(self, report: str) -> dict[str, object]:
        """The document of ``check --json`` for the report at path ``report``: the same verdict, line and
        exit code as the line printed."""
        return {"schema": CHECK_SCHEMA, "report": report, "verdict": self.verdict, "exit_code": self.code,
                "line": self.text}


def fit(text: str, suffix: str = "") -> str:
    """``text`` on one line, then ``suffix``: at most ``MAX_LINE_BYTES`` bytes of UTF-8 in all, ``text``
    cut (never inside a character) where both do not fit."""
    line, room = " ".join(text.split()), MAX_LINE_BYTES - len(suffix.encode())
    data = line.encode()
    if len(data) > room:
        line = data[:room - 3].decode(errors="ignore").rstrip() + "..."
    return line + suffix


def device_id(dev: DeviceReport) -> str:
    """``GPU-9a3c02ab`` (the UUID's first 12 characters), else ``gpu0``."""
    uuid = str(dev.context.nvml_uuid or "")
    return uuid[:12] if uuid else f"gpu{dev.index}"


def _short(v: Verdict) -> str:
    if v.family in _SHORT:
        short, in_bytes = _SHORT[v.family](v.parameters)
        unit = " B" if in_bytes and isinstance(v.measured, int) else ""
        return f"{short} {v.measured}{unit}, reported {v.reported}"
    return f"{v.quantity}: {v.measured}, reported {v.reported}"


def _summary(dev: DeviceReport) -> DeviceSummary:
    return dev.summary if dev.summary is not None else summarize(dev)


def _failure(dev: DeviceReport, summary: DeviceSummary) -> tuple[str, str]:
    """The verdict of a failed device and its line after "smem "."""
    rows = [v for v in dev.verdicts if v.verdict == "MISMATCH"] or [v for v in dev.verdicts if v.verdict == "differs"]
    # The summary names a regression in its reason only (core/status.py has no field for it).
    if summary.reason and summary.reason.startswith("regression: "):
        return "regression", f"REGRESSION {device_id(dev)} {summary.reason.removeprefix('regression: ')}"
    if rows:
        return rows[0].verdict.lower(), f"{rows[0].verdict.upper()} {device_id(dev)} {_short(rows[0])}"
    return "fail", f"FAIL {device_id(dev)} {summary.reason or ''}"


def _incomplete(dev: DeviceReport, summary: DeviceSummary) -> str:
    """Why a device was not measured completely, from its rows and events, cause first: the fault the
    worker met last and the first step it left unmeasured (``sticky fault in step static_split:0:32, given
    up``), else the first unmeasured row and its note. The summary's reason, cut at 80 bytes, kept only the
    row's empty values (``ERROR step ...: reported -, measured -; ...``), and this line is Slurm's drain
    reason and NHC's and NPD's message."""
    rows = [v for v in dev.verdicts if v.verdict == "ERROR"]
    if not rows:
        return summary.reason or dev.error or "not measured completely"
    if dev.events:
        # The faults are the events; a step they cost is the first one left unmeasured.
        given_up = ", given up" if dev.error else ""
        return f"{dev.events[-1].get('what', 'a fault')} in {rows[0].quantity}{given_up}"
    return f"{rows[0].quantity}: {rows[0].note}"


def report_line(report: Report) -> CheckLine:
    """The line for a report that was read: 1 when a device (or the run) failed, 2 when not every device
    was measured (or none was) or the run did not pass otherwise (no baseline to compare with), else 0."""
    summaries = [(d, _summary(d)) for d in report.devices]
    failed = [(d, s) for d, s in summaries if s.status == "fail"]
    if failed:
        more = f" (+{len(failed) - 1} GPUs)" if len(failed) > 1 else ""
        verdict, text = _failure(*failed[0])
        return CheckLine(fit(f"smem {text}", more), PROBLEM, verdict)
    if report.result == "no_gpu" or not report.devices:
        # The report's error says "no usable GPU: ..." on its own; the line says NO GPU already.
        why = (report.error or "the report has no device").removeprefix("no usable GPU: ")
        return CheckLine(fit(f"smem NO GPU: {why}"), UNKNOWN, "no_gpu")
    incomplete = [(d, s) for d, s in summaries if s.status == "incomplete"]
    if incomplete:
        dev, summary = incomplete[0]
        return CheckLine(fit(f"smem INCOMPLETE {device_id(dev)}: {_incomplete(dev, summary)}"), UNKNOWN, "incomplete")
    if report.result not in (None, "pass"):
        return _run_line(report)
    optins = [d.measured.optin_dynamic_ceiling_bytes for d in report.devices
              if d.measured is not None and d.measured.optin_dynamic_ceiling_bytes is not None]
    count = len(report.by_gpu())
    optin = f", opt-in {min(optins)} B" if optins else ""
    return CheckLine(fit(f"smem ok: {count} GPU{'s' if count != 1 else ''}{optin}"), OK, "ok")


# Why a run whose devices all passed did not pass, by the report's result (its error, where it has one, says more).
_RUN_RESULTS = {"fail": "the run failed", "bad_input": "the run found no baseline to compare with",
                "incomplete": "the run did not complete"}


def _run_line(report: Report) -> CheckLine:
    """A run that did not pass though no device failed, as NFD's verdict says: a run that failed is a
    problem; one that could not compare (no baseline) or finish is unknown."""
    # A missing baseline's error names the model and the folder, which crowd out the point on one line.
    why = (_RUN_RESULTS["bad_input"] if report.result == "bad_input" else
           report.error or _RUN_RESULTS.get(report.result or "", f"the run's result is {report.result}"))
    code = f" (exit {report.exit_code})" if report.exit_code is not None else ""
    if report.result == "fail":
        return CheckLine(fit(f"smem FAIL: {why}", code), PROBLEM, "fail")
    return CheckLine(fit(f"smem INCOMPLETE: {why}", code), UNKNOWN, "incomplete")


def stale_line(age_s: float, max_age_s: float) -> CheckLine:
    """A report older than ``--max-age`` (or, with ``age_s`` below 0, dated that far ahead of this clock)."""
    when = f"{age_s:.0f} s old" if age_s >= 0 else f"dated {-age_s:.0f} s ahead of this clock"
    return CheckLine(fit(f"smem STALE: report {when} (max {max_age_s:g} s)"), UNKNOWN, "stale")


def unknown_line(why: str) -> CheckLine:
    """No report could be read: missing, unreadable, not a report."""
    return CheckLine(fit(f"smem UNKNOWN: {why}"), UNKNOWN, "unknown")
