"""Measuring the devices a run asked for, into a Report: the run planned from its options
(``plan_measurement``), then every device of every backend measured, in workers or in this process, with
the progress line drawn meanwhile, and the host around them described (``measure_report``); the workers'
exits waited for once the report is built; and the devices of a simulated run opened before measuring,
to name their baselines. The command line (app/cli/measure.py) and the public API both measure through here."""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Sequence
from types import ModuleType
from typing import TextIO

from bisect_smem import __version__
from bisect_smem.app.run.progress import ProgressLine
from bisect_smem.app.run.requests import ALL_BACKENDS, RunRequest, build_requests, planted_faults
from bisect_smem.app.run.worker import planned_steps
from bisect_smem.core import session as sessions
from bisect_smem.core.attributes import DeviceContext
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.levels import DEFAULT_LEVEL
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.numbers import whole_number
from bisect_smem.core.profiles import cc_text
from bisect_smem.core.search import DEFAULT_CONFIRM
from bisect_smem.core.session import Session
from bisect_smem.devices.backends.table import BACKENDS, REAL_BACKENDS, VALIDATING_BACKENDS
from bisect_smem.devices.device_info import open_device
from bisect_smem.devices.host import host_context
from bisect_smem.experiments.config import MeasureConfig


@frozen
class Measurement:
    """A measuring run, planned and checked: one RunRequest per backend, and why each backend asked for
    (``--backend all``) is left out."""

    runs: tuple[RunRequest, ...]
    skipped: tuple[str, ...]
    backend: str  # the report's backend: one name, or "all"
    level: str

    @property
    def simulated(self) -> bool:
        """Whether every device is modelled rather than reached (--simulate)."""
        return all(run.simulated for run in self.runs)


def plan_measurement(backend: str | None = None, simulate: Sequence[str] | None = None,
                     devices: Sequence[int] | None = None, *, level: str = DEFAULT_LEVEL,
                     confirm: int = DEFAULT_CONFIRM, isolate: bool | None = None,
                     device_timeout_s: float | None = None, probe_timeout_s: float | None = None,
                     max_restarts: int | None = None, inject_fault: Sequence[str] | None = None) -> Measurement:
    """The Measurement for these options, as the command line names them: ``backend`` (cupy, numba, all, sim;
    None: cupy, or sim with ``simulate``), ``simulate`` (``--simulate`` specs), ``devices`` (indices; None:
    every visible one), ``level`` (quick, standard, full), ``confirm`` (times the ceiling is seen),
    ``isolate`` (worker processes; None: unless the backend needs none), the timeouts in seconds and
    ``max_restarts`` (None: RunRequest's defaults) and the test-only ``inject_fault`` values. Options that
    cannot be honoured are a UsageError (exit 2), before anything is measured."""
    if level == "full" and (backend == ALL_BACKENDS or (backend in BACKENDS and backend not in VALIDATING_BACKENDS)):
        real = " or ".join(name for name in VALIDATING_BACKENDS if name in REAL_BACKENDS)
        raise UsageError(f"--level full needs the {real} backend (or --simulate), not {backend!r}: "
                         "the validation kernels run through it")
    inject_step, planted = planted_faults(inject_fault, level)
    limits = {name: value for name, value in (("device_timeout_s", device_timeout_s),
                                              ("probe_timeout_s", probe_timeout_s), ("max_restarts", max_restarts))
              if value is not None}
    runs, skipped = build_requests(
        backend, simulate, devices=tuple(devices) if devices else None,
        config=MeasureConfig(confirm=confirm, level=level, planted=planted), isolate=isolate, **limits,
        **_injected(inject_step))
    step_key = inject_step.rsplit("@", 1)[0] if inject_step else None
    if step_key is not None and runs and step_key not in {step.key for step in planned_steps(runs[0])}:
        raise UsageError(f"--inject-fault {inject_step}: no such step at --level {level}")
    name = ALL_BACKENDS if backend == ALL_BACKENDS else runs[0].backend.name if runs else ALL_BACKENDS
    return Measurement(tuple(runs), tuple(skipped), name, level)


def _injected(text: str | None) -> dict[str, str | int | None]:
    """``--inject-fault STEP[@DEVICE]`` as the request's fields: the step, and the one device to fault on."""
    if text is None or "@" not in text:
        return {"inject_fault": text}
    step, device = text.rsplit("@", 1)
    try:
        return {"inject_fault": step, "inject_device": whole_number(device, "--inject-fault device")}
    except UsageError:
        raise UsageError(f"--inject-fault takes STEP or STEP@DEVICE, a device index (got {text!r})") from None


def measure_report(measurement: Measurement, progress: TextIO | None = None, *, wait_exits: bool = True,
                   session: Session | None = None) -> Report:
    """Measure every device of ``measurement`` and return the Report, its status fields (exit code, error,
    regressions) not yet set: they depend on what the caller compares it with (outputs/fleet.finish).

    ``progress``: the stream the progress line is drawn on, or None for none. ``wait_exits``: wait for the
    workers' exits before returning; without it the caller calls ``wait_for_workers`` before the report
    goes out, so that the exits pass while it is rendered. ``session``: the run's (core/session.py; default:
    the one in progress). No backend available is BackendUnavailable (exit 3), naming why each is missing;
    a device that cannot be measured is a device with an error, not an exception."""
    session = session if session is not None else sessions.current()
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")  # when the run started
    devices = measure_all(measurement.runs, measurement.skipped, progress, session)
    if wait_exits:
        wait_for_workers(session)
    return Report(tool_version=__version__, created_utc=created, host=platform.node(), backend=measurement.backend,
                  devices=devices, host_context={} if measurement.simulated else host_context(),
                  level=measurement.level)


def measure_all(runs: Sequence[RunRequest], skipped: Sequence[str], progress: TextIO | None,
                session: Session | None = None) -> tuple[DeviceReport, ...]:
    """Every device of every run; no run at all is BackendUnavailable naming why each backend is missing.
    ``progress``: the stream the progress line is drawn on, or None for none. The workers' exits are left
    to ``wait_for_workers``."""
    if not runs:
        raise BackendUnavailable("; ".join(skipped))
    printer = ProgressLine(progress) if progress is not None else None
    try:
        return _runner().run_all(list(runs), printer, wait_exits=False, session=session)  # waited for once the report is built
    finally:
        if printer is not None:
            printer.close()


def wait_for_workers(session: Session | None = None) -> None:
    """The workers' exits, which passed while the report was built: waited for before anything goes out."""
    _runner().wait_for_exits(session if session is not None else sessions.current())


def _runner() -> ModuleType:
    """The runner, imported on first use."""
    # Deferred: the runner supervises worker processes; a command that measures nothing must not load it.
    from bisect_smem.app.run import runner

    return runner


def simulated_devices(run: RunRequest) -> list[DeviceReport]:
    """A simulated run's devices as far as a baseline's name needs them (model, cc, driver), opened now:
    their model and driver are known before they are measured, so an existing baseline is refused before
    any work; for a real GPU the same check runs after measuring, before any write."""
    specs = run.backend.specs
    stubs = []
    for index in run.devices or range(len(specs)):
        if not 0 <= index < len(specs):
            continue  # the runner names the device that does not exist
        opened, info = open_device(run.backend, index, run.config.static_sizes)
        opened.close()
        stubs.append(DeviceReport(index, info.identity.name, cc_text(info.identity.compute_capability),
                                  run.backend.name, context=DeviceContext().with_nvml(info.nvml)))
    return stubs
