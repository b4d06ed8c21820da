"""The status fields of a report: per device summary {status, counts, reason}, the run's result,
exit_code and error, equal to what the process did; and on exit 3 and 4 a report is still written."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.core.saved import load_report
from bisect_smem.core.status import DeviceSummary
from tests.conftest import assert_valid, run_cli_json
from tests.paths import H200_REPORT


def _counted(dev: dict) -> dict[str, int]:
    names = {"match": "match", "MISMATCH": "mismatch", "differs": "differs", "info": "info", "ERROR": "error"}
    tally = dict.fromkeys(names.values(), 0)
    for row in dev["verdicts"]:
        tally[names[row["verdict"]]] += 1
    return tally


def test_a_healthy_device_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", "h200"], tmp_path, capsys)
    dev = report["devices"][0]
    assert code == 0 and report["result"] == "pass" and report["exit_code"] == 0 and report["error"] is None
    assert dev["summary"] == {"status": "pass", "counts": _counted(dev), "reason": None}
    assert dev["summary"]["counts"]["match"] > 50


def test_a_simulated_mismatch_is_status_fail_with_the_first_mismatch_as_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", "h200,optin=204800"], tmp_path, capsys)
    dev = report["devices"][0]
    first = next(r for r in dev["verdicts"] if r["verdict"] == "MISMATCH")
    assert code == 1 and report["result"] == "fail" and report["exit_code"] == 1
    assert dev["summary"]["status"] == "fail" and dev["summary"]["counts"] == _counted(dev)
    assert dev["summary"]["counts"]["mismatch"] >= 1
    reason = dev["summary"]["reason"]
    assert reason.startswith(f"MISMATCH {first['quantity']}: ") and "measured 204800" in reason and "\n" not in reason


def test_strict_makes_a_row_that_differs_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", str(H200_REPORT)], tmp_path, capsys)
    assert code == 0 and report["devices"][0]["summary"]["status"] == "pass"
    assert report["devices"][0]["summary"]["counts"]["differs"] > 0
    code, report = run_cli_json(["--simulate", str(H200_REPORT), "--strict"], tmp_path, capsys, "strict.json")
    assert code == 1 and report["result"] == "fail"
    assert report["devices"][0]["summary"]["reason"].startswith("differs blocks/SM at carveout")


def test_an_incomplete_device_is_exit_4_with_the_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_cli_json(["--simulate", "h200,sticky=200000", "--max-restarts", "0"], tmp_path, capsys)
    dev = report["devices"][0]
    assert code == 4 and report["result"] == "incomplete" and dev["summary"]["status"] == "incomplete"
    assert report["error"] == f"device 0: {dev['summary']['reason']}" and dev["summary"]["reason"]


def test_a_regression_against_the_baseline_fails_the_device(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    baselines = tmp_path / "baselines"
    # The baseline holds a smaller opt-in limit: the healthy device now differs from it in every opt-in row.
    assert cli.main(["--simulate", "h200,optin=204800", "--save-baseline", str(baselines), "--quiet"]) == 1
    code, report = run_cli_json(["--simulate", "h200", "--compare", str(baselines)], tmp_path, capsys)
    summary = report["devices"][0]["summary"]
    assert code == 1 and summary["status"] == "fail" and summary["reason"].startswith("regression: ")


def test_the_summary_is_read_back_by_the_one_reader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_cli_json(["--simulate", "h200,optin=204800"], tmp_path, capsys)
    report = load_report(tmp_path / "r.json")
    assert isinstance(report.devices[0].summary, DeviceSummary) and report.devices[0].summary.status == "fail"
    assert report.result == "fail" and report.exit_code == 1


def _no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_smem.devices.backends import libcuda

    def no_driver(name: str, *args: object, **kwargs: object) -> None:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(libcuda, "_instance", None)
    monkeypatch.setattr(ctypes, "CDLL", no_driver)


def test_no_gpu_still_writes_the_report_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _no_driver(monkeypatch)
    out = tmp_path / "r.json"
    assert cli.main(["--json", str(out), "--quiet"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no usable GPU: no NVIDIA driver found")
    report = json.loads(out.read_text())
    assert_valid(report)
    assert report["result"] == "no_gpu" and report["exit_code"] == 3 and report["devices"] == []
    assert report["error"].startswith("no usable GPU: no NVIDIA driver found")


@pytest.mark.parametrize("args", [["--format", "json"], ["--json", "-"]], ids=["format-json", "json-stdout"])
def test_no_gpu_prints_the_report_on_stdout_when_asked(args: list[str], capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _no_driver(monkeypatch)
    assert cli.main([*args, "--quiet"]) == 3
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert_valid(report)
    assert report["exit_code"] == 3 and report["error"].startswith("no usable GPU")
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: no usable GPU")


def test_a_compare_without_its_baseline_says_why_in_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "baselines").mkdir()
    code, report = run_cli_json(["--simulate", "h200", "--compare", str(tmp_path / "baselines")], tmp_path, capsys)
    assert code == 2 and report["result"] == "bad_input" and report["devices"][0]["summary"]["status"] == "pass"
    assert report["error"] is not None and "no baseline" in report["error"], report["error"]
    assert report["error"].endswith("(use --allow-missing to accept)")
    code, report = run_cli_json(["--simulate", "h200", "--compare", str(tmp_path / "baselines"), "--allow-missing"],
                                tmp_path, capsys, "allowed.json")
    assert code == 0 and report["error"] is None
