"""The residency staircase, per-SM capacity and carveout on simulated devices, and the plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.core.profiles import PROFILES, ArchProfile
from bisect_smem.devices.backends.sim.backend import SimSession
from bisect_smem.devices.backends.sim.model import DeviceModel
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.experiments.residency import STAIRCASE_THREADS, Limits, split_point
from tests.conftest import run_cli_json

run_json = run_cli_json


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.key)
def test_staircase_finds_every_step_exactly(profile: ArchProfile, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(["--simulate", profile.key], tmp_path, capsys)
    assert code == 0
    m = data["devices"][0]["measured"]
    session = SimSession(0, SimSpec(DeviceModel.from_profile(profile)), (0,))

    def blocks(n: int) -> int:
        return session.residency(n, STAIRCASE_THREADS, 0).blocks_per_sm_min

    ceiling = profile.max_smem_per_block_optin_bytes
    # Brute force over every size where the footprint can change (a granule boundary + 1).
    expected = [n for n in range(1, ceiling + 1, profile.allocation_granularity_bytes) if blocks(n) != blocks(n - 1)]
    staircase = [s for s in m["residency"] if s["threads"] == STAIRCASE_THREADS]
    assert [s["dynamic_bytes"] for s in staircase] == [0, *expected]
    for step in staircase:
        assert step["blocks_per_sm_min"] == step["blocks_per_sm_max"] == blocks(step["dynamic_bytes"])
        assert step["api_blocks_per_sm"] == step["formula_blocks_per_sm"] == step["blocks_per_sm_min"]
    assert staircase[0]["limited_by"] == ("blocks" if profile.max_threads_per_sm // 32 > profile.max_blocks_per_sm
                                          else "blocks+threads")
    assert all(s["limited_by"] == "smem" for s in staircase[1:])
    threads_rows = [s for s in m["residency"] if s["threads"] != STAIRCASE_THREADS]
    assert [s["threads"] for s in threads_rows] == [1024, 96]
    assert all("threads" in s["limited_by"] for s in threads_rows)
    assert threads_rows[0]["blocks_per_sm_min"] == profile.max_threads_per_sm // 1024
    assert m["smem_per_sm_bytes"] == profile.smem_per_sm_bytes
    assert m["probes"]["residency_and_carveout"] > 0


@pytest.mark.parametrize("profile", [p for p in PROFILES if p.carveout_kib], ids=lambda p: p.key)
def test_carveout_sizes_are_recovered_from_residency(profile: ArchProfile, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(["--simulate", profile.key], tmp_path, capsys)
    assert code == 0
    points = data["devices"][0]["measured"]["carveout"]
    assert [p["percent"] for p in points] == [-1, *range(101)]
    spec = SimSpec(DeviceModel.from_profile(profile))
    session = SimSession(0, spec, (0,))
    published = {k * 1024 for k in profile.carveout_kib}
    limits = Limits(profile.smem_per_sm_bytes, profile.max_blocks_per_sm, profile.max_threads_per_sm,
                    profile.allocation_granularity_bytes, spec.model.reserved_bytes)
    for p in points:
        footprint = session.model.footprint(limits.carveout_probe_bytes())
        truth = session.model.carveout_capacity(None if p["percent"] < 0 else p["percent"], footprint)
        assert p["carveout_bytes"] == truth, p
        lo, hi = p["carveout_range_bytes"]
        assert lo <= truth < hi and p["carveout_bytes"] in published | {profile.smem_per_sm_bytes}
    verdicts = {v["quantity"]: v for v in data["devices"][0]["verdicts"]}
    assert verdicts["carveout sizes seen (KB)"]["verdict"] == "match"


def test_formula_names_the_binding_limit() -> None:
    limits = Limits(smem_per_sm_bytes=233472, max_blocks_per_sm=32, max_threads_per_sm=2048, granule_bytes=128,
                    reserved_bytes=1024)
    assert limits.formula(0, 32) == (32, "blocks")
    assert limits.formula(0, 64) == (32, "blocks+threads")
    assert limits.formula(0, 1024) == (2, "threads")
    assert limits.formula(6273, 32) == (31, "smem")
    assert limits.footprint(1) == 1152 and limits.footprint(128) == 1152 and limits.footprint(129) == 1280


@pytest.mark.parametrize("lo, hi, granule, expected", [
    (0, 1000, 128, 384), (0, 1100, 128, 512), (512, 640, 128, 513), (513, 640, 128, 576), (0, 3, 128, 1), (100, 102, 1, 101),
])
def test_split_point_prefers_granules_then_the_byte_after(lo: int, hi: int, granule: int, expected: int) -> None:
    assert split_point(lo, hi, granule) == expected


def test_plot_holds_the_reported_staircase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    png = tmp_path / "stairs.png"
    code, data = run_json(["--simulate", "h200", "--simulate", "rtx-pro-6000", "--plot", str(png)], tmp_path, capsys)
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    series = json.loads(Image.open(png).text["Description"])
    assert len(series) == 2
    for s, dev in zip(series, data["devices"], strict=True):
        steps = [r for r in dev["measured"]["residency"] if r["threads"] == STAIRCASE_THREADS]
        assert s["dynamic_bytes"] == [r["dynamic_bytes"] for r in steps]
        assert s["measured_min"] == [r["blocks_per_sm_min"] for r in steps]
        assert s["api"] == [r["api_blocks_per_sm"] for r in steps]


def test_svg_plot_and_bad_plot_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    svg = tmp_path / "stairs.svg"
    assert cli.main(["--simulate", "a100", "--plot", str(svg), "--quiet"]) == 0
    assert svg.read_text().lstrip().startswith("<?xml")
    capsys.readouterr()
    assert cli.main(["--simulate", "a100", "--plot", str(tmp_path / "x.gif")]) == 2
    assert "--plot writes .png, .svg files (got 'x.gif')" in capsys.readouterr().err


def test_plot_without_matplotlib_says_which_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert cli.main(["--simulate", "a100", "--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: --plot needs matplotlib: pip install matplotlib (the plot extra)"
    assert not (tmp_path / "p.png").exists()
