"""A replay answers only what its report measured: a quantity the report lacks, or failed to measure,
stays missing or failed, the device's own error is kept, and the validation (march, sweep, leftovers)
replays as recorded, failures included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from tests.conftest import run_cli_json
from tests.paths import H200_FULL, H200_REPORT


def errors(dev: dict) -> list[str]:
    return sorted(v["quantity"] for v in dev["verdicts"] if v["verdict"] == "ERROR")


def test_replaying_an_incomplete_report_stays_incomplete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, original = run_cli_json(["--simulate", "h200,sticky=200000"], tmp_path, capsys, "s.json")
    dev = original["devices"][0]
    assert code == 4 and dev["error"] and errors(dev)
    code, replayed = run_cli_json(["--simulate", str(tmp_path / "s.json")], tmp_path, capsys, "replayed.json")
    again = replayed["devices"][0]
    assert code == 4
    assert set(errors(dev)) <= set(errors(again))  # every failed quantity is still failed
    assert not [v for v in again["verdicts"] if v["quantity"] in errors(dev) and v["verdict"] == "match"]
    assert f"the replayed device's error: {dev['error']}" in again["error"]
    assert again["context"]["replayed_error"] == dev["error"]


@pytest.mark.parametrize("missing", ["residency", "carveout", "clusters", "static_splits"])
def test_what_the_report_lacks_is_not_filled_in_from_the_model(missing: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(H200_REPORT.read_text())
    doc["devices"][0]["measured"][missing] = []
    path = tmp_path / "lacking.json"
    path.write_text(json.dumps(doc))
    code, replayed = run_cli_json(["--simulate", str(path)], tmp_path, capsys, "replayed.json")
    dev = replayed["devices"][0]
    assert code == 4 and errors(dev), missing
    assert dev["measured"][missing] in ([], None) or missing == "static_splits"
    if missing == "static_splits":
        assert all(s["dynamic_ceiling_bytes"] is None for s in dev["measured"]["static_splits"])


def test_a_quick_report_replayed_at_standard_measures_no_more(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    run_cli_json(["--simulate", "h200", "--level", "quick"], tmp_path, capsys, "quick.json")
    code, replayed = run_cli_json(["--simulate", str(tmp_path / "quick.json")], tmp_path, capsys, "again.json")
    m = replayed["devices"][0]["measured"]
    assert code == 4 and m["residency"] == [] and m["carveout"] == [] and m["smem_per_sm_bytes"] is None


def test_the_real_full_report_replays_its_validation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = json.loads(H200_FULL.read_text())["devices"][0]["measured"]
    code, replayed = run_cli_json(["--simulate", str(H200_FULL), "--level", "full"], tmp_path, capsys)
    m = replayed["devices"][0]["measured"]
    assert code == 0, errors(replayed["devices"][0])
    assert m["march"]["sms_seen"] == saved["march"]["sms_seen"] and m["march"]["failures"] == []
    assert m["granule_sweep"]["failing_bytes"] == [] and m["granule_sweep"]["sizes_tested"] == 1818
    assert {k: m["leftovers"][k] for k in ("across_processes_words_matching", "writer_sms", "reader_sms")} == \
        {k: saved["leftovers"][k] for k in ("across_processes_words_matching", "writer_sms", "reader_sms")}


def test_a_recorded_march_failure_replays_as_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_cli_json(["--simulate", "h200,bitflip=7:4000", "--level", "full"], tmp_path, capsys, "flip.json")
    code, replayed = run_cli_json(["--simulate", str(tmp_path / "flip.json"), "--level", "full"], tmp_path, capsys)
    (failure,) = replayed["devices"][0]["measured"]["march"]["failures"]
    assert code == 1 and (failure["sm_id"], failure["first_bad_byte"]) == (7, 4000)


def test_a_standard_report_replayed_at_full_has_no_validation(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    code, replayed = run_cli_json(["--simulate", str(H200_REPORT), "--level", "full"], tmp_path, capsys)
    dev = replayed["devices"][0]
    assert code == 4
    assert {"step sm_march", "step granule_sweep", "step leftovers"} <= set(errors(dev))
    assert not [v for v in dev["verdicts"] if v["verdict"] == "MISMATCH"]


def test_a_clean_replay_is_still_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--simulate", str(H200_REPORT), "--quiet"]) == 0
    capsys.readouterr()
