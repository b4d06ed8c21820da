"""Where ``fit``'s limits come from: published architectures, devices of saved reports and baselines
(``--target``, saved_targets.py), and local devices measured now (real or simulated, local_gpu.py). Each
measured half is imported on first use, so that fit against published rows loads neither."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from bisect_smem.analysis.fit.compiled import cubin_static_smem, ptx_static
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.profiles import PROFILES, ArchProfile, find_profile, profile_names

if TYPE_CHECKING:  # deferred for type checkers only: a report's model loads with the measured halves
    from bisect_smem.core.model import DeviceReport

Measured = TypeVar("Measured")  # what a local measurement gives: DeviceReports, or them as Targets


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
    measured, note = _measured_locally(simulate, local, measure_targets)
    return found + measured, note


def file_targets(text: str, option: str = "--target") -> list[Target]:
    """Every device of a saved report, or every baseline of a folder laid out DIR/<gpu-model>/<driver>.json;
    an error names the file as ``option`` gave it."""
    return _saved_targets().file_targets(text, option)


def local_devices(simulate: tuple[str, ...], local: bool) -> tuple[list[DeviceReport], str | None]:
    """Local devices measured now: simulated ones (--simulate), else the real ones when ``local``; none, and
    why, where no GPU or backend can be used."""
    return _measured_locally(simulate, local, measure_devices)


def _measured_locally(simulate: Sequence[str], local: bool,
                      measure: Callable[[Sequence[str]], list[Measured]]) -> tuple[list[Measured], str | None]:
    """``measure``'s answer for the simulated devices (--simulate), else for the real ones when ``local``;
    none, and why, where no GPU or backend can be used."""
    if not simulate and not local:
        return [], None
    try:
        return measure(simulate), None
    except BackendUnavailable as exc:
        return [], f"no local GPU measured: {exc}"


def measure_devices(simulate: Sequence[str] = ()) -> list[DeviceReport]:
    """Every local device (or the simulated ones of ``simulate``) measured now, as far as fit needs: the
    ceilings for a block with no static data. BackendUnavailable where no GPU or backend can be used."""
    return _local_gpu().measure_devices(simulate)


def measure_targets(simulate: Sequence[str] = ()) -> list[Target]:
    """measure_devices' devices as the limits fit answers against."""
    return _local_gpu().measure_targets(simulate)


def _saved_targets() -> ModuleType:
    """The half of fit that reads saved reports and baselines, imported on first use."""
    # Deferred: reading a report loads its model and plausibility rules; fit against published rows never does.
    from bisect_smem.app.run import saved_targets

    return saved_targets


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
