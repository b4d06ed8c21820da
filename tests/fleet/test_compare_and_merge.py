"""What --compare, merge and the pytest plugin conclude: exit codes that say what happened (a regression
is 1 even beside a missing baseline; an unmeasured device is 4, not hundreds of regressions), a baseline
from an incomplete run is no reference, merge compares on the lower level as --compare does, and a
mistyped baseline folder is a usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from tests.conftest import run_main as run
from tests.conftest import set_optin
from tests.paths import ROOT

# These tests read lines whole: a path, then what deviates or regressed.
pytestmark = pytest.mark.usefixtures("wide_terminal")

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}



def test_a_regression_beside_a_missing_baseline_is_exit_1(h200_baseline: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--simulate", "h200,fewer=1", "--simulate", "a100", "--compare", str(h200_baseline)], capsys)
    assert code == 1 and "regressed" in out and " 0 regressed" not in out
    assert "error: no baseline for simulated-sm-80" in err


def test_a_missing_baseline_alone_is_exit_2(h200_baseline: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["--simulate", "a100", "--compare", str(h200_baseline)], capsys)
    assert code == 2 and "use --allow-missing" in err


def test_an_unmeasured_device_is_incomplete_not_regressed(h200_baseline: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--simulate", "h200,sticky=4096", "--max-restarts", "0", "--compare", str(h200_baseline)],
                       capsys)
    assert code == 4 and " 0 regressed" in out and "not measured now" in out
    assert "not measured completely" in out


def test_a_baseline_from_an_incomplete_run_is_no_reference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "b"
    run(["--simulate", "h200,sticky=200000", "--max-restarts", "0", "--save-baseline", str(folder), "--force"],
        capsys)
    assert list(folder.rglob("*.json"))
    code, out, _ = run(["--simulate", "h200", "--compare", str(folder)], capsys)
    assert code != 0 and "the baseline was saved from an incomplete measurement" in out


def test_the_plugin_fails_on_a_baseline_from_an_incomplete_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "b"
    run(["--simulate", "h200,sticky=200000", "--max-restarts", "0", "--save-baseline", str(folder), "--force"],
        capsys)
    done = _pytest(tmp_path, "--smem-baseline", str(folder), "--smem-simulate", "h200")
    assert done.returncode == 1 and "saved from an incomplete measurement" in done.stdout, done.stdout[-2000:]


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, str(cwd)],
                          capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300)


def test_the_plugin_refuses_a_mistyped_baseline_folder(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "--smem-baseline", str(tmp_path / "typo"), "--smem-allow-missing",
                   "--smem-simulate", "h200")
    assert done.returncode == 4 and f"--smem-baseline {tmp_path / 'typo'} does not exist" in done.stderr + done.stdout


def test_the_plugin_names_a_baseline_with_a_bogus_level(h200_baseline: Path, tmp_path: Path) -> None:
    (path,) = h200_baseline.rglob("*.json")
    doc = json.loads(path.read_text())
    doc["provenance"]["level"] = "bogus"
    path.write_text(json.dumps(doc))
    done = _pytest(tmp_path, "--smem-baseline", str(h200_baseline), "--smem-simulate", "h200")
    text = done.stdout + done.stderr
    assert done.returncode == 1 and "INTERNALERROR" not in text and "field provenance.level" in text, text[-2000:]


@pytest.fixture(scope="module")
def levels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("levels")
    paths = {}
    for level in ("quick", "standard", "full"):
        for n in range(2):
            path = folder / f"{level}{n}.json"
            assert main(["--simulate", "h200", "--level", level, "--quiet", "--json", str(path)]) == 0
            paths[f"{level}{n}"] = path
    return paths


def test_merge_compares_a_quick_node_on_the_quick_quantities(levels: dict[str, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["merge", str(levels["quick0"]), str(levels["standard0"]), str(levels["standard1"])], capsys)
    assert code == 0 and "deviating" in out and "none" in out.splitlines()[2]
    assert "compared at level quick, the lowest of its devices (1 quick, 2 standard)" in out


def test_merge_of_full_and_standard_has_no_ties(levels: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["merge", str(levels["full0"]), str(levels["standard0"])], capsys)
    assert code == 0 and "a tie between" not in out and "compared at level standard" in out


def test_merge_still_finds_a_difference_at_the_lower_level(levels: dict[str, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(levels["standard0"].read_text())
    set_optin(doc["devices"][0]["measured"], 101376)
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(doc))
    code, out, _ = run(["merge", str(levels["quick0"]), str(levels["quick1"]), str(odd)], capsys)
    assert code == 1 and f"{odd}:0: measured.optin_dynamic_ceiling_bytes: 101376" in out
