"""fit's limits from saved files (``--target``, the API's read_limits, trace's ``--report``): every device of
a saved report, or every baseline of a folder. fit_targets imports this module only when a file is named."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bisect_smem.analysis.fit.measured import measured_target
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.errors import UsageError
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.saved import Baseline, load_baseline, load_saved


def file_targets(text: str, option: str = "--target") -> list[Target]:
    """Every device of a saved report, or every baseline of a folder laid out DIR/<gpu-model>/<driver>.json;
    an error names the file as ``option`` gave it."""
    path = Path(text)
    if path.is_dir():
        files = sorted(path.glob("*/*.json"))
        if not files:
            raise UsageError(f"{option} {text}: no baselines in it (expected {text}/<gpu-model>/<driver>.json)")
        return [_baseline_target(load_baseline(f)) for f in files]
    saved = load_saved(path, name=f"{option} {path}")
    if not isinstance(saved, Report):
        return [_baseline_target(saved)]
    if not saved.devices:
        raise UsageError(f"{option} {text}: the report has no devices")
    return [target for measured in saved.by_gpu() for target in _gpu_targets(measured, path)]


def _gpu_targets(measured: tuple[DeviceReport, ...], path: Path) -> list[Target]:
    """One GPU of a report: one target where its backends measured the same limits (the first backend's,
    whose rows hold the cross-checks), else one per backend, each labelled with its backend and why."""
    def target(dev: DeviceReport, why: str = "") -> Target:
        return measured_target(dev, f"{dev.name} (cc {dev.compute_capability}), driver "
                                       f"{dev.context.get('nvml_driver_version') or 'unknown'} "
                                       f"[{path.name} device {dev.index}{why}]", str(path))

    first = target(measured[0])
    if all(_limits(target(dev)) == _limits(first) for dev in measured[1:]):
        return [first]
    why = "; the backends measured different limits"
    return [replace(t, short=f"{t.short} ({dev.backend})")
            for dev in measured for t in [target(dev, f", {dev.backend}{why}")]]


def _limits(target: Target) -> Target:
    """``target`` without its labels: what a fit is decided by."""
    return replace(target, name="", source=None, short=None)


def _baseline_target(baseline: Baseline) -> Target:
    dev = baseline.device
    driver = str(baseline.provenance.get("driver_version") or dev.context.get("nvml_driver_version") or "unknown")
    where = f"{baseline.path.parent.name}/{baseline.path.name}"
    return measured_target(dev, f"{dev.name} (cc {dev.compute_capability}), driver {driver} [baseline {where}]",
                              str(baseline.path), driver)
