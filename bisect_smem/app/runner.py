"""Run the measurements: one worker process per device (spawn), all devices in parallel.

Supervision only. A worker streams progress and each finished step; a fault that poisons its CUDA
context (illegal address), a probe that does not finish within the probe timeout, or a worker that dies
ends only that worker: the supervisor records the event, starts a new worker that resumes after the
last completed step, and gives a step up (with an error) after it faulted twice. After
``max_restarts`` restarts the device gets an error; the other devices are measured regardless. A
backend that cannot poison anything (a plain simulated device) may run inline, in this process.
"""

from __future__ import annotations

import datetime as dt
import glob
import multiprocessing
import os
import queue as queue_module
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bisect_smem.analysis.crosscheck import with_cross_checks
from bisect_smem.analysis.device_report import build_report
from bisect_smem.app.requests import RunRequest
from bisect_smem.app.worker import (
    Finished,
    Message,
    NvmlRead,
    Opened,
    OpenFailed,
    Progress,
    StepDone,
    StepFaulted,
    StepStarted,
    WorkerCrashed,
    measure_in_process,
    planned_steps,
    worker_main,
)
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.model import DeviceReport
from bisect_smem.devices.device_info import DeviceInfo
from bisect_smem.experiments.steps import Done, Step, StepResult

ProgressSink = Callable[[int, str], None]
POLL_S = 0.05
GIVE_UP_AFTER_FAULTS = 2


def likely_devices(request: RunRequest) -> tuple[int, ...]:
    """A guess at the visible devices, free of any driver call, so that their workers can start at once:
    the CUDA_VISIBLE_DEVICES entries, else the /dev/nvidiaN nodes. The driver's count decides after."""
    if request.backend.name == "sim":
        return tuple(range(request.backend.device_count()))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = len([entry for entry in visible.split(",") if entry.strip()])
    else:
        count = len(glob.glob("/dev/nvidia[0-9]*"))
    return tuple(range(max(count, 1)))


def resolve_devices(request: RunRequest) -> tuple[int, ...]:
    """The device indices to measure; raises BackendUnavailable or UsageError with a one-line reason."""
    count = request.backend.device_count()  # raises BackendUnavailable with the reason
    if count == 0:
        raise BackendUnavailable(request.backend.unavailable_reason() or "no device")
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
        return tuple(measure_in_process(request, i, lambda text, i=i: sink(i, text)) for i in indices)
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


@dataclass
class _Device:
    index: int
    started: float
    proc: Any = None
    info: DeviceInfo | None = None
    done: Done = field(default_factory=dict)
    attempts: Counter = field(default_factory=Counter)
    events: list[dict[str, Any]] = field(default_factory=list)
    step: Step | None = None
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
        self.steps = planned_steps(request)

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
        dev.proc = self.ctx.Process(target=worker_main, daemon=True,
                                    args=(self.out, self.request, dev.index, dev.done, self.steps, inject))
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
        return tuple(build_report(d.index, self.request.backend.name, d.info, d.done, d.events, d.error,
                                  time.monotonic() - d.started, self.steps, self.request.config.level)
                     for d in sorted(self.devices.values(), key=lambda d: d.index))

    def _handle(self, message: Message) -> None:
        dev = self.devices.get(message.index)
        if dev is None or dev.finished:
            return
        dev.last_heard = time.monotonic()
        match message:
            case Progress(text=text):
                self.sink(dev.index, text)
            case Opened(info=info):
                dev.info = info
            case NvmlRead(nvml=nvml) if dev.info is not None:
                dev.info = replace(dev.info, nvml=nvml)
            case StepStarted(step=step):
                dev.step = step
            case StepDone(result=result):
                dev.done[result.step] = result
                dev.step = None
            case StepFaulted(detail=detail):
                self._failed(dev, "sticky fault", detail)
            case WorkerCrashed(detail=detail):
                self._failed(dev, "worker crashed", detail)
            case OpenFailed(error=error):
                dev.error, dev.finished = error, True
            case Finished():
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
        step = dev.step
        if step is None and dev.info is not None:
            # Between two steps (opened, the next not yet announced) the fault belongs to the next step.
            step = next((s for s in self.steps if s not in dev.done), None)
        where = step.key if step is not None else "startup"
        dev.events.append({"what": what, "where": f"device {dev.index}, step {where}", "when": _now(),
                           "detail": detail})
        dev.proc.join(timeout=5)
        dev.attempts[where] += 1
        if step is not None and dev.attempts[where] >= GIVE_UP_AFTER_FAULTS:
            dev.done[step] = StepResult(step, None, {}, {}, f"{where}: gave up after {dev.attempts[where]} faults "
                                                            f"({what}: {detail})", 0.0)
        dev.restarts += 1
        if dev.restarts > self.request.max_restarts or (step is None and dev.attempts[where] >= GIVE_UP_AFTER_FAULTS):
            done = dev.restarts - 1  # the restart just counted is the one not made
            dev.error = (f"gave up after {done} restart{'' if done == 1 else 's'}"
                         f"{' (--max-restarts 0)' if self.request.max_restarts == 0 else ''}; "
                         f"last: {what} in {where} ({detail})")
            dev.finished = True
            return
        self._start(dev)


def run_all(requests: list[RunRequest], progress: ProgressSink | None = None) -> tuple[DeviceReport, ...]:
    """Measure through each backend asked for; with several (``--backend all``), add cross-check rows.
    No backend available is exit 3, naming why each is missing."""
    if len(requests) == 1:
        return run(requests[0], progress)
    return with_cross_checks(run_concurrently(requests, run, progress))


def run_concurrently(requests: list[RunRequest], measure: Callable[[RunRequest, ProgressSink | None], Any],
                     progress: ProgressSink | None) -> dict[str, Any]:
    """Each request's reports by backend name. Backends measured in worker processes run side by side,
    so numba's start and compile overlap CuPy's run; the first runs on this thread, which keeps Ctrl-C
    and its workers' cleanup where they were (the others' workers are daemons). In-process runs, which
    would share one CUDA context, run one after another."""
    if not all(r.isolated for r in requests):
        return {r.backend.name: measure(r, progress) for r in requests}
    results: dict[int, Any] = {}
    errors: dict[int, BaseException] = {}

    def one(i: int) -> None:
        try:
            results[i] = measure(requests[i], progress)
        except Exception as exc:  # noqa: BLE001 - re-raised on the calling thread below
            errors[i] = exc

    others = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(1, len(requests))]
    for thread in others:
        thread.start()
    results[0] = measure(requests[0], progress)
    for thread in others:
        thread.join()
    for i in sorted(errors):
        raise errors[i]
    return {r.backend.name: results[i] for i, r in enumerate(requests)}
