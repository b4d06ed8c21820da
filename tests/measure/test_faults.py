"""Faults, injected and real: the run finishes, the fault is reported, and nothing wrong is a match."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.core.profiles import find_profile
from tests.conftest import run_cli_json
from tests.paths import ROOT

H200 = find_profile("h200")


run = run_cli_json


def true_value(quantity: str) -> int | None:
    """What a healthy H200 row must say, from the published numbers and the 16-byte static alignment."""
    if quantity == "default dynamic ceiling (no opt-in)":
        return 49152
    if quantity == "opt-in attribute accepts up to":
        return H200.max_smem_per_block_optin_bytes
    if quantity.startswith("opt-in dynamic ceiling, "):
        static = int(quantity.split(", ")[1].split(" B")[0])
        return H200.max_smem_per_block_optin_bytes - -(-static // 16) * 16
    return None


def assert_no_wrong_match(dev: dict) -> None:
    for row in dev["verdicts"]:
        truth = true_value(row["quantity"])
        if row["verdict"] == "match" and truth is not None:
            assert row["measured"] == truth, row


def test_an_injected_sticky_fault_resumes_with_exact_results(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # No probe of a loaded machine meets a 600 s timeout: the one fault is the injected one.
    code, report = run(["--simulate", "h200", "--inject-fault", "static_split:0:128", "--probe-timeout", "600"],
                       tmp_path, capsys)
    (dev,) = report["devices"]
    assert code == 0, dev["error"]
    (event,) = dev["events"]
    assert event["what"] == "sticky fault" and event["where"] == "device 0, step static_split:0:128"
    assert "illegal_address" in event["detail"] and event["when"].endswith("+00:00")
    assert dev["measured"]["optin_dynamic_ceiling_bytes"] == 232448
    assert_no_wrong_match(dev)


def test_a_sticky_region_is_reported_and_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Bounded by its restarts (the events and the error count them), not by a time a loaded machine may pass.
    code, report = run(["--simulate", "h200,sticky=200000", "--max-restarts", "3", "--probe-timeout", "600"],
                       tmp_path, capsys)
    (dev,) = report["devices"]
    assert code == 4
    assert len(dev["events"]) == 4 and all(e["what"] == "sticky fault" for e in dev["events"])
    assert "gave up after 3 restarts" in dev["error"]
    assert dev["measured"]["default_dynamic_ceiling_bytes"] == 49152  # measured before the fault region
    assert any(v["verdict"] == "ERROR" for v in dev["verdicts"])
    assert_no_wrong_match(dev)


def test_a_hang_is_a_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run(["--simulate", "h200,hang=200000", "--probe-timeout", "0.5", "--max-restarts", "1"],
                       tmp_path, capsys)
    (dev,) = report["devices"]
    assert code == 4
    # the given timeout, not the default 5 s, ended them (whichever step met it on a loaded machine)
    assert [e["what"] for e in dev["events"]] == ["timeout", "timeout"]
    assert all("did not finish within 0.5 s" in e["detail"] for e in dev["events"])
    assert_no_wrong_match(dev)


def test_a_failing_device_does_not_sink_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A sticky fault fails its device at once; the probe timeout, which applies to every device, is long
    # enough that the healthy one never meets it on a loaded machine.
    code, report = run(["--simulate", "h200,sticky=200000", "--simulate", "a100", "--probe-timeout", "600",
                        "--max-restarts", "0"], tmp_path, capsys)
    bad, good = report["devices"]
    assert code == 4
    assert bad["error"] and good["error"] is None
    assert good["measured"]["optin_dynamic_ceiling_bytes"] == 166912
    assert {v["verdict"] for v in good["verdicts"]} <= {"match", "info"}


@pytest.mark.parametrize("seed", range(4))
def test_flaky_answers_are_unstable_never_a_wrong_match(seed: int, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run(["--simulate", f"h200,flaky=0.3,seed={seed}"], tmp_path, capsys)
    (dev,) = report["devices"]
    assert_no_wrong_match(dev)
    notes = [v["note"] for v in dev["verdicts"] if v["verdict"] == "ERROR"]
    assert code in (1, 4) and notes, "a 30% flaky boundary must be seen"
    assert any(n.startswith("unstable: ") or "not monotone" in n for n in notes)


def test_more_confirmations_catch_more_flakiness(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, two = run(["--simulate", "h200,flaky=0.1,seed=7", "--confirm", "2"], tmp_path, capsys)
    _, six = run(["--simulate", "h200,flaky=0.1,seed=7", "--confirm", "6"], tmp_path, capsys)

    def errors(report: dict) -> int:
        return sum(v["verdict"] == "ERROR" for v in report["devices"][0]["verdicts"])

    assert errors(six) >= errors(two)
    assert_no_wrong_match(six["devices"][0])


def test_a_hole_on_the_spot_check_is_not_monotone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The default search's spot check lands at 3/4 of the 48 KB ceiling.
    code, report = run(["--simulate", "h200,hole=36864"], tmp_path, capsys)
    (dev,) = report["devices"]
    row = next(v for v in dev["verdicts"] if v["quantity"] == "default dynamic ceiling (no opt-in)")
    assert code == 4 and row["verdict"] == "ERROR" and "not monotone: failed at [36864]" in row["note"]


def test_a_hole_the_search_never_probes_leaves_the_ceiling_right(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run(["--simulate", "h200,hole=1000"], tmp_path, capsys)
    (dev,) = report["devices"]
    assert dev["measured"]["default_dynamic_ceiling_bytes"] == 49152
    assert_no_wrong_match(dev)


@pytest.mark.parametrize("spec, message", [
    ("h200,flaky", "'flaky' is not KEY=VALUE"),
    ("h200,flaky=2", "flaky must be in 0..1 (got 2.0)"),
    ("h200,hole=abc", "--simulate hole must be a byte count"),
    ("h200,wobble=3", "'wobble=3' is not KEY=VALUE"),
    ("h200,seed=x", "seed a whole number"),
])
def test_malformed_fault_specs_are_exit_2(spec: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--simulate", spec]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_ctrl_c_stops_every_worker_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "bisect_smem", "--simulate", "h200,hang=200000",
                             "--simulate", "h200,hang=200000", "--probe-timeout", "60", "--json", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "error: interrupted; no report was written"
    assert "Traceback" not in stderr
    assert list(tmp_path.iterdir()) == []


def test_no_visible_device_is_exit_3(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.devices.backends.cupy import backend as cupy_backend

    class NoDevices:
        def device_count(self) -> int:
            return 0

        def driver_version(self) -> int:
            return 13000

    monkeypatch.setattr(cupy_backend, "libcuda", lambda: NoDevices())
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert cli.main([]) == 3
    assert "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)" in capsys.readouterr().err


def test_a_driver_older_than_cupy_is_exit_3(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.devices.backends.cupy import backend as cupy_backend

    class OldDriver:
        def device_count(self) -> int:
            return 1

        def driver_version(self) -> int:
            return 12040

    monkeypatch.setattr(cupy_backend, "libcuda", lambda: OldDriver())
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(cupy_backend, "cupy_cuda_major", lambda: 13)
    assert cli.main([]) == 3
    err = capsys.readouterr().err.strip()
    assert err == ("error: no usable GPU: the driver supports CUDA 12.4, but CuPy was built for CUDA 13: update the "
                   "driver or install the cuda12 extra (cupy-cuda12x); try --simulate h200 to run on a simulated device")


def test_workers_start_for_the_likely_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_smem.app.run.requests import build_request
    from bisect_smem.app.run.runner import early_devices

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert early_devices(build_request("cupy")) == (0, 1)
    assert early_devices(build_request("cupy", devices=(1,))) == (1,)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert early_devices(build_request("cupy")) == (0,)
    assert early_devices(build_request(None, ["h200"] * 3)) == (0, 1, 2)


def test_cupys_cuda_major_is_read_from_its_dist_info_folder(tmp_path: Path) -> None:
    from bisect_smem.devices.backends.cupy.backend import cupy_cuda_major

    (tmp_path / "numpy-2.0.0.dist-info").mkdir()
    assert cupy_cuda_major([str(tmp_path / "missing"), str(tmp_path)]) is None
    (tmp_path / "cupy_cuda12x-13.6.0.dist-info").mkdir()
    assert cupy_cuda_major([str(tmp_path)]) == 12


def test_a_fault_injected_on_one_device_leaves_every_result_exact(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.core.quantities import json_quantities

    _, clean = run(["--simulate", "h200", "--simulate", "h200"], tmp_path, capsys, "clean.json")
    code, faulted = run(["--simulate", "h200", "--simulate", "h200", "--inject-fault", "static_split:0:128@1"],
                        tmp_path, capsys, "faulted.json")
    first, second = faulted["devices"]
    assert code == 0 and first["events"] == [] and first["error"] is None and second["error"] is None
    (event,) = second["events"]
    assert event["what"] == "sticky fault" and event["where"] == "device 1, step static_split:0:128"
    for before, after in zip(clean["devices"], faulted["devices"], strict=True):
        assert json_quantities(after) == json_quantities(before)
    assert cli.main(["merge", str(tmp_path / "faulted.json")]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Simulated sm_90")]
    assert re.split(r"\s{2,}", row)[2:] == ["sim", "2", "49152", "232448", "233472", "none"]


def test_an_injected_fault_names_its_step_and_may_name_its_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--simulate", "h200", "--inject-fault", "static_split:0:128@x"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "STEP@DEVICE" in err, err
