"""Run the measurements: one worker process per device (spawn), all devices in parallel.

The parent alone collects results. A worker streams progress and each finished step; a fault that
poisons its CUDA context (illegal address), a probe that does not finish within the probe timeout, or
a worker that dies ends only that worker: the parent records the event, starts a new worker that
resumes after the last completed step, and gives a step up (with an error) after it faulted twice.
After ``max_restarts`` restarts the device gets an error; the other devices are measured regardless.
The simulated backend may run inline, in this process, since it cannot poison anything.
"""

from __future__ import annotations

import datetime as dt
import glob
import multiprocessing
import os
import queue as queue_module
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bisect_smem.analysis.verdicts import build_verdicts
from bisect_smem.core.errors import BackendUnavailable, BisectSmemError, ProbeFault, UsageError
from bisect_smem.core.model import DeviceReport, Verdict
from bisect_smem.core.profiles import profile_for_cc
from bisect_smem.devices.attributes import driver_view, runtime_view
from bisect_smem.devices.backends import get_backend
from bisect_smem.devices.backends.base import DeviceIdentity
from bisect_smem.experiments.measure import DeviceMeasurement, MeasureConfig, StepResult, assemble
from bisect_smem.experiments.plan import plan_steps

ProgressSink = Callable[[int, str], None]
POLL_S = 0.05
GIVE_UP_AFTER_FAULTS = 2


@dataclass(frozen=True)
class RunRequest:
    """What to run: a backend by name, which devices (None: all visible), how, and for how long at most."""

    backend: str
    sim_specs: tuple[Any, ...] = ()
    devices: tuple[int, ...] | None = None
    config: MeasureConfig = MeasureConfig()
    isolate: bool | None = None  # None: a worker process unless a plain simulated device needs none
    device_timeout_s: float = 300.0
    probe_timeout_s: float = 5.0
    startup_timeout_s: float = 120.0
    max_restarts: int = 6
    inject_fault: str | None = None  # test only: a step whose first attempt makes a real illegal access

    def __post_init__(self) -> None:
        for name in ("device_timeout_s", "probe_timeout_s", "startup_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 (got {getattr(self, name)})")
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0 (got {self.max_restarts})")

    @property
    def isolated(self) -> bool:
        """Real devices always get worker processes; simulated ones only when their faults (sticky, hang)
        or an injected fault would end a process."""
        if self.isolate is not None:
            return self.isolate
        return (self.backend != "sim" or self.inject_fault is not None
                or any(getattr(s, "needs_isolation", False) for s in self.sim_specs))


@dataclass(frozen=True)
class DeviceInfo:
    """What a device says about itself, gathered once when it is opened."""

    identity: DeviceIdentity
    reported: dict[str, dict[str, Any]]
    nvml: dict[str, Any]
    open_s: float = 0.0  # compiling and loading the kernels, reading the attributes


def open_device(request: RunRequest, index: int, nvml: bool = True) -> tuple[Any, DeviceInfo]:
    """Open the device and read what it reports; ``nvml=False`` leaves NVML to the caller."""
    start = time.perf_counter()
    session = get_backend(request.backend, request.sim_specs).open(index, request.config.static_sizes)
    reported = {"driver": driver_view(session.driver_attributes()),
                "runtime": runtime_view(session.runtime_attributes())}
    info = DeviceInfo(session.identity(), reported, session.nvml_info() if nvml else {},
                      round(time.perf_counter() - start, 6))
    return session, info


def new_measurement(session: Any, info: DeviceInfo, config: MeasureConfig,
                    progress: Callable[[str], None]) -> DeviceMeasurement:
    return DeviceMeasurement(session, config, progress, info.reported["driver"],
                             profile_for_cc(info.identity.compute_capability))


def build_report(index: int, backend: str, info: DeviceInfo | None, done: dict[str, StepResult],
                 events: list[dict[str, Any]], error: str | None, elapsed_s: float,
                 planned: list[str] | None = None) -> DeviceReport:
    """The device's report from whatever steps completed; a missing step leaves its quantities None and
    gets an ERROR row, as does a step that failed."""
    if info is None:
        return DeviceReport(index, None, None, backend, events=tuple(events), error=error or "never opened",
                            elapsed_s=round(elapsed_s, 3))
    measured, errors = assemble(done)
    measured = replace(measured, timings_s={"open": info.open_s, **measured.timings_s})
    cc = info.identity.compute_capability
    verdicts = build_verdicts(info.reported, measured, profile_for_cc(cc), f"{cc[0]}.{cc[1]}")
    failed = [Verdict(f"step {s.name}", None, None, None, "ERROR", s.error) for s in done.values() if s.error]
    missing = [Verdict(f"step {name}", None, None, None, "ERROR", "not measured: the device was given up")
               for name in planned or () if name not in done]
    verdicts = [*verdicts, *failed, *missing]
    context = {"pci_bus_id": info.identity.pci_bus_id, **{f"nvml_{k}": v for k, v in info.nvml.items()},
               **info.identity.extra}
    return DeviceReport(index=index, name=info.identity.name, compute_capability=f"{cc[0]}.{cc[1]}",
                        backend=backend, context=context, reported=info.reported, measured=measured,
                        verdicts=tuple(verdicts), events=tuple(events),
                        error="; ".join([*errors, *([error] if error else [])]) or None,
                        elapsed_s=round(elapsed_s, 3))


