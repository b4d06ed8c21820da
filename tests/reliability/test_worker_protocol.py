"""The worker and its supervisor: messages arrive whole and in order, a worker's progress is its
heartbeat even when the line does not change, and NVML is started once for every device."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import threading
import types

import pytest

from bisect_smem.app.run.messages import Channel, Finished, Progress, StepStarted, read_messages
from bisect_smem.app.run.subprocesses import python_environment
from bisect_smem.app.run.worker import CoalescedProgress
from bisect_smem.devices.attributes import read_nvml_all
from bisect_smem.experiments.ceilings import DefaultCeiling


def test_messages_arrive_in_order_and_a_cut_message_ends_the_stream() -> None:
    stream = io.BytesIO()
    channel = Channel(stream)
    sent = [Progress(0, "default_dynamic_ceiling: probe 1 at 4096 B"), StepStarted(0, DefaultCeiling()), Finished(0)]
    for message in sent:
        channel.put(message)
    whole = stream.getvalue()
    assert list(read_messages(io.BytesIO(whole))) == sent
    cut = whole + pickle.dumps(Finished(1))[:-3]  # a worker killed while writing its last message
    assert list(read_messages(io.BytesIO(cut))) == sent


class _Collect:
    def __init__(self) -> None:
        self.messages: list[Progress] = []
        self.sent = threading.Event()

    def put(self, message: Progress) -> None:
        self.messages.append(message)
        self.sent.set()


def test_the_latest_line_is_sent_and_the_same_line_again_is_a_heartbeat() -> None:
    out = _Collect()
    progress = CoalescedProgress(out, 3, 0.01)  # type: ignore[arg-type]
    try:
        for n in range(100):
            progress(f"probe {n}")
        assert out.sent.wait(5)
        assert out.messages[-1] == Progress(3, "probe 99")
        out.sent.clear()
        progress("probe 99")  # a long wait that says the same line again is still alive
        assert out.sent.wait(5)
        assert out.messages[-1] == Progress(3, "probe 99")
        out.sent.clear()
        assert not out.sent.wait(0.1)  # and a hung probe, which says nothing, sends nothing
    finally:
        progress.stop()


def test_nvml_is_started_once_for_every_device(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    handles = {"0000:00:06.0": "h0", "0000:00:07.0": "h1"}

    def call(name: str, value: object = None):
        def answer(*args: object) -> object:
            calls.append(name)
            return value(*args) if callable(value) else value
        return answer

    fake = types.SimpleNamespace(
        nvmlInit=call("init"), nvmlShutdown=call("shutdown"),
        nvmlSystemGetDriverVersion=call("driver", "580.159.04"), nvmlSystemGetCudaDriverVersion=call("cuda", 13000),
        nvmlDeviceGetHandleByPciBusId=call("handle", lambda bus: handles.get(bus)),
        nvmlDeviceGetUUID=call("uuid", lambda h: f"GPU-{h}"),
        nvmlDeviceGetPciInfo=call("pci", None), nvmlDeviceGetName=call("name", "NVIDIA H200"),
        nvmlDeviceGetVirtualizationMode=call("mode", 1), nvmlDeviceGetMigMode=call("mig", (0, 0)))
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    infos = read_nvml_all(["0000:00:06.0", "0000:00:07.0", None])
    assert calls.count("init") == 1 and calls.count("shutdown") == 1
    assert [i.uuid for i in infos] == ["GPU-h0", "GPU-h1", None]
    assert infos[1].virtualization_mode == "passthrough" and infos[0].driver_version == "580.159.04"
    assert infos[2].error == "no NVML device for PCI bus id None"


def test_the_worker_entry_point_starts_the_context_before_loading_the_measurement() -> None:
    # What loads with the entry point, before main() runs, is all a real device waits for before its
    # context starts: the driver binding, and none of the backends, the experiments or CuPy.
    code = "import sys, bisect_smem.app.run.worker_process; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env=python_environment()).stdout.split()
    ours = [m for m in loaded if m.startswith("bisect_smem.")]
    assert "bisect_smem.devices.backends.libcuda" in ours
    assert not [m for m in ours if m.split(".")[1] in ("experiments", "analysis")] + [
        m for m in ours if m.startswith(("bisect_smem.devices.backends.", "bisect_smem.app.run.worker"))
        and m not in ("bisect_smem.devices.backends.libcuda", "bisect_smem.app.run.worker_process")]
    assert "cupy" not in loaded and "numpy" not in loaded
