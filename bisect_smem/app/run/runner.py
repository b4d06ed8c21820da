"""Run the measurements: one worker process per device (a fresh interpreter), all devices in parallel.

Supervision only. A worker streams progress and each finished step; a fault that poisons its CUDA
context (illegal address), a probe that does not finish within the probe timeout, or a worker that dies
ends only that worker: the supervisor records the event, starts a new worker that resumes after the
last completed step, and gives a step up (with an error) after it faulted twice. After
``max_restarts`` restarts the device gets an error; the other devices are measured regardless. A
backend that cannot poison anything (a plain simulated device) may run inline, in this process.
The workers a run ended and has not yet waited for are kept in its session (core/session.py, ``exiting``),
which is handed down to every thread that measures, since a thread starts outside the run.
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
import queue as queue_module
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bisect_smem.analysis.crosscheck import with_cross_checks
from bisect_smem.analysis.device_report import build_report
from bisect_smem.app.run import head_start, in_process
from bisect_smem.app.run.messages import (
    Exited,
    Finished,
    Message,
    Opened,
    OpenFailed,
    Progress,
    StepDone,
    StepFaulted,
    StepStarted,
    WorkerCrashed,
    WorkerJob,
    read_messages,
)
from bisect_smem.app.run.requests import RunRequest
from bisect_smem.app.run.subprocesses import start_worker
from bisect_smem.app.run.timeline import mark
from bisect_smem.app.run.worker import planned_steps
from bisect_smem.core import session as sessions
from bisect_smem.core.attributes import NvmlInfo
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.core.model import DeviceReport
from bisect_smem.core.session import Session
from bisect_smem.devices.device_info import DeviceInfo
from bisect_smem.experiments.measure import running_steps
from bisect_smem.experiments.steps import Done, Step, StepResult

ProgressSink = Callable[[int, str], None]
POLL_S = 0.05
GIVE_UP_AFTER_FAULTS = 2
BESIDE_TIMEOUT_S = 30.0  # NVML answers slowly on some systems; past this its fields stay unknown
WAIT_S = 5.0


def early_devices(request: RunRequest) -> tuple[int, ...]:
    """The devices whose workers start before the driver has counted them, free of any driver call: those
    asked for, a simulated backend's, else the likely ones (head_start.likely_devices)."""
    if request.devices is not None:
        return request.devices
    return tuple(range(request.backend.device_count())) if request.simulated else head_start.likely_devices()


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


def run(request: RunRequest, progress: ProgressSink | None = None, started: dict[int, head_start.Worker] | None = None,
        wait_exits: bool = True, session: Session | None = None) -> tuple[DeviceReport, ...]:
    """Measure every requested device and return their reports in index order; ``started`` are workers
    already started for some of them (head_start), which this run now owns; ``wait_exits`` as run_all's;
    ``session``: the run's (default: the one in progress on this thread)."""
    session = session if session is not None else sessions.current()
    sink = progress or (lambda _i, _t: None)
    if not request.isolated:
        indices = resolve_devices(request)
        return tuple(in_process.measure(request, i, lambda text, i=i: sink(i, text)) for i in indices)
    supervisor = _Supervisor(request, sink, started or {}, session)
    # The first workers start while this process initialises the driver to count the devices: a
    # worker spends that time starting Python anyway. A device that turns out not to exist is dropped.
    early = early_devices(request)
    try:
        supervisor.start(early)
        mark("workers started")
        indices = resolve_devices(request)
        supervisor.keep(indices)
        supervisor.start([i for i in indices if i not in early])
    except BaseException:
        supervisor.stop()
        raise
    reports = supervisor.run()
    if wait_exits:
        wait_for_exits(session)
    return reports


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")  # noqa: UP017


@dataclass
class _Device:
    index: int
    started: float
    proc: Any = None
    generation: int = 0  # which worker of this device: messages of an earlier one are stale
    info: DeviceInfo | None = None
    done: Done = field(default_factory=dict)
    attempts: Counter = field(default_factory=Counter)
    events: list[dict[str, Any]] = field(default_factory=list)
    running: list[Step] = field(default_factory=list)  # started and not done: several where they share rounds
    last_heard: float = 0.0
    restarts: int = 0
    error: str | None = None
    finished: bool = False


