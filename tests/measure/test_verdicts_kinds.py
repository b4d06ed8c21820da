"""Verdict kinds: a limit that differs fails, a prediction the device beats differs, one it falls short of fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.analysis.verdicts import carveout_verdicts, split_verdicts
from bisect_smem.app.cli.main import main
from bisect_smem.core.model import CarveoutPoint, Measured, StaticSplit
from bisect_smem.core.rows import VERDICT_KINDS, Verdict


def run_json(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    out = tmp_path / "r.json"
    code = main([*args, "--json", str(out)])
    return code, json.loads(out.read_text())["devices"][0], capsys.readouterr().out


def test_every_verdict_has_a_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, dev, _ = run_json(["--simulate", "h200"], tmp_path, capsys)
    kinds = {v["quantity"]: v["kind"] for v in dev["verdicts"]}
    assert code == 0 and set(kinds.values()) == set(VERDICT_KINDS)
    assert kinds["opt-in attribute accepts up to"] == "limit"
    assert kinds["blocks/SM from 0 B dynamic, 32 threads"] == "prediction"
    assert kinds["published: opt-in per block"] == "reference"


def test_an_optin_override_is_still_a_mismatch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, dev, _ = run_json(["--simulate", "h200,optin=200K", "--strict"], tmp_path, capsys)
    rows = {v["quantity"]: v for v in dev["verdicts"]}
    assert code == 1
    assert rows["published: opt-in per block"]["verdict"] == "MISMATCH"
    code, _, _ = run_json(["--simulate", "h200,optin=200K"], tmp_path, capsys)
    assert code == 1


def test_fewer_blocks_than_the_api_predicts_is_a_mismatch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, dev, stdout = run_json(["--simulate", "h200,fewer=1"], tmp_path, capsys)
    staircase = [v for v in dev["verdicts"] if v["quantity"].startswith("blocks/SM from ")]
    assert code == 1
    assert staircase and all(v["verdict"] == "MISMATCH" and v["kind"] == "prediction" for v in staircase)
    assert all(v["measured"] == v["reported"] - 1 for v in staircase)
    assert "1 fewer than the API" in staircase[0]["note"]
    # The disagreeing plateaus are shown in the compact table, not folded into a summary row.
    assert "blocks/SM from 0 B dynamic, 32" in stdout and "residency staircase (" not in stdout


def test_more_blocks_than_predicted_differs_and_fewer_is_a_mismatch() -> None:
    published = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
    points = (CarveoutPoint(27, 8, 8, 64 * 1024, (64 * 1024, 72 * 1024)),
              CarveoutPoint(28, 12, 8, None, (96 * 1024, 97 * 1024)),
              CarveoutPoint(29, 7, 8, 64 * 1024, (56 * 1024, 64 * 1024)))
    rows = {r.quantity: r for r in carveout_verdicts(points, published)}
    assert rows["blocks/SM at carveout 27%"].verdict == "match"
    assert rows["blocks/SM at carveout 28%"].verdict == "differs"
    assert rows["blocks/SM at carveout 29%"].verdict == "MISMATCH"
    assert rows["carveout sizes seen (KB)"].verdict == "differs" and rows["carveout sizes seen (KB)"].kind == "reference"


@pytest.mark.parametrize("optin", ["0", "1"])
def test_an_expected_ceiling_below_zero_is_not_a_negative_number(optin: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, dev, _ = run_json(["--simulate", f"h200,optin={optin}", "--verbose"], tmp_path, capsys)
    numbers = [v["reported"] for v in dev["verdicts"] if isinstance(v["reported"], int)]
    assert numbers and min(numbers) >= 0
    nothing = [v for v in dev["verdicts"] if v["reported"] == "nothing"]
    assert nothing and all(v["measured"] == "nothing" and v["verdict"] == "match" for v in nothing)
    assert "nothing launches: 1 B static needs 16 B" in nothing[0]["note"]


def test_a_ceiling_that_launched_beyond_nothing_is_a_mismatch() -> None:
    split = StaticSplit(1024, 128, 64, 10, 1024)
    (row, _) = split_verdicts((split,), Measured(), 512, "driver")
    assert row.reported == "nothing" and row.verdict == "MISMATCH" and "launched although" in row.note


def test_the_register_note_says_what_happened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, dev, _ = run_json(["--simulate", "h200,optin=0"], tmp_path, capsys)
    reserved = next(v for v in dev["verdicts"] if v["quantity"] == "reserved shared memory per block")
    assert reserved["measured"] is None and "cc 8.0" not in reserved["note"] and "not measured" in reserved["note"]
    _, dev, _ = run_json(["--simulate", "v100"], tmp_path, capsys)
    reserved = next(v for v in dev["verdicts"] if v["quantity"] == "reserved shared memory per block")
    assert reserved["note"] == "PTX registers need cc 8.0+ (this device: cc 7.0)"


def test_the_available_dynamic_api_is_a_fifth_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, dev, _ = run_json(["--simulate", "h200"], tmp_path, capsys)
    rows = [v for v in dev["verdicts"] if v["quantity"].startswith("available dynamic (API)")]
    splits = dev["measured"]["static_splits"]
    assert len(rows) == len(splits) + 1 and all(v["verdict"] == "match" for v in rows)
    assert dev["measured"]["default_api_available_dynamic_bytes"] == dev["measured"]["default_dynamic_ceiling_bytes"]
    assert all(s["api_available_dynamic_bytes"] == s["dynamic_ceiling_bytes"] for s in splits)
    short = StaticSplit(0, 128, 232448, 26, 0, 231424)
    row = next(r for r in split_verdicts((short,), Measured(), 232448, "driver") if "API" in r.quantity)
    assert row.verdict == "MISMATCH" and row.reported == 231424 and row.measured == 232448


def test_attribute_150_is_reported_where_the_driver_knows_it(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    _, dev, _ = run_json(["--simulate", "h200"], tmp_path, capsys)
    row = next(v for v in dev["verdicts"] if "attr 150" in v["quantity"])
    assert row["verdict"] == "info" and row["note"] == "not known by this driver"
    assert dev["reported"]["driver"]["max_oversized_shared_memory_per_block_bytes"] is None


def test_a_verdict_kind_is_validated() -> None:
    with pytest.raises(ValueError, match="verdict kind must be one of limit, prediction, reference"):
        Verdict("q", 1, "s", 1, "match", "", "hint")
