"""The detection path on a real GPU (marker `gpu`): a fault planted in the march kernel on one chosen SM
is named with its SM, byte, and the words expected and read, and fails the run (exit 1); a hole planted
at one size of the granule sweep is reported as not monotone; the kernels as they measure pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.core.integrity import MARCH_READS_PER_WORD

pytestmark = pytest.mark.gpu

FAULT_SM, FAULT_BYTE = 5, 1000  # byte 1000 is the low byte of word 250: pattern zeros reads 0x00000001 there
HOLE_BYTES = 65536  # a granule multiple far below every opt-in ceiling


@pytest.fixture(scope="module")
def session():
    from bisect_smem.devices.backends.cupy.backend import CupySession

    opened = CupySession(0, (0,), frozenset({"sm_march", "granule_sweep"}))
    yield opened
    opened.close()


def _sms_and_ceiling(session) -> tuple[int, int]:
    attrs = session.driver_attributes()
    return attrs[16], attrs[97] - attrs[97] % 4


def test_the_march_kernel_finds_a_word_corrupted_on_one_sm(session) -> None:
    from bisect_smem.devices.probes import MarchFault

    sms, ceiling = _sms_and_ceiling(session)
    outcome = session.march(ceiling, 512, sms, 12345, MarchFault(FAULT_SM, FAULT_BYTE))
    assert outcome.outcome.value == "ok", outcome.detail
    failed = [b for b in outcome.blocks if not b.passed]
    assert len(outcome.blocks) == sms and [b.sm_id for b in failed] == [FAULT_SM]
    (bad,) = failed
    assert (bad.first_bad_byte, bad.expected_word, bad.read_word) == (FAULT_BYTE, 0x00000000, 0x00000001)
    assert (bad.pattern, bad.element, bad.bad_reads) == (0, 1, 1)  # the next write puts the word right


def test_the_unchanged_march_kernel_passes_every_sm(session) -> None:
    sms, ceiling = _sms_and_ceiling(session)
    outcome = session.march(ceiling, 512, sms, 12345)
    assert outcome.outcome.value == "ok", outcome.detail
    assert {b.sm_id for b in outcome.blocks} == set(range(sms)) and all(b.passed for b in outcome.blocks)
    assert all(b.reads_checked == MARCH_READS_PER_WORD * (ceiling // 4) for b in outcome.blocks)


@pytest.mark.parametrize(("hole", "failing"), [(HOLE_BYTES, (HOLE_BYTES,)), (None, ())], ids=["hole", "unchanged"])
def test_the_granule_sweep_reports_a_planted_hole(session, hole: int | None, failing: tuple[int, ...]) -> None:
    from bisect_smem.experiments.config import PlantedFaults
    from bisect_smem.experiments.validation import Validation

    sms, ceiling = _sms_and_ceiling(session)
    sweep = Validation(session, sms, lambda _text: None, planted=PlantedFaults(sweep_hole_bytes=hole)) \
        .granule_sweep(ceiling, 128)
    assert sweep.failing_bytes == failing and sweep.over_ceiling_failed is True, sweep
    if hole is not None:
        assert "verify_failed" in sweep.failure_detail, sweep.failure_detail


def test_a_full_run_names_the_planted_faults_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "planted.json"
    code = cli.main(["--device", "0", "--level", "full", "--verbose", "--json", str(out), "--quiet",
                     "--inject-fault", f"march:{FAULT_SM}:{FAULT_BYTE}", "--inject-fault", f"sweep-hole:{HOLE_BYTES}"])
    text = capsys.readouterr().out
    print(text)
    assert code == 1
    dev = json.loads(out.read_text())["devices"][0]
    (failure,) = dev["measured"]["march"]["failures"]
    assert (failure["sm_id"], failure["first_bad_byte"], failure["expected_word"], failure["read_word"]) == \
        (FAULT_SM, FAULT_BYTE, 0, 1)
    assert dev["measured"]["granule_sweep"]["failing_bytes"] == [HOLE_BYTES]
    rows = {v["quantity"]: v for v in dev["verdicts"]}
    march = rows[f"shared memory of SM {FAULT_SM} (march test)"]
    assert march["verdict"] == "MISMATCH" and march["measured"] == f"byte {FAULT_BYTE}: read 0x00000001, expected 0x00000000"
    sweep = next(v for q, v in rows.items() if q.startswith("every ") and "multiple launches" in q)
    assert sweep["verdict"] == "ERROR" and f"not monotone: failed at [{HOLE_BYTES}] B" in sweep["note"]
    assert f"shared memory of SM {FAULT_SM} (march test)" in text and "not monotone" in text