class _Supervisor:
    """Starts, watches and restarts the workers; collects their steps into reports. NVML, which every
    device's report needs, is read here, once for all devices, beside the measurement."""

    def __init__(self, request: RunRequest, sink: ProgressSink, started: dict[int, head_start.Worker],
                 session: Session) -> None:
        self.request = request
        self.session = session
        self.sink = sink
        self.started = started  # workers already running, waiting for their first job
        self.out: queue_module.Queue[tuple[int, Message]] = queue_module.Queue()
        self.devices: dict[int, _Device] = {}
        self.steps = planned_steps(request)
        self.nvml: dict[int, NvmlInfo] = {}
        self.beside: list[threading.Thread] = []  # the host's work, done once for all devices

    def start(self, indices: tuple[int, ...] | list[int]) -> None:
        for index in indices:
            if index not in self.devices:
                self.devices[index] = dev = _Device(index, time.monotonic())
                self._start(dev)

    def keep(self, indices: tuple[int, ...]) -> None:
        """Drop workers started early for devices that are not to be measured after all; for those that
        are, do beside them, once, what they all need: the backend's shared preparation (the compiled
        module each worker then loads) and NVML's view of every device."""
        for index in [i for i in self.devices if i not in indices]:
            _end(self.devices.pop(index).proc)
        backend, kinds = self.request.backend, frozenset(step.kind for step in self.steps)
        self.beside = [threading.Thread(target=backend.prepare, args=(indices, self.request.config.static_sizes, kinds),
                                        daemon=True)]
        if backend.nvml_from_host:
            self.beside.append(threading.Thread(target=lambda: self.nvml.update(backend.host_nvml(indices)),
                                                daemon=True))
        for thread in self.beside:
            thread.start()

    def stop(self) -> None:
        for dev in self.devices.values():
            _end(dev.proc)
        for proc in self.started.values():
            _end(proc)

    def _start(self, dev: _Device) -> None:
        request = self.request
        # Only the first attempt faults, on the device named (every device where none is).
        inject = request.inject_fault if not dev.events and request.inject_device in (None, dev.index) else None
        # After any fault every step runs alone, so that a fault in steps sharing rounds is pinned on one.
        job = WorkerJob(self.request, dev.index, dict(dev.done), self.steps, inject, alone=bool(dev.events))
        backend = request.backend
        dev.proc = self.started.pop(dev.index, None) or start_worker(dev.index, backend.name, backend.primary_context)
        dev.generation += 1
        threading.Thread(target=self._read, args=(dev.proc, dev.index, dev.generation, pickle.dumps(job)),
                         daemon=True).start()
        dev.running, dev.last_heard = [], time.monotonic()

    def _read(self, proc: head_start.Worker, index: int, generation: int, job: bytes) -> None:
        """Hand a worker its job, then pass on what it says, and, when its stream ends, how it exited."""
        try:
            proc.stdin.write(job)
            proc.stdin.close()
        except OSError:
            pass  # it ended before reading its job: its exit says so below
        for message in read_messages(proc.stdout):
            self.out.put((generation, message))
        self.out.put((generation, Exited(index, proc.wait())))

    def run(self) -> tuple[DeviceReport, ...]:
        try:
            while not all(d.finished for d in self.devices.values()):
                try:
                    generation, message = self.out.get(timeout=POLL_S)
                except queue_module.Empty:
                    self._watch()
                    continue
                self._handle(generation, message)
        finally:
            mark("workers done")
            self.stop()
            # Their exits (the driver releasing each context) pass while the report is built and rendered.
            self.session.exiting.extend(dev.proc for dev in self.devices.values() if dev.proc is not None)
        deadline = time.monotonic() + BESIDE_TIMEOUT_S
        for thread in self.beside:
            thread.join(timeout=max(deadline - time.monotonic(), 0))
        return tuple(build_report(d.index, self.request.backend.name, self._with_nvml(d), d.done, d.events, d.error,
                                  time.monotonic() - d.started, self.steps, self.request.config.level)
                     for d in sorted(self.devices.values(), key=lambda d: d.index))

    def _with_nvml(self, dev: _Device) -> DeviceInfo | None:
        nvml = self.nvml.get(dev.index)
        return replace(dev.info, nvml=nvml) if dev.info is not None and nvml is not None else dev.info

    def _handle(self, generation: int, message: Message) -> None:
        dev = self.devices.get(message.index)
        if dev is None or dev.finished or generation != dev.generation:
            return
        dev.last_heard = time.monotonic()
        match message:
            case Progress(text=text):
                self.sink(dev.index, text)
            case Opened(info=info):
                dev.info = info
            case StepStarted(step=step):
                dev.running.append(step)
            case StepDone(result=result):
                dev.done[result.step] = result
                dev.running = [s for s in dev.running if s != result.step]
            case StepFaulted(detail=detail):
                self._failed(dev, "sticky fault", detail)
            case WorkerCrashed(detail=detail):
                self._failed(dev, "worker crashed", detail)
            case OpenFailed(error=error):
                dev.error, dev.finished = error, True
            case Finished():
                dev.finished = True
            case Exited(code=code):
                self._failed(dev, "worker died", f"exit code {code}")

    def _watch(self) -> None:
        now = time.monotonic()
        for dev in self.devices.values():
            if dev.finished:
                continue
            if now - dev.started > self.request.device_timeout_s:
                _end(dev.proc)
                dev.error, dev.finished = f"device timed out after {self.request.device_timeout_s:g} s", True
            elif dev.info is None and now - dev.last_heard > self.request.startup_timeout_s:
                _end(dev.proc)
                self._failed(dev, "timeout", f"no answer within {self.request.startup_timeout_s:g} s of starting")
            elif dev.info is not None and now - dev.last_heard > self.request.probe_timeout_s:
                _end(dev.proc)
                self._failed(dev, "timeout", f"a probe did not finish within {self.request.probe_timeout_s:g} s")

    def _failed(self, dev: _Device, what: str, detail: str) -> None:
        running = dev.running
        if not running and dev.info is not None:
            # Between two steps (opened, the next not yet announced) the fault belongs to the next step.
            running = [s for s in self.steps if s not in dev.done][:1]
        where = running_steps(running) if running else "startup"
        dev.events.append({"what": what, "where": f"device {dev.index}, step {where}", "when": _now(),
                           "detail": detail})
        _wait(dev.proc)
        # A fault while steps shared rounds is none of theirs alone: it costs a restart, not an attempt, and
        # the next worker runs each step alone.
        step = running[0] if len(running) == 1 else None
        if len(running) <= 1:
            dev.attempts[where] += 1
        if step is not None and dev.attempts[where] >= GIVE_UP_AFTER_FAULTS:
            dev.done[step] = StepResult(step, None, {}, {}, f"{where}: gave up after {dev.attempts[where]} faults "
                                                            f"({what}: {detail})", 0.0)
        dev.restarts += 1
        if dev.restarts > self.request.max_restarts or (not running and dev.attempts[where] >= GIVE_UP_AFTER_FAULTS):
            done = dev.restarts - 1  # the restart just counted is the one not made
            dev.error = (f"gave up after {done} restart{'' if done == 1 else 's'}"
                         f"{' (--max-restarts 0)' if self.request.max_restarts == 0 else ''}; "
                         f"last: {what} in {where} ({detail})")
            dev.finished = True
            return
        self._start(dev)