def likely_devices(request: RunRequest) -> tuple[int, ...]:
    """A guess at the visible devices, free of any driver call, so that their workers can start at once:
    the CUDA_VISIBLE_DEVICES entries, else the /dev/nvidiaN nodes. The driver's count decides after."""
    if request.backend == "sim":
        return tuple(range(len(request.sim_specs)))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = len([entry for entry in visible.split(",") if entry.strip()])
    else:
        count = len(glob.glob("/dev/nvidia[0-9]*"))
    return tuple(range(max(count, 1)))


def steps_for(request: RunRequest) -> list[str]:
    backend = get_backend(request.backend, request.sim_specs)
    return plan_steps(request.config, getattr(backend, "supported_steps", None))


def resolve_devices(request: RunRequest) -> tuple[int, ...]:
    """The device indices to measure; raises BackendUnavailable or UsageError with a one-line reason."""
    backend = get_backend(request.backend, request.sim_specs)
    count = backend.device_count()  # raises BackendUnavailable with the reason
    if count == 0:
        raise BackendUnavailable(backend.unavailable_reason() or "no device")
    if request.devices is None:
        return tuple(range(count))
    for index in request.devices:
        if not 0 <= index < count:
            raise UsageError(f"device {index} does not exist; valid: 0..{count - 1}")
    return tuple(dict.fromkeys(request.devices))


def run(request: RunRequest, progress: ProgressSink | None = None) -> tuple[DeviceReport, ...]:
    """Measure every requested device and return their reports in index order."""
    sink = progress or (lambda _i, _t: None)
    if not request.isolated:
        indices = resolve_devices(request)
        return tuple(_measure_inline(request, i, lambda text, i=i: sink(i, text)) for i in indices)
    supervisor = _Supervisor(request, sink)
    # The first workers start while this process initialises the driver to count the devices: a
    # worker spends that time starting Python anyway. A device that turns out not to exist is dropped.
    early = request.devices if request.devices is not None else likely_devices(request)
    try:
        supervisor.start(early)
        indices = resolve_devices(request)
    except BaseException:
        supervisor.stop()
        raise
    supervisor.keep(indices)
    supervisor.start([i for i in indices if i not in early])
    return supervisor.run()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")  # noqa: UP017


def _measure_inline(request: RunRequest, index: int, progress: Callable[[str], None]) -> DeviceReport:
    start = time.perf_counter()
    try:
        session, info = open_device(request, index)
    except BisectSmemError as exc:
        return build_report(index, request.backend, None, {}, [], str(exc), time.perf_counter() - start)
    steps = steps_for(request)
    done: dict[str, StepResult] = {}
    error = None
    try:
        measurement = new_measurement(session, info, request.config, progress)
        for step in steps:
            try:
                done[step] = measurement.run_step(step, done)
            except ProbeFault as fault:
                error = f"{step}: {fault}; the context is lost, and an inline run cannot restart (drop --inline)"
                break
    finally:
        session.close()
    return build_report(index, request.backend, info, done, [], error, time.perf_counter() - start, steps)


def _worker(out: Any, request: RunRequest, index: int, done: dict[str, StepResult], inject: str | None) -> None:
    """Body of a worker process: open the device, run the steps not yet done, stream each one back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends its workers
    try:
        session, info = open_device(request, index, nvml=False)
    except BisectSmemError as exc:
        out.put(("open_failed", index, str(exc)))
        return
    out.put(("opened", index, info))
    # NVML answers slowly on some systems; it runs beside the measurement and reports when done.
    nvml = threading.Thread(target=lambda: out.put(("nvml", index, session.nvml_info())), daemon=True)
    nvml.start()
    measurement = new_measurement(session, info, request.config, lambda text: out.put(("progress", index, text)))
    done = dict(done)
    for step in steps_for(request):
        if step in done:
            continue
        out.put(("step", index, step))
        try:
            if step == inject:
                session.inject_illegal_access()
            result = measurement.run_step(step, done)
        except ProbeFault as fault:
            out.put(("fault", index, step, str(fault)))
            _leave(out, 3)  # the context is poisoned
        except Exception as exc:  # a bug, not a GPU fault: say what it was before the worker ends
            out.put(("crash", index, step, f"{type(exc).__name__}: {exc}"))
            _leave(out, 1)
        done[step] = result
        out.put(("done", index, step, result))
    nvml.join(timeout=30)
    out.put(("finished", index, None))
    _leave(out, 0)


def _leave(out: Any, code: int) -> None:
    """Flush the queue and exit without CUDA's teardown: the parent has everything it needs."""
    out.close()
    out.join_thread()
    os._exit(code)


