"""Two backends measuring the same device must agree: a ceiling found through one compiler and launch path
could be an artifact of that path. One row per quantity that both measured."""

from __future__ import annotations

from dataclasses import replace

from bisect_smem.analysis.compare import row
from bisect_smem.core.model import DeviceReport
from bisect_smem.core.quantities import quantities
from bisect_smem.core.rows import Conclusion, Family, Verdict


def cross_check(reference: DeviceReport, other: DeviceReport) -> list[Verdict]:
    """A row per measured quantity known to both reports; any difference is a MISMATCH naming both values."""
    mine, theirs = quantities(reference), quantities(other)
    rows = []
    for key in sorted(mine):
        if not key.startswith("measured.") or mine[key] is None or theirs.get(key) is None:
            continue
        same = mine[key] == theirs[key]
        rows.append(row(f"{reference.backend} = {other.backend}: {key.removeprefix('measured.')}",
                        mine[key], reference.backend, theirs[key], Conclusion.MATCH if same else Conclusion.MISMATCH,
                        [] if same else [f"{reference.backend} {mine[key]!r}, {other.backend} {theirs[key]!r}"],
                        family=Family.CROSS_CHECK))
    return rows


def with_cross_checks(by_backend: dict[str, tuple[DeviceReport, ...]]) -> tuple[DeviceReport, ...]:
    """The first backend's reports with cross-check rows against every other backend, then the others'."""
    names = list(by_backend)
    first, rest = names[0], names[1:]
    out = []
    for dev in by_backend[first]:
        rows = list(dev.verdicts)
        for name in rest:
            twin = next((d for d in by_backend[name] if d.index == dev.index), None)
            if twin is not None:
                rows += cross_check(dev, twin)
        out.append(replace(dev, verdicts=tuple(rows)))
    for name in rest:
        out.extend(by_backend[name])
    return tuple(out)
