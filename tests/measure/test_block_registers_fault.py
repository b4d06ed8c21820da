"""A launch the block-register step needs that fails is that step's ERROR, never "not measured below cc 8.0":
a 1-byte launch under a 4096 B attribute cannot be too big, so its failure is a fault of the device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main


@pytest.mark.parametrize("hole", [1, 128, 129])
def test_a_failed_launch_of_the_block_register_step_is_an_error(hole: int, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    code, out, _err = run_main(["--simulate", f"h200,hole={hole}", "--level", "quick", "--inline",
                                "--json", str(report)], capsys)
    assert code == 4, out
    data = json.loads(report.read_text())
    (dev,) = data["devices"]
    rows = [r for r in dev["verdicts"] if r["quantity"] == "step block_registers"]
    assert [r["verdict"] for r in rows] == ["ERROR"]
    assert f"launch of {hole} B" in rows[0]["note"]
    assert data["result"] != "pass" and dev["error"]


def test_such_a_run_is_not_saved_as_a_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base"
    code, _out, err = run_main(["--simulate", "h200,hole=1", "--level", "quick", "--inline",
                                "--save-baseline", str(base)], capsys)
    # An incomplete device is refused as a baseline (exit 2, as --save-baseline documents), not saved.
    assert code == 2 and "no baseline saved" in err
    assert not list(base.rglob("*.json"))
    # and a healthy device against what a healthy run saves passes
    assert run_main(["--simulate", "h200", "--level", "quick", "--inline", "--save-baseline", str(base)], capsys)[0] == 0
    assert run_main(["--simulate", "h200", "--level", "quick", "--inline", "--compare", str(base)], capsys)[0] == 0
