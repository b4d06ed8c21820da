"""What fit asks of this machine's GPUs: their ceilings measured now, and a compiled kernel's static shared
memory as the driver loads it. fit_targets imports this module only when a local GPU may be used, since it
loads the backends' runner."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bisect_smem.analysis.fit.measured import measured_target
from bisect_smem.analysis.fit.targets import Target
from bisect_smem.app.run.requests import backend_for
from bisect_smem.app.run.requests import build_request as run_request
from bisect_smem.app.run.runner import run
from bisect_smem.core.model import DeviceReport
from bisect_smem.experiments.measure import MeasureConfig


def measure_devices(simulate: Sequence[str] = ()) -> list[DeviceReport]:
    """Every local device (or the simulated ones of ``simulate``) measured now, as far as fit needs: the
    ceilings for a block with no static data. BackendUnavailable where no GPU or backend can be used."""
    config = MeasureConfig(static_sizes=(0,), threads=(128,), residency=False, carveout=False)
    # A device whose ceilings could not be measured is shown as unknown, with why, rather than dropped.
    return list(run(run_request(None, list(simulate) or None, config=config)))


def measure_targets(simulate: Sequence[str] = ()) -> list[Target]:
    """measure_devices' devices as fit's limits."""
    return [measured_target(dev) for dev in measure_devices(simulate)]


def driver_static_smem(path: Path, kernel: str) -> int | None:
    """The static shared memory the local driver reports for ``kernel`` in ``path``; None without a GPU."""
    backend = backend_for(None)  # the default backend; one that cannot load a cubin answers None
    return backend.loaded_static_smem(path, kernel) if backend.is_available() else None
