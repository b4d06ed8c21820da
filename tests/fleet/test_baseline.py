"""Baselines: save, refuse to overwrite, compare (equal, regressed, missing, corrupt, foreign); merge;
and the pytest plugin end to end with JUnit output."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.app.cli import main as cli

# These tests read lines whole: a path, then what deviates or regressed.
pytestmark = pytest.mark.usefixtures("wide_terminal")

pytest_plugins = ["pytester"]
H200_DIR = "simulated-sm-90-h100-h200-gh200"


def main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main([*args, "--quiet"])
    out = capsys.readouterr()
    return code, out.out, out.err


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture()
def saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    folder = tmp_path / "baselines"
    code, _, err = main(["--simulate", "h200", "--save-baseline", str(folder)], capsys)
    assert code == 0, err
    return folder


def test_save_writes_one_sorted_file_with_provenance(saved: Path) -> None:
    (path,) = saved.rglob("*.json")
    assert path.relative_to(saved) == Path(H200_DIR, "simulated.json")
    text = path.read_text()
    data = json.loads(text)
    assert data["schema"] == "bisect_smem/baseline/v1"
    assert {"tool_version", "driver_version", "device", "host", "date_utc", "cupy_version"} <= set(data["provenance"])
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert data["device"]["measured"]["optin_dynamic_ceiling_bytes"] == 232448


def test_save_refuses_to_overwrite_without_force(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(saved)
    code, _, err = main(["--simulate", "h200,optin=200K", "--save-baseline", str(saved)], capsys)
    assert code == 2 and "exists; use --force to replace it" in err
    assert tree(saved) == before
    code, _, _ = main(["--simulate", "h200,optin=200K", "--save-baseline", str(saved), "--force"], capsys)
    assert code == 1  # the override disagrees with the published row, so the run itself mismatches
    assert json.loads((saved / H200_DIR / "simulated.json").read_text())["device"]["measured"][
        "optin_dynamic_ceiling_bytes"] == 204800


def test_compare_equal_is_exit_0_and_touches_nothing(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(saved)
    code, out, _ = main(["--simulate", "h200", "--compare", str(saved)], capsys)
    assert code == 0
    assert f"baseline {saved / H200_DIR / 'simulated.json'} (same driver simulated)" in out
    assert " 0 regressed" in out
    assert tree(saved) == before


def test_compare_regressed_names_each_quantity(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(saved)
    code, out, _ = main(["--simulate", "h200,optin=200K", "--compare", str(saved)], capsys)
    assert code == 1
    assert "measured.optin_dynamic_ceiling_bytes" in out and "232448" in out
    assert tree(saved) == before


def test_compare_missing_is_exit_2_unless_allowed(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = main(["--simulate", "a100", "--compare", str(saved)], capsys)
    assert code == 2 and "no baseline for simulated-sm-80-a100 cc 8.0" in err
    code, out, _ = main(["--simulate", "a100", "--compare", str(saved), "--allow-missing"], capsys)
    assert code == 0 and "no baseline for simulated-sm-80-a100" in out


@pytest.mark.parametrize("content, message", [
    ("{\"schema\": \"bisect_smem/baseline/v1\", \"provenance\"", "not a readable baseline"),
    ("", "not a readable baseline"),
    ("{\"schema\": \"someone-else/v3\"}", "not a bisect_smem/baseline/v1 file (schema: 'someone-else/v3')"),
    ("[1, 2]", "not a bisect_smem/baseline/v1 file"),
    ("{\"schema\": \"bisect_smem/baseline/v1\", \"provenance\": {}}", "baseline is incomplete"),
])
def test_a_bad_file_is_exit_2_naming_it(saved: Path, content: str, message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    bad = saved / H200_DIR / "simulated.json"  # the one this run is compared with (the others are not read)
    bad.write_text(content)
    before = tree(saved)
    code, _, err = main(["--simulate", "h200", "--compare", str(saved)], capsys)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith(f"error: {bad}: ") and message in err
    assert tree(saved) == before


def _filed_under(saved: Path, drivers: dict[str, str | None]) -> None:
    """The simulated H200's baseline filed again under each driver version, with another compute capability
    where one is given; the original file removed."""
    original = json.loads((saved / H200_DIR / "simulated.json").read_text())
    for version, cc in drivers.items():
        document = json.loads(json.dumps(original))
        document["provenance"]["driver_version"] = version
        document["device"]["compute_capability"] = cc or original["device"]["compute_capability"]
        (saved / H200_DIR / f"{version}.json").write_text(json.dumps(document))
    (saved / H200_DIR / "simulated.json").unlink()


def _found_for_driver(saved: Path, device_from: str, driver: str) -> tuple[Any, str] | None:
    """find_baseline for the device of the baseline ``device_from``, running ``driver``."""
    from bisect_smem.analysis.baseline import find_baseline
    from bisect_smem.core.saved import load_baseline

    dev = load_baseline(saved / H200_DIR / device_from).device
    dev = dataclasses.replace(dev, context=dataclasses.replace(dev.context, nvml_driver_version=driver))
    return find_baseline(saved, dev)


def test_compare_takes_the_newest_older_driver(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _filed_under(saved, {"535.1": None, "550.54.15": None, "600.1": None})
    found, note = _found_for_driver(saved, "600.1.json", "580.159.04")
    assert found.path.name == "550.54.15.json" and "the newest older than 580.159.04" in note


def test_a_baseline_of_another_cc_in_the_model_folder_hides_no_older_one(saved: Path) -> None:
    # The folder of one model name may hold another compute capability (unknown-gpu/): a newer driver's
    # baseline of that cc must not end the search before this cc's older one.
    _filed_under(saved, {"550.54.15": None, "570.1": "8.0"})
    found, note = _found_for_driver(saved, "550.54.15.json", "580.159.04")
    assert found.path.name == "550.54.15.json" and "the newest older than 580.159.04" in note


def test_compare_folder_must_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = main(["--simulate", "h200", "--compare", str(tmp_path / "none")], capsys)
    assert code == 2 and "does not exist" in err


def test_merge_names_the_deviating_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for host, spec in (("node-a", "h200"), ("node-b", "h200"), ("node-c", "h200,optin=200K"), ("node-d", "a100")):
        path = tmp_path / f"{host}.json"
        assert main(["--simulate", spec, "--json", str(path)], capsys)[0] in (0, 1)
        paths.append(str(path))
    code = cli.main(["merge", *paths])
    out = capsys.readouterr().out
    assert code == 1
    h200 = next(line for line in out.splitlines() if line.startswith("Simulated sm_90"))
    assert h200.split()[-11:-9] != [] and "node-c.json:0 (" in h200 and "node-a" not in h200
    assert "node-c.json:0: measured.optin_dynamic_ceiling_bytes: 204800 (majority: 232448)" in out
    a100 = next(line for line in out.splitlines() if line.startswith("Simulated sm_80"))
    assert a100.rstrip().endswith("none")
    assert cli.main(["merge", paths[0], paths[1]]) == 0


def test_merge_rejects_a_file_that_is_not_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli.main(["merge", str(bad)]) == 2
    assert f"{bad}: not a bisect_smem/report/v1 file (schema: None)" in capsys.readouterr().err


def test_plugin_gives_a_junit_test_per_quantity(saved: Path, pytester: pytest.Pytester) -> None:
    junit = pytester.path / "out.xml"
    result = pytester.runpytest_subprocess("--smem-baseline", str(saved), "--smem-simulate", "h200,optin=200K",
                                           f"--junitxml={junit}", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] >= 19 and outcomes["passed"] > 400
    cases = ET.parse(junit).getroot().iter("testcase")
    failed = {c.get("name"): c.find("failure").get("message") for c in cases if c.find("failure") is not None}
    assert "measured.optin_dynamic_ceiling_bytes" in failed
    assert "baseline 232448, now 204800" in failed["measured.optin_dynamic_ceiling_bytes"]
    assert result.ret == 1


def test_plugin_passes_on_an_equal_device_and_reports_missing(saved: Path, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--smem-baseline", str(saved), "--smem-simulate", "h200",
                                           "-p", "no:cacheprovider")
    assert result.ret == 0 and result.parseoutcomes()["passed"] > 400
    result = pytester.runpytest_subprocess("--smem-baseline", str(saved), "--smem-simulate", "a100",
                                           "-p", "no:cacheprovider")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*no baseline for simulated-sm-80-a100*"])
    result = pytester.runpytest_subprocess("--smem-baseline", str(saved), "--smem-simulate", "a100",
                                           "--smem-allow-missing", "-p", "no:cacheprovider")
    assert result.ret == 0 and result.parseoutcomes()["skipped"] == 1


@pytest.mark.parametrize(("current", "expected"), [
    ("580.159.04", "550.54.15.json"), ("550.54.15", "550.54.15.json"), ("100.0", None), ("999.9", "600.1.json"),
])
def test_compare_reads_only_the_baselines_it_needs(saved: Path, current: str, expected: str | None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_smem.analysis import baseline as module
    from bisect_smem.core.saved import load_baseline

    versions = [f"{major}.{minor}" for major in range(300, 400) for minor in range(10)]  # 1000 old drivers
    _filed_under(saved, dict.fromkeys([*versions, "535.1", "550.54.15", "600.1"]))
    dev = load_baseline(saved / H200_DIR / "600.1.json").device
    dev = dataclasses.replace(dev, context=dataclasses.replace(dev.context, nvml_driver_version=current))
    read: list[str] = []
    monkeypatch.setattr(module, "load_baseline", lambda path: read.append(path.name) or load_baseline(path))
    found = module.find_baseline(saved, dev)
    assert (found[0].path.name if found else None) == expected
    assert len(read) <= 3, read
