"""The step loop: the one allocation-granule fallback, the reference split's names, done steps skipped
and the rest announced, and a sticky fault that ends an inline run naming its step."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.core.hardware import DEFAULT_GRANULE_BYTES
from bisect_smem.core.levels import (
    REFERENCE_THREADS,
    split_quantity_prefix,
    split_search_name,
)
from bisect_smem.core.model import Measured
from bisect_smem.core.profiles import find_profile
from bisect_smem.core.quantities import quantities, quantity_level
from bisect_smem.devices.backends.sim.backend import SimBackend
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.experiments.context import DeviceFacts, Prior
from bisect_smem.experiments.measure import DeviceMeasurement, MeasureConfig
from bisect_smem.experiments.plan import plan_steps

H200_SMS = 132


def session(text: str = "h200"):
    return SimBackend((SimSpec.parse(text),)).open(0, (0,))


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


