"""What a worker process and its supervisor say to each other: small frozen dataclasses, pickled one after
another over a pipe, and the job a worker is started with.

The supervisor writes one ``WorkerJob`` to the worker's stdin; the worker answers on its stdout, which it
keeps for these messages alone (anything a library prints goes to stderr). ``Channel`` is the worker's
writing end, ``read_messages`` the supervisor's reading end; a worker that dies mid-message ends the
stream there.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import IO

from bisect_smem.app.run.requests import RunRequest
from bisect_smem.core.frozen import frozen
from bisect_smem.devices.device_info import DeviceInfo
from bisect_smem.experiments.steps import Done, Step, StepResult


@frozen
class WorkerJob:
    """What one worker measures: the request, its device, the steps done by earlier workers (skipped), the
    planned steps, a step whose first attempt makes a real illegal access (test only, run alone), and
    whether every step runs alone (after a fault, so that the next one is one step's)."""

    request: RunRequest
    index: int
    done: Done
    steps: list[Step]
    inject: str | None = None
    alone: bool = False


@frozen
class WorkerMessage:
    """What every message says first: the device it is about (one worker per device)."""

    index: int


@frozen
class Opened(WorkerMessage):
    """The device opened: what it reports about itself."""

    info: DeviceInfo


@frozen
class OpenFailed(WorkerMessage):
    """The device could not be opened (compile, load or driver failure)."""

    error: str


@frozen
class Progress(WorkerMessage):
    """A line for the progress display."""

    text: str


@frozen
class StepStarted(WorkerMessage):
    """The worker began a step: a hang from here on is this step's."""

    step: Step


@frozen
class StepDone(WorkerMessage):
    """A step finished (possibly with its own error)."""

    result: StepResult


@frozen
class StepStopped(WorkerMessage):
    """A step ended the worker: the step it was in, and why."""

    step: Step
    detail: str


@frozen
class StepFaulted(StepStopped):
    """A sticky fault: the context is lost and the worker ends."""


@frozen
class WorkerCrashed(StepStopped):
    """An exception that is not a GPU fault: a bug, reported before the worker ends."""


@frozen
class Finished(WorkerMessage):
    """Every step is done."""


@frozen
class Exited(WorkerMessage):
    """The worker's stream ended and its process exited with ``code`` (negative: ended by that signal)."""

    code: int | None


Message = WorkerMessage  # the supervisor matches each on its type


class Channel:
    """The worker's end: each message pickled whole and flushed, one writer at a time."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def put(self, message: Message) -> None:
        """Send one message; it is in the pipe when this returns."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self.lock:
            self.stream.write(data)
            self.stream.flush()

    def close(self) -> None:
        """Flush what is left; the supervisor sees the stream end when the process exits."""
        with self.lock:
            self.stream.flush()


def read_messages(stream: IO[bytes]) -> Iterator[Message]:
    """Every message on ``stream``, in order, until it ends (a message cut short by a dying worker ends it)."""
    while True:
        try:
            yield pickle.load(stream)
        except (EOFError, pickle.UnpicklingError, ValueError, OSError):
            return
