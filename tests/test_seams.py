"""The seams between layers: the leftover writer handed to the experiments from the app layer (its typed
request and answer), the one allocation-granule fallback, the reference split's names, the shared step
loop, and the CLI's defaults read from where they are defined."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bisect_smem.app import cli
from bisect_smem.app.leftover_writer import WriteAnswer, WriteRequest, write_elsewhere
from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.core.hardware import DEFAULT_GRANULE_BYTES
from bisect_smem.core.levels import (
    DEFAULT_LEVEL,
    LEVELS,
    REFERENCE_THREADS,
    quantity_level,
    split_quantity_prefix,
    split_search_name,
)
from bisect_smem.core.model import Measured
from bisect_smem.core.profiles import find_profile
from bisect_smem.core.quantities import quantities
from bisect_smem.core.search import DEFAULT_CONFIRM
from bisect_smem.core.text import dash
from bisect_smem.devices.backends.base import DeviceAddress
from bisect_smem.devices.backends.sim import SimBackend
from bisect_smem.devices.backends.sim_spec import SimSpec
from bisect_smem.devices.probes import LeftoverOutcome, Outcome
from bisect_smem.experiments.context import DeviceFacts, Prior
from bisect_smem.experiments.measure import DeviceMeasurement, MeasureConfig
from bisect_smem.experiments.plan import plan_steps
from bisect_smem.experiments.validation import LEFTOVER_THREADS, Validation

H200_SMS = 132


def session(text: str = "h200"):
    return SimBackend((SimSpec.parse(text),)).open(0, (0,))


def test_the_writer_request_and_answer_travel_as_json() -> None:
    request = WriteRequest(DeviceAddress("sim", 0, "h200,leak=yes"), (0, 1024), 4096, 512, 132, 1 << 63, "/x/y.json")
    assert WriteRequest.from_json(request.to_json()) == request
    answer = WriteAnswer.of(LeftoverOutcome(Outcome.OK, "", (0, 1, 2), 1024))
    assert json.loads(answer.to_json()) == {"outcome": "ok", "detail": "", "sm_ids": [0, 1, 2], "words": 1024}
    assert WriteAnswer.from_json(answer.to_json()).leftover_outcome() == LeftoverOutcome(Outcome.OK, "", (0, 1, 2), 1024)


def test_the_experiment_reads_what_the_handed_in_writer_wrote() -> None:
    # The sim device keeps a leaking writer's pattern for the next session: a writer in this process is
    # enough to show the experiment reads exactly what its writer wrote, with the nonce it chose.
    calls: list[tuple[int, int, int]] = []

    def writer(dynamic_bytes: int, blocks: int, nonce: int) -> LeftoverOutcome:
        calls.append((dynamic_bytes, blocks, nonce))
        other = session("h200,leak=yes")
        try:
            return other.leftover_write(dynamic_bytes, LEFTOVER_THREADS, blocks, nonce)
        finally:
            other.close()

    left = Validation(session("h200,leak=yes"), H200_SMS, lambda _t: None, writer).leftovers(4099)
    assert calls and calls[0][:2] == (4096, H200_SMS)
    assert left.across_processes_words_matching == left.across_processes_words_read == H200_SMS * 1024
    assert left.writer_sms == left.reader_sms == H200_SMS


def test_a_writer_that_did_not_run_is_a_fault_and_none_is_an_error() -> None:
    def refused(_d: int, _b: int, _n: int) -> LeftoverOutcome:
        return LeftoverOutcome(Outcome.OTHER, "too many resources")

    with pytest.raises(ProbeFault, match="another process writing the leftover pattern"):
        Validation(session(), H200_SMS, lambda _t: None, refused).leftovers(4096)
    with pytest.raises(MeasurementError, match="needs a writer in another process"):
        Validation(session(), H200_SMS, lambda _t: None).leftovers(4096)


def test_the_writer_process_runs_and_its_failure_is_one_line(tmp_path: Path) -> None:
    lines: list[str] = []
    write = write_elsewhere(session("h200,leak=no"), (0,), lines.append)
    wrote = write(4096, H200_SMS, 7)
    assert wrote.outcome is Outcome.OK and len(set(wrote.sm_ids)) == H200_SMS and lines

    class Unopenable:
        def address(self) -> DeviceAddress:
            return DeviceAddress("sim", 0, "no-such-gpu")

    broken = write_elsewhere(Unopenable(), (0,), lines.append)  # type: ignore[arg-type]
    with pytest.raises(MeasurementError, match=r"^the writer process failed \(exit 1\): .*no-such-gpu"):
        broken(4096, H200_SMS, 7)


def test_one_granule_fallback_measured_published_default() -> None:
    measured, unknown = Measured(reserved_bytes=1024, allocation_granularity_bytes=256), Measured()
    sm_70 = find_profile("sm_70")
    assert sm_70 is not None
    published = DeviceFacts(profile=dataclasses.replace(sm_70, allocation_granularity_bytes=512))  # no real row
    assert Prior.build(measured, published).granule_bytes == 256  # differs from 128
    assert Prior.build(unknown, published).granule_bytes == 512
    assert Prior.build(Measured(), DeviceFacts()).granule_bytes == DEFAULT_GRANULE_BYTES == 128


def test_the_reference_split_has_one_set_of_names() -> None:
    config = MeasureConfig()
    done, error = DeviceMeasurement(session(), config).run(plan_steps(config))
    assert error is None
    from bisect_smem.experiments.steps import assemble

    measured, _ = assemble(done)
    assert set(measured.searches) >= {split_search_name(s, t) for s in config.static_sizes for t in config.threads}
    assert split_search_name(0, REFERENCE_THREADS) == "optin_dynamic_ceiling/static=0/threads=128"
    ref = f"{split_quantity_prefix(0, REFERENCE_THREADS)}.dynamic_ceiling_bytes"
    assert quantity_level(ref) == "quick"
    assert quantity_level(f"{split_quantity_prefix(1, REFERENCE_THREADS)}.dynamic_ceiling_bytes") == "standard"


def test_quantities_use_the_split_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.core.model import DeviceReport, Report
    from bisect_smem.core.schema import construct

    out = tmp_path / "r.json"
    assert cli.main(["--simulate", "h200", "--level", "quick", "--json", str(out), "--quiet"]) == 0
    (dev,) = construct(json.loads(out.read_text()), Report).devices
    assert isinstance(dev, DeviceReport)
    assert quantities(dev)[f"{split_quantity_prefix(0, REFERENCE_THREADS)}.dynamic_ceiling_bytes"] == 232448


def test_each_step_skips_done_steps_and_announces_the_rest() -> None:
    config = MeasureConfig(level="quick")
    steps = plan_steps(config)
    m = DeviceMeasurement(session(), config)
    done: dict = {}
    first = next(m.each_step(steps, done))
    started: list = []
    rest = list(m.each_step(steps, done, started.append))
    assert first[0] == steps[0] and [s for s, _ in rest] == started == steps[1:]
    assert list(done) == steps and all(r.step == s for s, r in [first, *rest])


def test_a_sticky_fault_ends_an_inline_run_naming_its_step() -> None:
    config = MeasureConfig(level="quick")
    done, error = DeviceMeasurement(session("h200,sticky=200000"), config).run(plan_steps(config))
    assert error is not None and error.startswith("static_split:0:128: ") and "drop --inline" in error
    assert [s.key for s in done] == ["default_ceiling", "attribute_accept_ceiling"]


def test_help_shows_the_defaults_from_their_definitions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default {DEFAULT_LEVEL}" in text and f"(default {DEFAULT_CONFIRM})" in text
    assert "{" + ",".join(LEVELS) + "}" in text


def test_dash() -> None:
    assert (dash(None), dash(0), dash("x")) == ("-", "0", "x")