def wait_for_exits(session: Session) -> None:
    """Until every worker the session's runs ended has exited: called before the report goes out, so that a
    job that starts after the check finds the GPU free (its contexts released), in an exclusive compute mode
    too."""
    while session.exiting:
        _wait(session.exiting.pop())
    mark("workers exited")


def _end(proc: head_start.Worker | None) -> None:
    """Kill a worker's process group (the worker and anything it started), if it is still running."""
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait(proc: head_start.Worker | None) -> None:
    """Reap a worker that has ended or is ending; one that will not is killed."""
    if proc is None:
        return
    try:
        proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        _end(proc)
        proc.wait()


def run_all(requests: list[RunRequest], progress: ProgressSink | None = None,
            wait_exits: bool = True, session: Session | None = None) -> tuple[DeviceReport, ...]:
    """Measure through each backend asked for; with several (``--backend all``), add cross-check rows.
    No backend available is exit 3, naming why each is missing. Workers the session's head start began are
    handed to the runs they belong to; any other is ended before anything is measured. Without
    ``wait_exits`` the caller calls wait_for_exits before its report goes out. ``session``: the run's
    (default: the one in progress on this thread)."""
    session = session if session is not None else sessions.current()
    started = {r.backend.name: head_start.claim(session, r.backend.name, early_devices(r))
               for r in requests if r.isolated and r.backend.primary_context}
    head_start.release(session)

    def measure(request: RunRequest, sink: ProgressSink | None) -> tuple[DeviceReport, ...]:
        return run(request, sink, started.get(request.backend.name), wait_exits=False, session=session)

    try:
        return (measure(requests[0], progress) if len(requests) == 1
                else with_cross_checks(run_concurrently(requests, measure, progress)))
    finally:
        if wait_exits:
            wait_for_exits(session)


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
