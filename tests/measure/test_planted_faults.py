"""The test-only faults the validation kernels can plant (--inject-fault march:SM:BYTE, sweep-hole:BYTES),
wired through the whole run: on a simulated device that models the planted kernels, the run names the SM,
the byte and both words and exits 1, and the sweep's hole is not monotone. On a GPU, tests/measure/test_gpu_detection.py
proves the same of the real kernels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from tests.conftest import run_cli_json


def test_a_planted_march_fault_and_sweep_hole_are_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", "h200", "--level", "full", "--inject-fault", "march:5:1000",
                                 "--inject-fault", "sweep-hole:65536"], tmp_path, capsys)
    dev = report["devices"][0]
    (failure,) = dev["measured"]["march"]["failures"]
    assert code == 1
    assert {k: failure[k] for k in ("sm_id", "first_bad_byte", "expected_word", "read_word", "bad_reads")} == \
        {"sm_id": 5, "first_bad_byte": 1000, "expected_word": 0, "read_word": 1, "bad_reads": 1}
    assert dev["measured"]["granule_sweep"]["failing_bytes"] == [65536]
    notes = {v["quantity"]: (v["verdict"], v["measured"], v["note"]) for v in dev["verdicts"]}
    assert notes["shared memory of SM 5 (march test)"][:2] == ("MISMATCH", "byte 1000: read 0x00000001, "
                                                                           "expected 0x00000000")
    assert notes["every 128 B multiple launches"][0] == "ERROR"
    assert "not monotone: failed at [65536] B" in notes["every 128 B multiple launches"][2]


def test_without_planted_faults_the_same_run_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", "h200", "--level", "full"], tmp_path, capsys)
    m = report["devices"][0]["measured"]
    assert code == 0 and m["march"]["failures"] == [] and m["granule_sweep"]["failing_bytes"] == []


@pytest.mark.parametrize(("args", "message"), [
    (["--inject-fault", "march:5:1000"], "--inject-fault march:5:1000: the validation kernels run at --level full only"),
    (["--level", "full", "--inject-fault", "march:5"], "march takes SM:BYTE, like march:5:1000"),
    (["--level", "full", "--inject-fault", "sweep-hole:0"], "the hole must be at a size of 1 B or more"),
    (["--level", "full", "--inject-fault", "sweep-hole:x"], "--inject-fault sweep-hole bytes must be a whole number"),
    (["--inject-fault", "no_such_step"], "--inject-fault no_such_step: no such step at --level standard"),
])
def test_a_malformed_planted_fault_is_refused(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--simulate", "h200", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err


def test_a_planted_fault_on_an_sm_the_device_lacks_is_an_error_not_a_pass(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", "h200", "--level", "full", "--inject-fault", "march:132:0"],
                                tmp_path, capsys)
    rows = [v for v in report["devices"][0]["verdicts"] if v["quantity"] == "step sm_march"]
    assert code == 4 and rows and "SM 132, byte 0 is outside the march (SMs 0..131" in rows[0]["note"]


def test_a_replay_takes_no_planted_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = tmp_path / "full.json"
    assert main(["--simulate", "h200", "--level", "full", "--json", str(full), "--quiet"]) == 0
    code, report = run_cli_json(["--simulate", str(full), "--level", "full", "--inject-fault", "march:5:1000"],
                                tmp_path, capsys, "replayed.json")
    assert code == 4 and json.dumps(report).count("no fault can be planted in it") >= 1
