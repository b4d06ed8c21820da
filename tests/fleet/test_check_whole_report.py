"""``check`` judges the whole report, not just its ``result``: a device error, a top-level error, an exit
code, a verdict row or a measured limit that disagrees with the report's own status is UNKNOWN (exit 2)
with the reason; a real failure stays a problem (exit 1) and a healthy report ok (exit 0)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.app.cli.check import check
from tests.conftest import set_optin

Edit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("check") / "ok.json"
    assert cli.main(["--simulate", "h200", "--level", "quick", "--inline", "--json", str(path), "--quiet"]) == 0
    return json.loads(path.read_text())


def _mismatch_row(r: dict[str, Any]) -> None:
    r["devices"][0]["verdicts"][0]["verdict"] = "MISMATCH"


def _error_row(r: dict[str, Any]) -> None:
    r["devices"][0]["verdicts"][0]["verdict"] = "ERROR"


EDITS: dict[str, tuple[Edit, str]] = {
    "device error": (lambda r: r["devices"][0].update(error="probe timed out"), "device 0"),
    "top-level error": (lambda r: r.update(error="device 1 was not measured"), "error"),
    "exit code 1": (lambda r: r.update(exit_code=1), "exit code 1"),
    "exit code 4": (lambda r: r.update(exit_code=4), "exit code 4"),
    "a MISMATCH row": (_mismatch_row, "MISMATCH"),
    "an ERROR row": (_error_row, "ERROR"),
    "opt-in null": (lambda r: set_optin(r["devices"][0]["measured"], None), "opt-in"),
    "opt-in 0": (lambda r: r["devices"][0]["measured"].update(optin_dynamic_ceiling_bytes=0), "optin"),
    "opt-in 100 B": (lambda r: r["devices"][0]["measured"].update(optin_dynamic_ceiling_bytes=100), "optin"),
    "no measurement": (lambda r: r["devices"][0].update(measured=None), "opt-in"),
}


@pytest.fixture(autouse=True)
def _short_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative name, so that the 80 bytes hold the reason rather than the folder."""
    monkeypatch.chdir(tmp_path)


def test_the_healthy_report_is_ok(healthy: dict[str, Any], tmp_path: Path) -> None:
    path = Path("r.json")
    path.write_text(json.dumps(healthy))
    line = check(path, None)
    assert (line.code, line.text) == (0, "smem ok: 1 GPU, opt-in 232448 B")


@pytest.mark.parametrize("case", EDITS, ids=list(EDITS))
def test_a_report_that_contradicts_itself_is_unknown(case: str, healthy: dict[str, Any], tmp_path: Path) -> None:
    edit, named = EDITS[case]
    report = json.loads(json.dumps(healthy))
    edit(report)
    path = Path("r.json")
    path.write_text(json.dumps(report))
    line = check(path, None)
    assert line.code == 2, line.text
    assert line.text.startswith("smem UNKNOWN: ") and named in line.text, line.text
    assert len(line.text.encode()) <= 80


def test_a_failed_run_is_still_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "mm.json"
    cli.main(["--simulate", "h200,optin=204800", "--level", "quick", "--inline", "--json", str(path), "--quiet"])
    line = check(path, None)
    assert line.code == 1 and line.text.startswith("smem MISMATCH"), line.text


def test_an_incomplete_run_is_still_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "inc.json"
    cli.main(["--simulate", "h200,hole=1", "--level", "quick", "--inline", "--json", str(path), "--quiet"])
    line = check(path, None)
    assert line.code == 2 and line.text.startswith("smem INCOMPLETE"), line.text
