"""Measuring the devices a run asked for: every device of every backend, in workers or in this process,
with the progress line drawn meanwhile; the workers' exits waited for once the report is built; and the
devices of a simulated run opened before measuring, to name their baselines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from bisect_smem.app.run.progress import ProgressLine
from bisect_smem.app.run.requests import RunRequest
from bisect_smem.core.attributes import DeviceContext
from bisect_smem.core.errors import BackendUnavailable
from bisect_smem.core.model import DeviceReport
from bisect_smem.core.profiles import cc_text
from bisect_smem.devices.device_info import open_device


def measure_all(runs: Sequence[RunRequest], skipped: Sequence[str],
                progress: TextIO | None) -> tuple[DeviceReport, ...]:
    """Every device of every run; no run at all is BackendUnavailable naming why each backend is missing.
    ``progress``: the stream the progress line is drawn on, or None for none."""
    if not runs:
        raise BackendUnavailable("; ".join(skipped))
    # Deferred: the runner supervises worker processes; a command that measures nothing must not load it.
    from bisect_smem.app.run.runner import run_all

    printer = ProgressLine(progress) if progress is not None else None
    try:
        return run_all(list(runs), printer, wait_exits=False)  # waited for once the report is built
    finally:
        if printer is not None:
            printer.close()


def wait_for_workers() -> None:
    """The workers' exits, which passed while the report was built: waited for before anything goes out."""
    # Deferred, as in measure_all, which has loaded it by now.
    from bisect_smem.app.run.runner import wait_for_exits

    wait_for_exits()


def simulated_devices(run: RunRequest) -> list[DeviceReport]:
    """A simulated run's devices as far as a baseline's name needs them (model, cc, driver), opened now:
    their model and driver are known before they are measured, so an existing baseline is refused before
    any work; for a real GPU the same check runs after measuring, before any write."""
    specs = run.backend.specs
    stubs = []
    for index in run.devices or range(len(specs)):
        if not 0 <= index < len(specs):
            continue  # the runner names the device that does not exist
        session, info = open_device(run.backend, index, run.config.static_sizes)
        session.close()
        stubs.append(DeviceReport(index, info.identity.name, cc_text(info.identity.compute_capability),
                                  run.backend.name, context=DeviceContext().with_nvml(info.nvml)))
    return stubs
