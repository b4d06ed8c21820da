"""One device against its baseline as text: which baseline, how many quantities, and a table of each
regression (``baseline X, now Y``, or which side lacks the quantity)."""

from __future__ import annotations

from bisect_smem.analysis.baseline import Comparison
from bisect_smem.app.render.width import DEFAULT_WIDTH, table, wrapped
from bisect_smem.core.quantities import Regression


def regression_detail(r: Regression) -> str:
    """``baseline X, now Y``, or which side lacks the quantity."""
    if not r.in_baseline:
        return f"not in the baseline, now {r.now!r}"
    if not r.measured_now:
        return f"baseline {r.baseline!r}, not measured now"
    return f"baseline {r.baseline!r}, now {r.now!r}"


def regression_line(r: Regression) -> str:
    """``QUANTITY: baseline X, now Y``."""
    return f"{r.name}: {regression_detail(r)}"


def comparison(index: int, result: Comparison, width: int = DEFAULT_WIDTH) -> str:
    """One device against its baseline, in at most ``width`` columns: which one, how many quantities, and a
    table of what regressed."""
    return wrapped(_comparison(index, result, width), width)


def _comparison(index: int, result: Comparison, width: int) -> str:
    if result.baseline is None:
        return f"device {index}: {result.note}\n"
    lost = f", {len(result.unmeasured)} not measured now" if result.unmeasured else ""
    text = f"device {index}: {result.note}: {result.compared} quantities, {len(result.regressions)} regressed{lost}\n"
    if result.regressions:
        rows = [(str(index), r.name, regression_detail(r)) for r in result.regressions]
        text += table(rows, ("device", "quantity", "baseline -> now"), width) + "\n"
    if result.unmeasured:
        text += (f"device {index}: not measured completely now: what it lacks ({len(result.unmeasured)} "
                 "quantities) is not compared\n")
    if result.baseline_problem:
        text += f"device {index}: {result.baseline_problem}\n"
    return text
