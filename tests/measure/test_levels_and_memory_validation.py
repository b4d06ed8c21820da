"""--level quick|standard|full, and the shared memory's own validation on simulated faults: a bad bit on
one SM, sizes below the ceiling that fail, and shared memory that outlives a process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_smem.app.cli import main as cli
from bisect_smem.core.integrity import MARCH_READS_PER_WORD
from bisect_smem.devices.backends.sim.backend import SimBackend
from bisect_smem.devices.backends.sim.memory import leftover_file, simulate_march
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.probes import MarchOutcome, Outcome
from bisect_smem.devices.validation_abi import MARCH_SLOT_WORDS, decode_march_slot, leftover_word, march_word
from bisect_smem.experiments.measure import MeasureConfig
from bisect_smem.experiments.plan import plan_steps
from bisect_smem.experiments.validation import Validation, sweep_sizes

H200_CEILING, H200_GRANULE, H200_SMS = 232448, 128, 132


def run(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    out = tmp_path / "r.json"
    code = cli.main([*args, "--json", str(out), "--quiet"])
    text = capsys.readouterr().out
    return code, json.loads(out.read_text()), text


def rows(dev: dict, start: str) -> list[dict]:
    return [v for v in dev["verdicts"] if v["quantity"].startswith(start)]


def session(text: str = "h200"):
    return SimBackend((SimSpec.parse(text),)).open(0, (0,))


@pytest.mark.parametrize("sm,offset", [(0, 0), (7, 1001), (131, H200_CEILING - 1)], ids=["first", "middle", "last"])
def test_a_flipped_bit_is_a_mismatch_naming_the_sm_and_byte(sm: int, offset: int, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, report, text = run(["--simulate", f"h200,bitflip={sm}:{offset}", "--level", "full"], tmp_path, capsys)
    (dev,) = report["devices"]
    assert code == 1
    (row,) = rows(dev, "shared memory of SM")
    assert row["quantity"] == f"shared memory of SM {sm} (march test)" and row["verdict"] == "MISMATCH"
    assert row["measured"].startswith(f"byte {offset}: ")
    assert f"shared memory of SM {sm} (march test)" in text and f"byte {offset}:" in text
    (failure,) = dev["measured"]["march"]["failures"]
    assert (failure["sm_id"], failure["first_bad_byte"]) == (sm, offset)
    assert failure["read_word"] ^ failure["expected_word"] == 1 << (8 * (offset % 4))


def test_a_sound_device_passes_full_on_every_sm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run(["--simulate", "h200", "--level", "full"], tmp_path, capsys)
    (dev,) = report["devices"]
    assert code == 0, [v for v in dev["verdicts"] if v["verdict"] in ("MISMATCH", "ERROR")]
    assert report["level"] == "full" and dev["measured"]["level"] == "full"
    march = dev["measured"]["march"]
    assert march["sms_seen"] == list(range(H200_SMS)) and march["failures"] == [] and march["launches"] == 1
    sweep = dev["measured"]["granule_sweep"]
    assert sweep["sizes_tested"] == H200_CEILING // H200_GRANULE + 2 and sweep["failing_bytes"] == []
    assert sweep["over_ceiling_failed"] is True
    (across,) = rows(dev, "data of an earlier process visible")
    assert across["verdict"] == "match" and across["measured"].startswith("no (0 of ")
    (within,) = rows(dev, "data of an earlier kernel")
    assert within["verdict"] == "info" and within["measured"].startswith("yes (")


@pytest.mark.parametrize("granules", [0, 1, 8, 900, 1815], ids=lambda g: f"{g * H200_GRANULE}B")
def test_a_hole_below_the_ceiling_is_caught_by_full(granules: int, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    size = granules * H200_GRANULE
    code, report, _ = run(["--simulate", f"h200,holes={size}-{size}", "--level", "full"], tmp_path, capsys)
    (dev,) = report["devices"]
    assert dev["measured"]["granule_sweep"]["failing_bytes"] == [size]
    (row,) = rows(dev, "every 128 B multiple")
    assert row["verdict"] == "ERROR" and f"not monotone: failed at [{size}] B" in row["note"]
    assert code in (1, 4)


@settings(max_examples=60, deadline=None)
@given(start=st.integers(0, H200_CEILING // H200_GRANULE - 1), width=st.integers(0, 3))
def test_every_granule_multiple_is_swept(start: int, width: int) -> None:
    low = start * H200_GRANULE
    high = min(low + width * H200_GRANULE, H200_CEILING - 1)
    sweep = Validation(session(f"h200,holes={low}-{high}"), H200_SMS, lambda _t: None).granule_sweep(
        H200_CEILING, H200_GRANULE)
    assert sweep.failing_bytes == tuple(range(low, high + 1, H200_GRANULE))
    assert sweep.over_ceiling_failed is True


def test_levels_below_full_do_not_claim_to_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for level in ("quick", "standard"):
        _, report, _ = run(["--simulate", "h200,holes=1024-1024", "--level", level], tmp_path, capsys)
        (dev,) = report["devices"]
        assert dev["measured"]["granule_sweep"] is None and not rows(dev, "every 128 B multiple")


def test_sweep_sizes_end_with_the_byte_over() -> None:
    assert sweep_sizes(1000, 128) == (0, 128, 256, 384, 512, 640, 768, 896, 1000, 1001)
    assert sweep_sizes(256, 128) == (0, 128, 256, 257)
    with pytest.raises(ValueError, match="must be >= 1"):
        sweep_sizes(256, 0)


@pytest.mark.parametrize("leak,verdict,code", [("yes", "MISMATCH", 1), ("no", "match", 0)])
def test_leftovers_across_processes(leak: str, verdict: str, code: int, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    got, report, text = run(["--simulate", f"h200,leak={leak}", "--level", "full"], tmp_path, capsys)
    (dev,) = report["devices"]
    (row,) = rows(dev, "data of an earlier process visible")
    assert row["verdict"] == verdict and got == code
    assert row["measured"].startswith("yes (7670784 of 7670784" if leak == "yes" else "no (0 of 7670784")
    assert "data of an earlier process visible" in text
    left = dev["measured"]["leftovers"]
    assert left["writer_sms"] == left["reader_sms"] == H200_SMS


def test_leftovers_need_the_other_process_to_have_written() -> None:
    # A leaking device shows only what was really written: a nonce nobody wrote matches nothing.
    s = session("h200,leak=yes")
    assert s.leftover_read(4096, 512, H200_SMS, 0x1234).matching_words == 0
    writer = session("h200,leak=yes")
    writer.leftover_write(4096, 512, H200_SMS, 0x1234)
    writer.close()
    assert s.leftover_read(4096, 512, H200_SMS, 0x1234).matching_words == H200_SMS * 1024
    assert not leftover_file(0x1234).exists()  # the reader takes what the device kept


def test_quick_runs_only_its_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def keys(level: str) -> list[str]:
        return [step.key for step in plan_steps(MeasureConfig(level=level))]

    assert keys("quick") == ["default_ceiling", "attribute_accept_ceiling", "static_split:0:128", "block_registers"]
    assert keys("full") == [*keys("standard"), "sm_march", "granule_sweep", "leftovers"]
    assert not {"sm_march", "granule_sweep", "leftovers"} & set(keys("standard"))
    code, report, _ = run(["--simulate", "h200", "--level", "quick"], tmp_path, capsys)
    m = report["devices"][0]["measured"]
    assert code == 0 and report["level"] == m["level"] == "quick"
    assert set(m["timings_s"]) == {"open", "default_ceiling", "attribute_accept_ceiling", "static_splits",
                                   "block_registers"}
    assert [(s["static_bytes"], s["threads"]) for s in m["static_splits"]] == [(0, 128)]
    assert m["residency"] == [] and m["carveout"] == [] and m["clusters"] == [] and m["march"] is None
    assert (m["optin_dynamic_ceiling_bytes"], m["reserved_bytes"], m["allocation_granularity_bytes"]) == (
        H200_CEILING, 1024, H200_GRANULE)


@pytest.mark.parametrize("saved,now", [("standard", "quick"), ("quick", "full"), ("full", "standard"),
                                       ("full", "full")])
def test_baselines_compare_at_the_level_both_reached(saved: str, now: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base"
    assert cli.main(["--simulate", "h200", "--level", saved, "--save-baseline", str(base), "--quiet"]) == 0
    (path,) = base.glob("*/*.json")
    assert json.loads(path.read_text())["provenance"]["level"] == saved
    capsys.readouterr()
    assert cli.main(["--simulate", "h200", "--level", now, "--compare", str(base), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "0 regressed" in out
    lower = "quick" if "quick" in (saved, now) else ("standard" if "standard" in (saved, now) else "full")
    assert (f"compared at level {lower}" in out) == (saved != now)


def test_a_regression_in_a_quick_quantity_is_found_across_levels(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base"
    cli.main(["--simulate", "h200", "--save-baseline", str(base), "--quiet"])
    capsys.readouterr()
    code = cli.main(["--simulate", "h200,optin=200K", "--level", "quick", "--compare", str(base), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "measured.optin_dynamic_ceiling_bytes" in out
    assert "measured.smem_per_sm_bytes" not in out  # standard: not measured by quick, not compared


def test_a_leak_regresses_a_full_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base"
    cli.main(["--simulate", "h200", "--level", "full", "--save-baseline", str(base), "--quiet"])
    capsys.readouterr()
    code = cli.main(["--simulate", "h200,leak=yes", "--level", "full", "--compare", str(base), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "measured.validation.leftovers.across_processes_visible" in out


def test_a_full_quantity_missing_from_a_full_baseline_is_a_difference(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "base"
    cli.main(["--simulate", "h200", "--level", "full", "--save-baseline", str(base), "--quiet"])
    (path,) = base.glob("*/*.json")
    data = json.loads(path.read_text())
    data["device"]["measured"]["march"] = None  # the level says it was measured; it is absent
    path.write_text(json.dumps(data))
    capsys.readouterr()
    code = cli.main(["--simulate", "h200", "--level", "full", "--compare", str(base), "--quiet"])
    out = capsys.readouterr().out
    assert code == 1 and "measured.validation.march.sms_covered" in out


@pytest.mark.parametrize("args,message", [
    (["--simulate", "h200,bitflip=5"], "bitflip takes SM:OFFSET"),
    (["--simulate", "h200,bitflip=x:5"], "bitflip takes SM:OFFSET"),
    (["--simulate", "h200,holes=4096"], "holes takes START-END"),
    (["--simulate", "h200,holes=4096-1024"], "holes START must be <= END (got 4096-1024)"),
    (["--simulate", "h200,leak=maybe"], "leak takes yes or no (got 'maybe')"),
    (["--simulate", "h200", "--level", "fast"], "invalid choice: 'fast'"),
    (["--backend", "numba", "--level", "full"], "--level full needs the cupy backend"),
])
def test_bad_validation_input(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_march_slots_decode_as_the_kernel_writes_them() -> None:
    key = (3 << 34) | (2 << 32) | 250  # pattern 3 (address), element 2, word 250
    expected = march_word(3, 250, 0)
    read = expected ^ 0x00010000
    words = [~key & 0xFFFFFFFF, (~key >> 32) & 0xFFFFFFFF, 6, 2, expected, read, 999, 4096]
    slot = decode_march_slot(words)
    assert slot is not None and (slot.sm_id, slot.first_bad_byte, slot.pattern, slot.element) == (5, 1002, 3, 2)
    assert not slot.passed
    assert decode_march_slot([0] * MARCH_SLOT_WORDS) is None  # a block that never ran
    clean = decode_march_slot([0, 0, 1, 0, 0, 0, MARCH_READS_PER_WORD * 1024, 4096])
    assert clean is not None and clean.passed and clean.sm_id == 0
    short = decode_march_slot([0, 0, 1, 0, 0, 0, MARCH_READS_PER_WORD * 1024 - 1, 4096])
    assert short is not None and not short.passed  # a word read fewer times than the march reads it


def test_patterns_mirror_the_kernel() -> None:
    assert [march_word(p, 3, 0) for p in (0, 1, 2, 3, 4, 35)] == [0, 0xFFFFFFFF, 0xAAAAAAAA, 12, 1 << 3, 1 << 2]
    assert march_word(36, 3, 1) != march_word(36, 3, 2)  # the seed changes the random pattern
    assert len({leftover_word(7, i) for i in range(4096)}) == 4096 and leftover_word(7, 0) != leftover_word(8, 0)
    assert simulate_march(0, 4096, 0, None).passed


class _MissingSms:
    """A session whose first ``misses`` launches leave SMs 3 and 4 without a block."""

    def __init__(self, misses: int) -> None:
        self.misses, self.launches = misses, 0

    def march(self, dynamic_bytes: int, threads: int, blocks: int, seed: int, fault: object = None) -> MarchOutcome:
        self.launches += 1
        sms = [s for s in range(blocks) if self.launches > self.misses or s not in (3, 4)]
        return MarchOutcome(Outcome.OK, "", tuple(simulate_march(s, dynamic_bytes, seed, None) for s in sms))


def test_a_launch_that_misses_sms_is_repeated() -> None:
    fake = _MissingSms(misses=1)
    result = Validation(fake, 8, lambda _t: None).march(4096)  # type: ignore[arg-type]
    assert result.launches == 2 and result.covered and result.sms_seen == tuple(range(8))


def test_sms_never_reached_are_named(tmp_path: Path) -> None:
    from bisect_smem.analysis.integrity_verdicts import march_verdicts

    result = Validation(_MissingSms(misses=99), 8, lambda _t: None).march(4096)  # type: ignore[arg-type]
    assert result.launches == 4 and result.sms_missing == (3, 4)
    row = march_verdicts(result)[0]
    assert row.verdict == "ERROR" and row.note == "never ran: SM 3, 4 after 4 launches"
