"""Saved baselines per GPU model and driver version, and exact comparison against them.

Layout: ``DIR/<gpu-model-slug>/<driver-version>.json``. A baseline is one device's report plus
provenance, written atomically with sorted keys, and read back by core/saved.py. Comparing never
writes anything in DIR.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bisect_smem import __version__
from bisect_smem.core.errors import BaselineError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.jsonable import dumps, to_jsonable
from bisect_smem.core.levels import DEFAULT_LEVEL, common_level
from bisect_smem.core.model import BASELINE_SCHEMA, DeviceReport, Report
from bisect_smem.core.quantities import Regression, at_level, compare_quantities, quantities
from bisect_smem.core.rows import Conclusion
from bisect_smem.core.saved import Baseline, load_baseline


def model_slug(name: str | None) -> str:
    """``NVIDIA H200`` -> ``nvidia-h200``: the folder of one GPU model."""
    slug = re.sub(r"[^a-z0-9]+", "-", (name or "unknown-gpu").lower()).strip("-")
    return slug or "unknown-gpu"


def driver_version(dev: DeviceReport) -> str:
    """The driver version a baseline is filed under (NVML's, else 'unknown-driver')."""
    return str(dev.context.nvml_driver_version or "unknown-driver")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def provenance(report: Report, dev: DeviceReport) -> dict[str, Any]:
    """Who, where and with what the baseline was measured."""
    ctx = dev.context
    return {
        "tool_version": __version__,
        "driver_version": driver_version(dev),
        "cuda_driver_version": ctx.cuda_driver_version or ctx.nvml_cuda_driver_version,
        "cuda_runtime_version": ctx.cuda_runtime_version,
        "cupy_version": ctx.cupy_version,
        "numba_version": ctx.numba_version,
        "device": dev.name,
        "compute_capability": dev.compute_capability,
        "uuid": ctx.nvml_uuid,
        "host": report.host,
        "date_utc": report.created_utc,
        "backend": dev.backend,
        "level": device_level(dev),
    }


def device_level(dev: DeviceReport) -> str:
    """The level the device was measured at (a report from before levels existed: standard)."""
    return dev.measured.level if dev.measured is not None else DEFAULT_LEVEL


def comparable(dev: DeviceReport, baseline: Baseline) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Both sides' quantities at the level both runs reached, and that level. Which quantities a level
    measures comes from the level recorded, not from what is present, so a quantity that level should have
    and one side lacks is still a difference."""
    level = common_level(device_level(dev), str(baseline.provenance.get("level") or device_level(baseline.device)))
    return at_level(quantities(dev), level), at_level(quantities(baseline.device), level), level


def safe_name(text: str, fallback: str) -> str:
    """``text`` as one file name that stays in its folder: letters, digits, ``.``, ``_``, ``+`` and ``-``
    only, no leading dot (so never ``.`` or ``..``), at most 100 characters; ``fallback`` if nothing is left."""
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", text)[:100].lstrip(".")
    return name or fallback


def baseline_path(directory: Path, dev: DeviceReport) -> Path:
    """DIR/<gpu-model-slug>/<driver-version>.json; both parts come from the device's data, so each is made
    a single safe name: a driver version of ``../../x`` names a file in DIR/<model>, never elsewhere."""
    return Path(directory) / model_slug(dev.name) / f"{safe_name(driver_version(dev), 'unknown-driver')}.json"


def baseline_documents(report: Report, directory: Path, force: bool = False) -> dict[Path, str]:
    """The baseline files to write, by path: one per GPU model and driver (the first device of each).
    Refuses to overwrite, or to save from a device with ERROR rows, without ``force``, checking every
    target before any is written, so a refusal leaves DIR as it was."""
    chosen: dict[Path, DeviceReport] = {}
    for dev in report.devices:
        if dev.measured is None:
            raise BaselineError(f"device {dev.index} was not measured ({dev.error}); no baseline saved")
        if dev.incomplete and not force:
            raise BaselineError(f"device {dev.index} was not measured completely ({incomplete_reason(dev)}); "
                                "no baseline saved (--force saves it anyway)")
        chosen.setdefault(baseline_path(directory, dev), dev)
    refuse_existing(chosen, force)
    return {path: dumps({"schema": BASELINE_SCHEMA, "provenance": provenance(report, dev), "device": to_jsonable(dev)})
            for path, dev in chosen.items()}


def refuse_existing(paths: Iterable[Path], force: bool) -> None:
    """Raise BaselineError when a baseline to be saved exists already (and ``force`` is not given)."""
    for path in paths:
        if path.exists() and not force:
            raise BaselineError(f"baseline {path} exists; use --force to replace it")


def find_baseline(directory: Path, dev: DeviceReport) -> tuple[Baseline, str] | None:
    """The baseline for this GPU model and cc: the same driver version if saved, else the newest older one.
    Returns it with a line saying which was used, or None when there is none. Files are read one at a
    time, the one named after this driver first, then newest name first, until one answers: a folder of a
    thousand drivers costs one or two reads, not a thousand."""
    folder = Path(directory) / model_slug(dev.name)
    if not folder.is_dir():
        return None
    current = driver_version(dev)
    older: Baseline | None = None
    for baseline in _candidates(folder, current, dev.compute_capability):
        saved = str(baseline.provenance.get("driver_version"))
        if saved == current:
            return baseline, f"baseline {baseline.path} (same driver {current})"
        if older is None and _version_key(saved) < _version_key(current):
            older = baseline  # the newest older by its name; a same-driver file named otherwise may follow
    if older is None:
        return None
    return older, (f"baseline {older.path} (driver {older.provenance.get('driver_version')}, "
                   f"the newest older than {current})")


def _candidates(folder: Path, current: str, cc: str | None) -> Iterable[Baseline]:
    """The folder's baselines of compute capability ``cc``, read lazily: the one named after ``current``
    first, then by the driver version in their names, newest first. A file named after a newer driver is
    not read, and once one older than ``current`` was read, only files whose name says ``current`` could
    still answer better."""
    own = folder / f"{safe_name(current, 'unknown-driver')}.json"
    paths = sorted((p for p in folder.glob("*.json") if p != own), key=lambda p: (_version_key(p.stem), p.name),
                   reverse=True)
    if os.path.lexists(own):  # anything there is read, and what is no baseline (a FIFO, a folder) refused
        baseline = load_baseline(own)
        if baseline.device.compute_capability == cc:
            yield baseline
    found_older, now = False, _version_key(current)
    for path in paths:
        named = _version_key(path.stem)
        if (named and named > now) or (found_older and named != now):
            continue  # filed under a newer driver, or no better than the older one found
        baseline = load_baseline(path)
        if baseline.device.compute_capability != cc:
            continue  # another GPU under the same model name: it answers nothing, and ends no search
        found_older = found_older or _version_key(str(baseline.provenance.get("driver_version"))) < now
        yield baseline


@frozen
class Comparison:
    """One device against its baseline: which baseline (None: none found), how many quantities, what
    regressed, what this run could not measure (a device measured incompletely: not a regression, a
    measurement to repeat), and why the baseline itself is no reference (None: it is one)."""

    baseline: Baseline | None
    note: str
    compared: int
    regressions: tuple[Regression, ...]  # the quantities that failed
    unmeasured: tuple[Regression, ...] = ()  # what an incomplete measurement lacks that the baseline has
    baseline_problem: str | None = None


def incomplete_reason(dev: DeviceReport) -> str | None:
    """Why a device's measurement is incomplete (how many ERROR rows, its error), or None."""
    if not dev.incomplete:
        return None
    errors = sum(v.verdict == Conclusion.ERROR for v in dev.verdicts)
    parts = [*([f"{errors} ERROR row{'s' if errors != 1 else ''}"] if errors else []), *([dev.error] if dev.error else [])]
    return "; ".join(parts)


def compare_device(directory: Path, dev: DeviceReport) -> Comparison:
    """The device against its baseline in ``directory``: which one, how many quantities, what regressed."""
    found = find_baseline(directory, dev)
    if found is None:
        return Comparison(None, f"no baseline for {model_slug(dev.name)} cc {dev.compute_capability} "
                                           f"(driver {driver_version(dev)}) in {directory}", 0, ())
    baseline, note = found
    current, saved, level = comparable(dev, baseline)
    if level != device_level(dev) or level != device_level(baseline.device):
        note += f"; compared at level {level} (now {device_level(dev)}, baseline {device_level(baseline.device)})"
    checks = compare_quantities(current, saved)
    failed = [r for r in checks if r.fails]
    # A quantity this run did not get, on a device it could not measure completely, is not a regression.
    lost = [r for r in failed if dev.incomplete and r.now is None and r.baseline is not None]
    problem = incomplete_reason(baseline.device)
    if problem:
        problem = f"the baseline was saved from an incomplete measurement ({problem}): it is not a reference"
    return Comparison(baseline, note, len(checks), tuple(r for r in failed if r not in lost), tuple(lost), problem)