@dataclass
class _Device:
    index: int
    started: float
    proc: Any = None
    info: DeviceInfo | None = None
    done: dict[str, StepResult] = field(default_factory=dict)
    attempts: Counter = field(default_factory=Counter)
    events: list[dict[str, Any]] = field(default_factory=list)
    step: str | None = None
    last_heard: float = 0.0
    restarts: int = 0
    error: str | None = None
    finished: bool = False


class _Supervisor:
    """Starts, watches and restarts the workers; collects their steps into reports."""

    def __init__(self, request: RunRequest, sink: ProgressSink) -> None:
        self.request = request
        self.sink = sink
        self.ctx = multiprocessing.get_context("spawn")  # CUDA and fork do not mix
        self.out = self.ctx.Queue()
        self.devices: dict[int, _Device] = {}

    def start(self, indices: tuple[int, ...] | list[int]) -> None:
        for index in indices:
            if index not in self.devices:
                self.devices[index] = dev = _Device(index, time.monotonic())
                self._start(dev)

    def keep(self, indices: tuple[int, ...]) -> None:
        """Drop workers started early for devices that are not to be measured after all."""
        for index in [i for i in self.devices if i not in indices]:
            self.devices.pop(index).proc.kill()

    def stop(self) -> None:
        for dev in self.devices.values():
            if dev.proc is not None and dev.proc.is_alive():
                dev.proc.kill()

    def _start(self, dev: _Device) -> None:
        inject = self.request.inject_fault if not dev.events else None  # only the first attempt faults
        dev.proc = self.ctx.Process(target=_worker, args=(self.out, self.request, dev.index, dev.done, inject),
                                    daemon=True)
        dev.proc.start()
        dev.step, dev.last_heard = None, time.monotonic()

    def run(self) -> tuple[DeviceReport, ...]:
        try:
            while not all(d.finished for d in self.devices.values()):
                try:
                    message = self.out.get(timeout=POLL_S)
                except queue_module.Empty:
                    self._watch()
                    continue
                self._handle(message)
        finally:
            self.stop()
            for dev in self.devices.values():
                dev.proc.join(timeout=5)
        planned = steps_for(self.request)
        return tuple(build_report(d.index, self.request.backend, d.info, d.done, d.events, d.error,
                                  time.monotonic() - d.started, planned)
                     for d in sorted(self.devices.values(), key=lambda d: d.index))

    def _handle(self, message: tuple) -> None:
        kind, index, *payload = message
        dev = self.devices.get(index)
        if dev is None or dev.finished:
            return
        dev.last_heard = time.monotonic()
        if kind == "progress":
            self.sink(index, payload[0])
        elif kind == "opened":
            dev.info = payload[0]
        elif kind == "nvml":
            if dev.info is not None:
                dev.info = replace(dev.info, nvml=payload[0])
        elif kind == "step":
            dev.step = payload[0]
        elif kind == "done":
            dev.done[payload[0]] = payload[1]
            dev.step = None
        elif kind == "fault":
            self._failed(dev, "sticky fault", payload[1])
        elif kind == "crash":
            self._failed(dev, "worker crashed", payload[1])
        elif kind == "open_failed":
            dev.error, dev.finished = payload[0], True
        elif kind == "finished":
            dev.finished = True

    def _watch(self) -> None:
        now = time.monotonic()
        for dev in self.devices.values():
            if dev.finished:
                continue
            if now - dev.started > self.request.device_timeout_s:
                dev.proc.kill()
                dev.error, dev.finished = f"device timed out after {self.request.device_timeout_s:g} s", True
            elif not dev.proc.is_alive():
                self._failed(dev, "worker died", f"exit code {dev.proc.exitcode}")
            elif dev.info is None and now - dev.last_heard > self.request.startup_timeout_s:
                dev.proc.kill()
                self._failed(dev, "timeout", f"no answer within {self.request.startup_timeout_s:g} s of starting")
            elif dev.info is not None and now - dev.last_heard > self.request.probe_timeout_s:
                dev.proc.kill()
                self._failed(dev, "timeout", f"a probe did not finish within {self.request.probe_timeout_s:g} s")

    def _failed(self, dev: _Device, what: str, detail: str) -> None:
        step = dev.step or "startup"
        dev.events.append({"what": what, "where": f"device {dev.index}, step {step}", "when": _now(),
                           "detail": detail})
        dev.proc.join(timeout=5)
        dev.attempts[step] += 1
        if dev.attempts[step] >= GIVE_UP_AFTER_FAULTS and step != "startup":
            dev.done[step] = StepResult(step, None, {}, {}, f"{step}: gave up after {dev.attempts[step]} faults "
                                                            f"({what}: {detail})", 0.0)
        dev.restarts += 1
        if dev.restarts > self.request.max_restarts or (step == "startup" and dev.attempts[step] >= 2):
            dev.error = f"gave up after {dev.restarts} restarts; last: {what} in {step} ({detail})"
            dev.finished = True
            return
        self._start(dev)
