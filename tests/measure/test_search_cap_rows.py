"""A ceiling at the search cap is not measured: every launch up to the cap worked, so a larger reported
value is neither confirmed nor contradicted. The headline, the rows and the exit code say the same."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.compare import compare
from bisect_smem.core.model import Ceiling
from tests.conftest import run_main as run

CAP = 1048576


def _search(ceiling: int, at_cap: bool) -> Ceiling:
    return Ceiling(ceiling, 6, 26, at_cap)


def test_a_reported_limit_beyond_the_cap_is_not_a_mismatch() -> None:
    v = compare("opt-in ceiling", 2 * CAP, "driver", CAP, _search(CAP, at_cap=True))
    assert (v.verdict, v.measured) == ("ERROR", None) and "search cap, not measured" in v.note


def test_a_reported_limit_under_the_cap_that_was_exceeded_is_still_a_mismatch() -> None:
    v = compare("opt-in ceiling", 232448, "driver", CAP, _search(CAP, at_cap=True))
    assert v.verdict == "MISMATCH" and "search cap" in v.note


def test_a_ceiling_below_the_cap_is_compared_as_before() -> None:
    v = compare("opt-in ceiling", 232448, "driver", 231424, _search(231424, at_cap=False))
    assert v.verdict == "MISMATCH" and "measured -1024 B against reported" in v.note


def test_a_device_beyond_the_cap_says_not_measured_in_headline_and_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--simulate", "h200,optin=2M,smem_per_sm=2049K", "--level", "quick", "--json", "-"], capsys)
    rows = json.loads(out)["devices"][0]["verdicts"]
    capped = [r for r in rows if r["reported"] is not None and isinstance(r["reported"], int)
              and r["reported"] > CAP and r["source"] and "driver" in r["source"]]
    assert capped and all(r["verdict"] == "ERROR" and "not measured" in r["note"] for r in capped), capped
    assert not [r for r in rows if r["verdict"] == "MISMATCH" and "search cap" in (r["note"] or "")]
    _, text, _ = run(["--simulate", "h200,optin=2M,smem_per_sm=2049K", "--level", "quick"], capsys)
    assert "at the 1024 KiB (1048576 B) search cap, not measured" in text
    assert "measured -1048576 B against reported" not in text
    assert code == (1 if any(r["verdict"] == "MISMATCH" for r in rows) else 4)


@pytest.mark.parametrize("spec", ["h200,optin=2M", "h200,reserved=4K", "h200,smem_per_sm=200K"])
def test_an_override_no_gpu_could_have_is_refused(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    # A block's opt-in limit and its reservation come out of one SM: past that, the simulated launch and the
    # occupancy API would answer from different limits (2 MISMATCH, 2 ERROR for optin=2M once).
    code, out, err = run(["--simulate", spec, "--level", "quick"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: bad --simulate value '{spec}': an opt-in limit of ") and "(give smem_per_sm= too)" in err
