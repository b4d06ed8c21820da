"""Does a report agree with itself? What a reader that trusts a report's verdict (``check``, a node-health
agent) must ask first: the status fields say what the rows, the device errors and the measured limits
add up to, and a file whose fields disagree (edited, cut, or written by something else) is no evidence
either way. The values themselves were already held to their declarations (core/plausible.py).
"""

from __future__ import annotations

from bisect_smem.analysis.summary import summarize
from bisect_smem.analysis.verdicts import build_verdicts
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.profiles import parse_cc, profile_for_cc
from bisect_smem.core.quantities import OPTIN_CEILING
from bisect_smem.core.rows import Conclusion
from bisect_smem.core.status import RESULTS, RunResult, Status


def device_contradiction(dev: DeviceReport) -> str | None:
    """Why the device's stored status cannot be what its rows and error say, or None. A stored ``fail``
    may rest on a regression or a ``--strict`` difference that the rows alone do not fail on."""
    found = summarize(dev).status
    stored = dev.summary.status if dev.summary is not None else found
    if stored != found and not (stored == Status.FAIL and _fails_beyond_rows(dev)):
        return _disagreement(dev, stored, found)
    if stored == Status.PASS and OPTIN_CEILING.of(dev.measured) is None:
        # Every level measures the opt-in ceiling first; a device that passed without it measured nothing.
        return f"device {dev.index} passed, opt-in not measured"
    return values_contradiction(dev)


FAILING = (Conclusion.MISMATCH, Conclusion.ERROR)
MOST_ALIGNMENT = 1024  # well above the 16 B every GPU measured so far aligns the dynamic array to


def values_contradiction(dev: DeviceReport) -> str | None:
    """Why the device's stored values say otherwise than its stored rows, or None: its reported and measured
    values compared again, by the same rules a run and a replay of the file use, give a failing row the
    stored rows lack (a value edited, or written by something else, after the rows were made)."""
    if dev.measured is None or dev.reported is None:
        return None
    for split in dev.measured.static_splits:
        footprint = split.static_footprint_bytes
        # The static data pushes the dynamic array by its size and at most an alignment, never by less.
        if footprint is not None and not split.static_bytes <= footprint < split.static_bytes + MOST_ALIGNMENT:
            return (f"device {dev.index}'s split of {split.static_bytes} B static, {split.threads} threads has a "
                    f"static footprint of {footprint} B")
    stored = {(v.quantity, v.parameters) for v in dev.verdicts if v.verdict in FAILING}
    cc = dev.compute_capability
    profile = profile_for_cc(parse_cc(cc)) if cc else None
    for v in build_verdicts(dev.reported, dev.measured, profile, cc):
        if v.verdict in FAILING and (v.quantity, v.parameters) not in stored:
            # The quantity first: a node-health line keeps 80 bytes, and it says the most.
            return f"{v.quantity} {v.verdict} in device {dev.index}'s values"
    return None


def _fails_beyond_rows(dev: DeviceReport) -> bool:
    reason = dev.summary.reason if dev.summary is not None else None
    return bool(reason and reason.startswith("regression: ")) or any(v.verdict == Conclusion.DIFFERS
                                                                              for v in dev.verdicts)


def _disagreement(dev: DeviceReport, stored: str, found: str) -> str:
    where = f"device {dev.index}"
    if found == Status.FAIL:
        return f"{where} has a MISMATCH row but says {stored}"
    if found == Status.INCOMPLETE:
        what = "an ERROR row" if any(v.verdict == Conclusion.ERROR for v in dev.verdicts) else "an error"
        return f"{where} has {what} but says {stored}"
    return f"{where} says {stored}, its rows and errors say {found}"


def contradiction(report: Report) -> str | None:
    """Why the report cannot be taken at its word, or None: a device whose status disagrees with its rows,
    errors or limits, an exit code that is not its result's, or a passing run with an error or a device
    that did not pass."""
    for dev in report.devices:
        why = device_contradiction(dev)
        if why is not None:
            return why
    code, result = report.exit_code, report.result
    if code is not None and result is not None and RESULTS.get(code) != result:
        return f"exit code {code} with the result {result}"
    passed = result == RunResult.PASS or (result is None and code == 0)
    if passed and report.error is not None:
        return "a passing run with an error"
    statuses = {(d.summary or summarize(d)).status for d in report.devices}
    if passed and statuses - {Status.PASS}:
        return f"a passing run with a device that is {sorted(statuses - {'pass'})[0]}"
    return None
