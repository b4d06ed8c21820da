"""The body of a worker process, and the messages it sends its supervisor: small frozen dataclasses.

A worker opens one device, runs the steps not done yet and streams each finished one back. A fault
that poisons the CUDA context ends the worker (the supervisor starts a new one); a bug is reported
before the worker ends. Workers leave without CUDA's teardown: the parent has all it needs by then.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bisect_smem.analysis.device_report import build_report
from bisect_smem.app.leftover_writer import write_elsewhere
from bisect_smem.app.requests import RunRequest
from bisect_smem.core.attributes import NvmlInfo
from bisect_smem.core.errors import BisectSmemError, ProbeFault
from bisect_smem.core.model import DeviceReport
from bisect_smem.devices.device_info import DeviceInfo, open_device
from bisect_smem.experiments.measure import DeviceMeasurement
from bisect_smem.experiments.plan import plan_steps
from bisect_smem.experiments.steps import Done, Step, StepResult


@dataclass(frozen=True)
class Opened:
    """The device opened: what it reports about itself."""

    index: int
    info: DeviceInfo


@dataclass(frozen=True)
class OpenFailed:
    """The device could not be opened (compile, load or driver failure)."""

    index: int
    error: str


@dataclass(frozen=True)
class NvmlRead:
    """NVML's view of the device, read beside the measurement."""

    index: int
    nvml: NvmlInfo


@dataclass(frozen=True)
class Progress:
    """A line for the progress display."""

    index: int
    text: str


@dataclass(frozen=True)
class StepStarted:
    """The worker began a step: a hang from here on is this step's."""

    index: int
    step: Step


@dataclass(frozen=True)
class StepDone:
    """A step finished (possibly with its own error)."""

    index: int
    result: StepResult


@dataclass(frozen=True)
class StepFaulted:
    """A sticky fault: the context is lost and the worker ends."""

    index: int
    step: Step
    detail: str


@dataclass(frozen=True)
class WorkerCrashed:
    """An exception that is not a GPU fault: a bug, reported before the worker ends."""

    index: int
    step: Step
    detail: str


@dataclass(frozen=True)
class Finished:
    """Every step is done."""

    index: int


Message = Opened | OpenFailed | NvmlRead | Progress | StepStarted | StepDone | StepFaulted | WorkerCrashed | Finished


def worker_main(out: Any, request: RunRequest, index: int, done: Done, steps: list[Step],
                inject: str | None) -> None:
    """Open the device, run the steps not yet done, stream each one back, then leave."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends its workers
    try:
        session, info = open_device(request.backend, index, request.config.static_sizes, nvml=False,
                                    step_kinds=frozenset(step.kind for step in steps))
    except BisectSmemError as exc:
        out.put(OpenFailed(index, str(exc)))
        return
    out.put(Opened(index, info))
    # NVML answers slowly on some systems; it runs beside the measurement and reports when done.
    nvml = threading.Thread(target=lambda: out.put(NvmlRead(index, session.nvml_info())), daemon=True)
    nvml.start()
    progress = lambda text: out.put(Progress(index, text))  # noqa: E731
    measurement = DeviceMeasurement.for_device(session, info, request.config, progress,
                                               write_elsewhere(session, request.config.static_sizes, progress))
    started: list[Step] = []

    def starting(step: Step) -> None:
        started.append(step)
        out.put(StepStarted(index, step))
        if step.key == inject:
            session.inject_illegal_access()

    try:
        for _step, result in measurement.each_step(steps, dict(done), starting):
            out.put(StepDone(index, result))
    except ProbeFault as fault:
        out.put(StepFaulted(index, started[-1], str(fault)))
        leave(out, 3)  # the context is poisoned
    except Exception as exc:  # a bug, not a GPU fault: say what it was before the worker ends
        out.put(WorkerCrashed(index, started[-1], f"{type(exc).__name__}: {exc}"))
        leave(out, 1)
    nvml.join(timeout=30)
    out.put(Finished(index))
    leave(out, 0)


def measure_in_process(request: RunRequest, index: int, progress: Callable[[str], None]) -> DeviceReport:
    """The whole device in this process, with no restarts: a sticky fault ends the measurement."""
    start = time.perf_counter()
    name = request.backend.name
    steps = planned_steps(request)
    try:
        session, info = open_device(request.backend, index, request.config.static_sizes,
                                    step_kinds=frozenset(step.kind for step in steps))
    except BisectSmemError as exc:
        return build_report(index, name, None, {}, [], str(exc), time.perf_counter() - start)
    writer = write_elsewhere(session, request.config.static_sizes, progress)
    try:
        done, error = DeviceMeasurement.for_device(session, info, request.config, progress, writer).run(steps)
    finally:
        session.close()
    return build_report(index, name, info, done, [], error, time.perf_counter() - start, steps,
                        request.config.level)


def planned_steps(request: RunRequest) -> list[Step]:
    """The steps to run, in order, for what the request's backend can measure."""
    return plan_steps(request.config, request.backend.supported_steps)


def leave(out: Any, code: int) -> None:
    """Flush the queue and exit without CUDA's teardown: the parent has everything it needs."""
    out.close()
    out.join_thread()
    os._exit(code)
