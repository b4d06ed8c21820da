"""The body of a worker process: open one device, run the steps not done yet, and stream each finished one
to the supervisor (the messages are in messages.py; the process's entry point is worker_process.py).

A fault that poisons the CUDA context ends the worker (the supervisor starts a new one); a bug is reported
before the worker ends. Workers leave without CUDA's teardown: the parent has all it needs by then.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
from typing import BinaryIO, NoReturn

from bisect_smem.app.run.leftover_writer import write_elsewhere
from bisect_smem.app.run.messages import (
    Channel,
    Finished,
    Opened,
    OpenFailed,
    Progress,
    StepDone,
    StepFaulted,
    StepStarted,
    WorkerCrashed,
    WorkerJob,
)
from bisect_smem.app.run.requests import RunRequest
from bisect_smem.app.run.timeline import mark
from bisect_smem.core.errors import BisectSmemError, ProbeFault
from bisect_smem.devices.backends.families import inject_illegal_access
from bisect_smem.devices.backends.table import get_backend
from bisect_smem.devices.device_info import open_device
from bisect_smem.experiments.measure import DeviceMeasurement
from bisect_smem.experiments.plan import plan_steps
from bisect_smem.experiments.steps import Step

PROGRESS_INTERVAL_S = 0.05  # how often the latest progress line goes to the supervisor, at most


def serve_stdin(messages: BinaryIO, preload: str | None) -> int:
    """A started worker's life once its modules are loaded: the backend ``preload`` loaded (its library), the
    job read from stdin and served, answering on ``messages``. 0 also where no job comes (the run ended, or
    wanted no worker after all)."""
    if preload is not None:
        get_backend(preload).preload()
    try:
        job = pickle.load(sys.stdin.buffer)
    except EOFError:
        return 0
    mark("job received")
    serve(job, Channel(messages))
    return 0


def serve(job: WorkerJob, out: Channel) -> None:
    """Open the device, run the steps not yet done, stream each one back, then leave."""
    request, index = job.request, job.index
    try:
        session, info = open_device(request.backend, index, request.config.static_sizes,
                                    nvml=not request.backend.nvml_from_host,
                                    step_kinds=frozenset(step.kind for step in job.steps))
    except BisectSmemError as exc:
        out.put(OpenFailed(index, str(exc)))
        leave(out, 0)
    out.put(Opened(index, info))
    mark("device opened")
    progress = CoalescedProgress(out, index, min(PROGRESS_INTERVAL_S, request.probe_timeout_s / 4))
    measurement = DeviceMeasurement.for_device(session, info, request.config, progress,
                                               write_elsewhere(session, request.config.static_sizes, progress))
    started: list[Step] = []

    def starting(step: Step) -> None:
        if not started:
            mark("first step")
        started.append(step)
        out.put(StepStarted(index, step))
        if step.key == job.inject:
            inject_illegal_access(session, request.backend.name)

    try:
        for _step, result in measurement.each_step(job.steps, dict(job.done), starting,
                                                   lambda step: not job.alone and step.key != job.inject):
            out.put(StepDone(index, result))
    except ProbeFault as fault:
        out.put(StepFaulted(index, started[-1], str(fault)))
        leave(out, 3)  # the context is poisoned
    except Exception as exc:  # a bug, not a GPU fault: say what it was before the worker ends
        out.put(WorkerCrashed(index, started[-1], f"{type(exc).__name__}: {exc}"))
        leave(out, 1)
    mark("steps done")
    progress.stop()
    out.put(Finished(index))
    leave(out, 0)


class CoalescedProgress:
    """The worker's progress sink: every call is kept, and the latest line goes to the supervisor at most
    every ``interval_s``, from a thread of its own, so that a probe costs no message of its own. A call
    with the same text still counts: it is the heartbeat that tells a long wait from a hung probe, and a
    hung probe makes no calls, so its last line is sent and then nothing, until the timeout."""

    def __init__(self, out: Channel, index: int, interval_s: float) -> None:
        self.out, self.index, self.interval_s = out, index, interval_s
        self.latest: tuple[int, str] = (0, "")  # (calls so far, the last line): replaced whole, read whole
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()

    def __call__(self, text: str) -> None:
        """The device is now doing ``text``."""
        self.latest = (self.latest[0] + 1, text)

    def _send(self) -> None:
        sent = 0
        while not self.stopped.wait(self.interval_s):
            calls, text = self.latest
            if calls != sent:
                self.out.put(Progress(self.index, text))
                sent = calls

    def stop(self) -> None:
        """No more lines."""
        self.stopped.set()
        self.thread.join(timeout=1)


def planned_steps(request: RunRequest) -> list[Step]:
    """The steps to run, in order, for what the request's backend can measure."""
    return plan_steps(request.config, request.backend.session_type)


def leave(out: Channel, code: int) -> NoReturn:
    """Flush the channel and exit without CUDA's teardown: the parent has everything it needs."""
    out.close()
    os._exit(code)
