"""The leftover writer handed to the experiments from the app layer: its typed request and answer travel
as JSON, the experiment reads what the handed-in writer wrote, and the writer process's failure is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bisect_smem.app.run import leftover_writer
from bisect_smem.app.run.leftover_writer import WriteAnswer, WriteRequest, write_elsewhere
from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.devices.backends.base import DeviceAddress
from bisect_smem.devices.backends.sim.backend import SimBackend
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.probes import LeftoverOutcome, Outcome
from bisect_smem.experiments.validation import LEFTOVER_THREADS, Validation

H200_SMS = 132


def session(text: str = "h200"):
    return SimBackend((SimSpec.parse(text),)).open(0, (0,))


def test_the_writer_request_and_answer_travel_as_json() -> None:
    request = WriteRequest(DeviceAddress("sim", 0, "h200,leak=yes"), (0, 1024), 4096, 512, 132, 1 << 63)
    assert WriteRequest.from_json(request.to_json()) == request
    answer = WriteAnswer.of(LeftoverOutcome(Outcome.OK, "", (0, 1, 2), 1024))
    assert json.loads(answer.to_json()) == {"outcome": "ok", "detail": "", "sm_ids": [0, 1, 2], "words": 1024}
    assert WriteAnswer.from_json(answer.to_json()).leftover_outcome() == LeftoverOutcome(Outcome.OK, "", (0, 1, 2), 1024)


def test_the_experiment_reads_what_the_handed_in_writer_wrote() -> None:
    # The sim device keeps a leaking writer's pattern for the next session: a writer in this process is
    # enough to show the experiment reads exactly what its writer wrote, with the nonce it chose.
    calls: list[tuple[int, int, int]] = []

    def writer(dynamic_bytes: int, blocks: int, nonce: int) -> LeftoverOutcome:
        calls.append((dynamic_bytes, blocks, nonce))
        other = session("h200,leak=yes")
        try:
            return other.leftover_write(dynamic_bytes, LEFTOVER_THREADS, blocks, nonce)
        finally:
            other.close()

    left = Validation(session("h200,leak=yes"), H200_SMS, lambda _t: None, writer).leftovers(4099)
    assert calls and calls[0][:2] == (4096, H200_SMS)
    assert left.across_processes_words_matching == left.across_processes_words_read == H200_SMS * 1024
    assert left.writer_sms == left.reader_sms == H200_SMS


def test_a_writer_that_did_not_run_is_a_fault_and_none_is_an_error() -> None:
    def refused(_d: int, _b: int, _n: int) -> LeftoverOutcome:
        return LeftoverOutcome(Outcome.OTHER, "too many resources")

    with pytest.raises(ProbeFault, match="another process writing the leftover pattern"):
        Validation(session(), H200_SMS, lambda _t: None, refused).leftovers(4096)
    with pytest.raises(MeasurementError, match="needs a writer in another process"):
        Validation(session(), H200_SMS, lambda _t: None).leftovers(4096)


def test_the_writer_process_runs_and_its_failure_is_one_line(tmp_path: Path) -> None:
    lines: list[str] = []
    write = write_elsewhere(session("h200,leak=no"), (0,), lines.append)
    wrote = write(4096, H200_SMS, 7)
    assert wrote.outcome is Outcome.OK and len(set(wrote.sm_ids)) == H200_SMS and lines

    class Unopenable:
        def address(self) -> DeviceAddress:
            return DeviceAddress("sim", 0, "no-such-gpu")

    broken = write_elsewhere(Unopenable(), (0,), lines.append)  # type: ignore[arg-type]
    with pytest.raises(MeasurementError, match=r"^the writer process failed \(exit 1\): .*no-such-gpu"):
        broken(4096, H200_SMS, 7)


class _Stop(BaseException):
    """What the tool's SIGTERM handler raises where the program is."""


def test_a_signal_while_the_writer_starts_still_ends_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    # SIGTERM lands inside Popen, after the fork: its exception leaves no Popen to end the writer with, so
    # the writer would live on unless the start itself ends it.
    started: list[subprocess.Popen[bytes]] = []

    class SignalledPopen(subprocess.Popen):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here, still inside Popen

    def stop(_signum: int, _frame: object) -> None:
        raise _Stop

    monkeypatch.setattr(leftover_writer, "python_command", lambda *_: ["sleep", "30"])
    monkeypatch.setattr(leftover_writer.subprocess, "Popen", SignalledPopen)
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        request = WriteRequest(DeviceAddress("sim", 0, "h200"), (0,), 4096, 512, 132, 1)
        with pytest.raises(_Stop):
            leftover_writer._run_writer(request, lambda _text: None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(started) == 1 and started[0].poll() is not None, "the writer outlived the signal"
