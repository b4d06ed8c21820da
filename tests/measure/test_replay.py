"""Replaying a saved report as a simulated device: the committed H200 measurement runs in CI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.render.rows import size_text
from bisect_smem.core.errors import UsageError
from bisect_smem.core.levels import STAIRCASE_THREADS
from bisect_smem.core.profiles import find_profile
from bisect_smem.devices.backends.base import DeviceAddress
from bisect_smem.devices.backends.sim.backend import SimBackend, SimSession
from bisect_smem.devices.backends.sim.model import DeviceModel, load_replay
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.backends.table import open_address
from bisect_smem.devices.probes import Outcome, ProbeKernel
from tests.paths import H200_REPORT


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def saved() -> dict:
    return json.loads(H200_REPORT.read_text())["devices"][0]


def test_the_committed_report_is_a_real_h200_measurement(saved: dict) -> None:
    assert saved["backend"] != "sim" and "H200" in saved["name"] and saved["compute_capability"] == "9.0"
    # The finding the verdicts are about: carveout settings where the GPU holds more blocks than predicted.
    assert any(p["blocks_per_sm"] > p["api_blocks_per_sm"] for p in saved["measured"]["carveout"])


def test_replaying_the_h200_exits_0_with_differs_rows(saved: dict, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "replay.json"
    code, stdout, _ = run(["--simulate", str(H200_REPORT), "--json", str(out)], capsys)
    dev = json.loads(out.read_text())["devices"][0]
    verdicts = {v["verdict"] for v in dev["verdicts"]}
    assert code == 0, stdout
    assert "differs" in verdicts and "MISMATCH" not in verdicts and "ERROR" not in verdicts
    better = {p["percent"] for p in saved["measured"]["carveout"] if p["blocks_per_sm"] > p["api_blocks_per_sm"]}
    carveout_rows = [v for v in dev["verdicts"] if v["quantity"].startswith("blocks/SM at carveout ")]
    for row in carveout_rows:
        label = row["quantity"].removeprefix("blocks/SM at carveout ").removesuffix("%")
        low, _, high = label.partition("..")
        percents = set(range(int(low), int(high or low) + 1))
        if percents & better:
            assert row["verdict"] == "differs" and row["kind"] == "prediction", row
    # The replayed device measures what the real one did.
    for key in ("default_dynamic_ceiling_bytes", "optin_dynamic_ceiling_bytes", "smem_per_sm_bytes",
                "reserved_bytes", "allocation_granularity_bytes", "residency", "carveout", "clusters"):
        assert dev["measured"][key] == saved["measured"][key], key
    assert dev["name"] == saved["name"] and dev["context"]["replayed_from"] == str(H200_REPORT)


def test_strict_makes_differs_fail(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run(["--simulate", str(H200_REPORT), "--strict"], capsys)
    assert code == 1
    assert "verdict            differs:" in stdout and "exit 1 (--strict)" in stdout


def test_the_headline_of_the_replay_states_the_measured_limits(saved: dict,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run(["--simulate", str(H200_REPORT)], capsys)
    lines = stdout.splitlines()
    table = next(i for i, line in enumerate(lines) if line.split()[:2] == ["quantity", "reported"])
    headline = lines[2:table]
    m = saved["measured"]
    assert code == 0 and len(headline) <= 12
    assert f"opt-in ceiling     {size_text(m['optin_dynamic_ceiling_bytes'])}" in headline[1]
    assert size_text(m["smem_per_sm_bytes"]) in headline[2]
    assert any(line.strip().startswith("differs: blocks/SM at carveout") for line in headline)
    assert max(len(line) for line in lines) <= 100


def test_a_baseline_file_replays_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--simulate", str(H200_REPORT), "--save-baseline", str(tmp_path / "b"), "--quiet"], capsys)[0] == 0
    (baseline,) = (tmp_path / "b").glob("*/*.json")
    code, stdout, _ = run(["--simulate", str(baseline), "--compare", str(tmp_path / "b")], capsys)
    assert code == 0 and " 0 regressed" in stdout


@pytest.mark.parametrize(("spec", "fragment"), [
    ("missing.json", "not a readable report"),
    ("{tmp}/foreign.json", "not a bisect_smem/report/v1 or bisect_smem/baseline/v1 file (schema: 'other')"),
    (f"{H200_REPORT},device=3", "no device 3 in it"),
    (f"{H200_REPORT},optin=1K", "a replayed report takes device=N"),
    (f"{H200_REPORT},flaky=2", "flaky must be in 0..1"),
], ids=["missing", "foreign", "no-such-device", "override", "bad-flaky"])
def test_a_bad_replay_is_one_line_and_exit_2(spec: str, fragment: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "foreign.json").write_text('{"schema": "other"}')
    code, stdout, stderr = run(["--simulate", spec.format(tmp=tmp_path)], capsys)
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("error: ") and fragment in stderr, stderr


def test_a_replayed_model_says_what_its_report_did_not_record() -> None:
    model = load_replay(str(H200_REPORT))
    record = model.record
    assert model.key == "replay" and record is not None and model.optin_bytes == 232448
    assert record.ceiling(0, 128, opt_in=True) == 232448 and record.ceiling(1, 32, opt_in=True) == 232432
    assert record.ceiling(7, 128, opt_in=True) is None  # a static size the H200 was never measured with
    assert record.ceiling(1024, 128, opt_in=False) is None  # only the 0-B default kernel was measured
    assert record.residency_step(1000, STAIRCASE_THREADS) is not None
    assert record.residency_step(0, 64) is None and record.clusters.get(12345) is None
    assert record.static_footprint(1) == 16 and record.static_footprint(7) is None
    assert DeviceModel.from_profile(find_profile("h200")).record is None


def test_one_session_answers_a_replay_and_only_what_it_recorded() -> None:
    session = SimBackend((SimSpec.parse(str(H200_REPORT)),)).open(0, (0, 1, 7))
    recorded, unrecorded = ProbeKernel(1, opt_in=True), ProbeKernel(7, opt_in=True)
    assert session.set_max_dynamic(recorded, 232432).ok and session.launch(recorded, 232432, 128).ok
    # A static size the H200 was never measured with: not answered by the rules, but as not measured.
    assert session.set_max_dynamic(unrecorded, 232448 - 16).ok
    missing = session.launch(unrecorded, 1000, 128)
    assert missing.outcome is Outcome.OTHER and "not measured in the replayed report" in missing.detail
    assert session.residency(1000, 64, 0).outcome is Outcome.OTHER  # a block size it did not record
    assert session.available_dynamic_smem(unrecorded, 128) is None
    assert type(session) is SimSession and session.identity().extra.replayed_from == str(H200_REPORT)


def test_a_device_is_opened_again_by_its_address() -> None:
    session = open_address(DeviceAddress("sim", 0, "a100,fewer=1"), (0,))
    assert session.identity().name == "Simulated sm_80 (A100)" and session.model.fewer_blocks == 1
    with pytest.raises(UsageError, match="unknown backend 'opencl'"):
        open_address(DeviceAddress("opencl", 0), (0,))


def test_the_simulate_keys_are_documented_where_they_are_parsed() -> None:
    from bisect_smem.devices.backends.sim import spec as sim_spec

    assert all(f"{key}=" in (sim_spec.__doc__ or "") for key in (*sim_spec.PROFILE_KEYS, "device"))
