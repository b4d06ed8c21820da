"""Where ``fit``'s limits come from: published architectures, devices of saved reports and baselines
(``--target``), and local devices measured now (real or simulated)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from bisect_smem.analysis.fit.compiled import cubin_static_smem, ptx_static
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.profiles import PROFILES, ArchProfile, find_profile, profile_names
from bisect_smem.core.saved import Baseline, load_baseline, load_saved


def published(names: list[str] | None, targets: bool) -> list[ArchProfile]:
    """The published rows asked for: every --arch once, in order; all of them unless --arch or --target."""
    if not names:
        return [] if targets else list(PROFILES)
    profiles: dict[str, ArchProfile] = {}
    for name in names:
        p = find_profile(name)
        if p is None:
            raise UsageError(f"unknown profile {name!r}; valid: {', '.join(profile_names())}")
        profiles.setdefault(p.key, p)
    return list(profiles.values())


def targets(profiles: tuple[ArchProfile, ...], files: tuple[str, ...], simulate: tuple[str, ...],
            local: bool) -> tuple[list[Target], str | None]:
    """Published architectures, then devices from --target files, then local devices measured now."""
    found = [Target.from_profile(p) for p in profiles]
    for text in files:
        found += file_targets(text)
    devices, note = local_devices(simulate, local)
    return found + [Target.from_report(d) for d in devices], note


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
    gpus: dict[int, list[DeviceReport]] = {}  # --backend all lists a GPU once per backend, under one index
    for dev in saved.devices:
        gpus.setdefault(dev.index, []).append(dev)
    return [target for measured in gpus.values() for target in _gpu_targets(measured, path)]


def _gpu_targets(measured: list[DeviceReport], path: Path) -> list[Target]:
    """One GPU of a report: one target where its backends measured the same limits (the first backend's,
    whose rows hold the cross-checks), else one per backend, each labelled with its backend and why."""
    def target(dev: DeviceReport, why: str = "") -> Target:
        return Target.from_report(dev, f"{dev.name} (cc {dev.compute_capability}), driver "
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
    return Target.from_report(dev, f"{dev.name} (cc {dev.compute_capability}), driver {driver} [baseline {where}]",
                              str(baseline.path), driver)


def local_devices(simulate: tuple[str, ...], local: bool) -> tuple[list[DeviceReport], str | None]:
    """Local devices measured now: simulated ones (--simulate), else the real ones when ``local``; none, and
    why, where no GPU or backend can be used."""
    if not simulate and not local:
        return [], None
    try:
        return measure_devices(simulate), None
    except BackendUnavailable as exc:
        return [], f"no local GPU measured: {exc}"


def measure_devices(simulate: Sequence[str] = ()) -> list[DeviceReport]:
    """Every local device (or the simulated ones of ``simulate``) measured now, as far as fit needs: the
    ceilings for a block with no static data. BackendUnavailable where no GPU or backend can be used."""
    return _local_gpu().measure_devices(simulate)


def _local_gpu() -> ModuleType:
    """The half of fit that asks a local GPU, imported on first use."""
    # Deferred: measuring loads the backends (CuPy, Numba); fit without local devices never imports them.
    from bisect_smem.app.run import local_gpu

    return local_gpu


def compiled_static(path: Path, kernel: str | None, ptx: bool, ask_driver: bool = False) -> tuple[str, int, str]:
    """A compiled kernel's name, its static shared memory and where that was read: from the driver where
    ``ask_driver`` and a local GPU loads the file, else from the file (a cubin's ELF sections, or PTX)."""
    if ptx:
        found = ptx_static(path, kernel)
        name, static, read_from = found.kernel, found.static_bytes, found.source
    else:
        (name, static), read_from = cubin_static_smem(path, kernel), "read from the cubin ELF sections"
    if ask_driver:
        try:
            loaded = _local_gpu().driver_static_smem(path, name)
        except BackendUnavailable:
            loaded = None
        if loaded is not None:
            agrees = "the file agrees" if loaded == static else f"the file says {static} B"
            return name, loaded, f"read by the driver ({agrees})"
    return name, static, read_from
