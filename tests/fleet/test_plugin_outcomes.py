"""The pytest plugin says what ``--compare`` says: a device it could not measure completely is one failed
test and exit 4, and what that measurement lacks is not a regression (skipped, not failed); a quantity
it did measure and that differs is still a failure. A driver version too long to be one is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from tests.paths import H200_REPORT

pytest_plugins = ["pytester"]


def _plugin(pytester: pytest.Pytester, folder: Path, spec: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--smem-baseline", str(folder), "--smem-simulate", spec, "-p",
                                         "no:cacheprovider", "-rfE")


def test_an_incomplete_run_is_one_failure_and_exit_4(h200_baseline: Path, pytester: pytest.Pytester) -> None:
    result = _plugin(pytester, h200_baseline, "h200,sticky=200000")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1, outcomes
    assert outcomes.get("skipped", 0) > 400 and "error" not in outcomes
    result.stdout.fnmatch_lines(["*device0-*::measured _*", "not measured completely (19 ERROR rows; *"])
    assert result.ret == 4
    # --compare on the same run says the same: exit 4, nothing regressed
    assert cli.main(["--simulate", "h200,sticky=200000", "--compare", str(h200_baseline), "--quiet", "--inline"]) == 4


def test_a_regression_beside_an_incomplete_run_is_exit_1(h200_baseline: Path, pytester: pytest.Pytester) -> None:
    result = _plugin(pytester, h200_baseline, "h200,sticky=200000,optin=200K")
    # "FAILED <node id>", followed by " - <message>" only where the terminal is wide enough (COLUMNS)
    failed = [line.split()[1] for line in result.outlines if line.startswith("FAILED ")]
    assert any(node.endswith("::reported.driver.max_shared_memory_per_block_optin_bytes") for node in failed), failed
    assert result.ret == 1


def _long_driver(folder: Path) -> None:
    (path,) = folder.rglob("*.json")
    data = json.loads(path.read_text())
    data["provenance"]["driver_version"] = "5" * 5000
    path.write_text(json.dumps(data))


def test_a_driver_version_of_5000_digits_in_a_baseline_is_one_line(h200_baseline: Path, pytester: pytest.Pytester,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _long_driver(h200_baseline)
    code = cli.main(["--simulate", "h200", "--compare", str(h200_baseline), "--quiet", "--inline"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("error: ")][0].count("5") < 200
    assert "driver_version" in err
    result = _plugin(pytester, h200_baseline, "h200")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*driver_version*"])
    assert result.ret == 1


def test_a_driver_version_of_5000_digits_in_a_report_is_one_line(h200_baseline: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(H200_REPORT.read_text())
    report["devices"][0]["context"]["nvml_driver_version"] = "5" * 5000
    path = tmp_path / "long.json"
    path.write_text(json.dumps(report))
    for args in (["--simulate", str(path), "--compare", str(h200_baseline), "--quiet"], ["merge", str(path)]):
        code = cli.main(args)
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, args
        assert "nvml_driver_version must be at most 64 characters" in err, (args, err)
    assert cli.main(["check", str(path)]) == 2 and capsys.readouterr().out.startswith("smem UNKNOWN: ")
