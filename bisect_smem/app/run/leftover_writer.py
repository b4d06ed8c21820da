"""The leftover writer: another process that fills every SM's shared memory and exits, so that the
leftover experiment can read what a process that ended left behind.

``write_elsewhere`` builds the callable experiments/validation.py is handed; it runs
``python -m bisect_smem.app.run.leftover_writer REQUEST_JSON`` as a fresh process (a new CUDA context),
waits for it, and reads its answer. The request and the answer are frozen dataclasses, as JSON; the answer
and the writer's errors come back through files without a name (O_TMPFILE), so that a run ended by a
signal or a kill, here or in the writer, leaves nothing behind in the temporary folder.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import IO, Any

from bisect_smem.app.run.subprocesses import python_command, python_environment
from bisect_smem.core.errors import MeasurementError
from bisect_smem.core.frozen import frozen
from bisect_smem.devices.backends.base import DeviceAddress, DeviceSession
from bisect_smem.devices.backends.table import open_address
from bisect_smem.devices.probes import LeftoverOutcome, Outcome
from bisect_smem.experiments.validation import LEFTOVER_THREADS, WriteElsewhere

WRITER_TIMEOUT_S = 120.0
WRITER_MODULE = "bisect_smem.app.run.leftover_writer"
POLL_S = 0.05
PR_SET_PDEATHSIG = 1  # prctl(2)


@frozen
class WriteRequest:
    """What the writer process is asked: which device, which kernels to load, and what to write."""

    address: DeviceAddress
    static_sizes: tuple[int, ...]
    dynamic_bytes: int
    threads: int
    blocks: int
    nonce: int
    parent_pid: int = 0  # the process that waits for the writer: the writer does not outlive it

    def to_json(self) -> str:
        """The request as one JSON text (an argument of the writer's command line)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WriteRequest:
        """The request ``to_json`` wrote."""
        data = json.loads(text)
        return cls(**{**data, "address": DeviceAddress(**data["address"]),
                      "static_sizes": tuple(data["static_sizes"])})


@frozen
class WriteAnswer:
    """What the writer process ran: the launch's outcome class, its detail, the SMs written and the words."""

    outcome: str
    detail: str
    sm_ids: tuple[int, ...]
    words: int

    @classmethod
    def of(cls, outcome: LeftoverOutcome) -> WriteAnswer:
        """The answer for one leftover-write launch."""
        return cls(outcome.outcome.value, outcome.detail, outcome.sm_ids, outcome.words)

    def leftover_outcome(self) -> LeftoverOutcome:
        """The launch as the experiment sees it."""
        return LeftoverOutcome(Outcome(self.outcome), self.detail, self.sm_ids, self.words)

    def to_json(self) -> str:
        """The answer as one JSON text."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WriteAnswer:
        """The answer ``to_json`` wrote."""
        data: dict[str, Any] = json.loads(text)
        return cls(**{**data, "sm_ids": tuple(data["sm_ids"])})


def write_elsewhere(session: DeviceSession, static_sizes: tuple[int, ...],
                    progress: Callable[[str], None]) -> WriteElsewhere:
    """The leftover experiment's writer: each call runs one writer process on ``session``'s device
    (asked for its address only then: only the backends that validate have one)."""

    def write(dynamic_bytes: int, blocks: int, nonce: int) -> LeftoverOutcome:
        request = WriteRequest(session.address(), static_sizes, dynamic_bytes, LEFTOVER_THREADS, blocks, nonce,
                               os.getpid())
        return _run_writer(request, progress)

    return write


def _run_writer(request: WriteRequest, progress: Callable[[str], None]) -> LeftoverOutcome:
    """Start the writer process, wait for it to exit (or kill it after WRITER_TIMEOUT_S), read its answer."""
    # Files without a name: not a pipe, which the writer could fill while this side polls.
    with tempfile.TemporaryFile() as answer, tempfile.TemporaryFile() as errors:
        proc = _start(request, answer, errors)
        _wait(proc, request, progress)
        answer.seek(0)
        errors.seek(0)
        said, complaint = answer.read().decode(errors="replace"), errors.read().decode(errors="replace").strip()
    lines = said.strip().splitlines()
    if proc.returncode != 0 or not lines:
        last = complaint.splitlines()[-1] if complaint else "no output"
        raise MeasurementError(f"the writer process failed (exit {proc.returncode}): {last}")
    return WriteAnswer.from_json(lines[-1]).leftover_outcome()


def _start(request: WriteRequest, answer: IO[bytes], errors: IO[bytes]) -> subprocess.Popen[bytes]:
    """The writer process, made in two steps: a signal raised inside Popen after the fork (as a SIGTERM
    handler raises where the program is) leaves no object to end the writer with, so it is ended here."""
    proc = subprocess.Popen.__new__(subprocess.Popen)
    try:
        proc.__init__(python_command(WRITER_MODULE, request.to_json()), env=python_environment(),
                      stdin=subprocess.DEVNULL, stdout=answer, stderr=errors)
    except BaseException:
        _end(proc)
        raise
    return proc


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill the writer and reap it, if it was started and is still running."""
    if getattr(proc, "pid", None) is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def _wait(proc: subprocess.Popen[bytes], request: WriteRequest, progress: Callable[[str], None]) -> None:
    """Wait for the writer, or kill it after WRITER_TIMEOUT_S, or when this wait ends any other way."""
    start = time.monotonic()
    try:
        while proc.poll() is None:
            # Progress keeps the supervisor from taking the wait for a hung probe.
            progress(f"leftovers: another process writes {request.blocks} SMs")
            if time.monotonic() - start > WRITER_TIMEOUT_S:
                raise MeasurementError(f"the writer process did not finish within {WRITER_TIMEOUT_S:g} s")
            time.sleep(POLL_S)
    finally:  # a timeout, Ctrl-C or SIGTERM: the writer ends with the wait for it
        _end(proc)


def end_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` ends (Linux), however it ends: a signal that
    reaches the parent while it starts the writer, before it can end the writer itself, ends both. If the
    parent has already ended, leave at once."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's own cleanup is all there is
        pass
    if parent and os.getppid() != parent:
        os._exit(1)


def main(argv: list[str]) -> int:
    """The writer process: open the device anew, fill every SM's shared memory, record what ran, close
    it. An exception's traceback on stderr is the failure its parent reports."""
    request = WriteRequest.from_json(argv[0])
    end_with(request.parent_pid)
    session = open_address(request.address, request.static_sizes)
    try:
        outcome = session.leftover_write(request.dynamic_bytes, request.threads, request.blocks, request.nonce)
    finally:
        session.close()
    print(WriteAnswer.of(outcome).to_json(), flush=True)  # the last line of stdout is the answer
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
