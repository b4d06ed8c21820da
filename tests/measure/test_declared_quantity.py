"""Adding a measurement is its step and its declaration: a quantity declared here, in the test alone, is in the
JSON report, the baseline comparison, the Prometheus file, the NFD labels and the read-back bounds, with no
other list of names touched. And every declared quantity reaches every output that derives from the
declarations: one dropped from an output fails here."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from bisect_smem.core.errors import BaselineError
from bisect_smem.core.quantities import BYTES, Filled, Quantity, declared, declared_for_now, json_quantities
from bisect_smem.core.saved import load_report
from bisect_smem.devices.probes import ProbeKernel
from bisect_smem.experiments import plan
from bisect_smem.experiments.context import StepContext
from bisect_smem.experiments.steps import Step
from tests.conftest import run_main

THREADS = 256
NEW = Quantity("available_dynamic_256_threads_bytes", "bytes", BYTES, nfd="smem.available-256-bytes",
               help="What cuOccupancyAvailableDynamicSMemPerBlock offers a 256-thread block without opt-in.")
SHIFT = {"bytes": 0}  # what the fixture's device reports beyond the API's answer (a regression to find)


@dataclass(frozen=True)
class Available256(Step):
    """The new measurement: the occupancy API's answer for 256-thread blocks, asked of the device."""

    kind: ClassVar[str] = "available_256"

    def run(self, ctx: StepContext) -> int | None:
        """The API's answer on a never-raised function."""
        answer = ctx.session.available_dynamic_smem(ProbeKernel(0, opt_in=False), THREADS)
        return None if answer is None else answer + SHIFT["bytes"]

    def contribute(self, value: int | None) -> tuple[Filled, ...]:
        """The one quantity it measures."""
        return (NEW.filled(value),)


@pytest.fixture()
def new_quantity(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Quantity]:
    """NEW declared, and its step planned after the others, for the length of one test."""
    run_main(["--simulate", "h200", "--level", "quick", "--inline", "--quiet"], capsys)  # every module loaded
    original = plan.plan_steps

    def with_new(*args: object, **kwargs: object) -> list[Step]:
        return [*original(*args, **kwargs), Available256()]

    # The plan is imported by name where the runner uses it: patch it there too, wherever that is.
    for module in list(sys.modules.values()):
        if getattr(module, "plan_steps", None) is original:
            monkeypatch.setattr(module, "plan_steps", with_new)
    SHIFT["bytes"] = 0
    with declared_for_now(NEW):
        yield NEW


def test_a_quantity_declared_alone_reaches_every_output(new_quantity: Quantity, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    report, prom, nfd, base = (tmp_path / n for n in ("r.json", "m.prom", "f.nfd", "base"))
    code, _out, err = run_main(["--simulate", "h200", "--inline", "--json", str(report), "--prom", str(prom),
                                "--nfd", str(nfd), "--save-baseline", str(base)], capsys)
    assert code == 0, err
    dev = json.loads(report.read_text())["devices"][0]
    assert dev["measured"]["quantities"] == {new_quantity.name: 49152}
    assert json_quantities(dev)[new_quantity.key] == 49152
    assert f"# HELP bisect_smem_{new_quantity.name} {new_quantity.help}" in prom.read_text()
    assert [line.split(" ")[-1] for line in prom.read_text().splitlines()
            if line.startswith(f"bisect_smem_{new_quantity.name}{{")] == ["49152"]
    assert f"/{new_quantity.nfd}=49152" in nfd.read_text()
    # the baseline compares it: the same device passes, one whose answer moved is a regression naming it
    assert run_main(["--simulate", "h200", "--inline", "--compare", str(base)], capsys)[0] == 0
    SHIFT["bytes"] = -1024
    code, out, _err = run_main(["--simulate", "h200", "--inline", "--compare", str(base)], capsys)
    assert code == 1 and re.search(rf"\b{new_quantity.key} +baseline 49152, now 48128$", out, re.MULTILINE), out


def test_its_bounds_are_the_read_back_rule(new_quantity: Quantity, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    assert run_main(["--simulate", "h200", "--level", "standard", "--inline", "--json", str(report),
                     "--quiet"], capsys)[0] == 0
    data = json.loads(report.read_text())
    data["devices"][0]["measured"]["quantities"][new_quantity.name] = -5
    report.write_text(json.dumps(data))
    with pytest.raises(BaselineError, match=rf"measured\.quantities\.{new_quantity.name} must be an integer in "
                                            rf"0\.\.16777216 \(got -5\)"):
        load_report(report)


def test_every_declared_quantity_is_in_every_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.outputs.schemas import report_schema

    report, prom, nfd = (tmp_path / n for n in ("r.json", "m.prom", "f.nfd"))
    assert run_main(["--simulate", "h200", "--level", "full", "--inline", "--json", str(report), "--prom", str(prom),
                     "--nfd", str(nfd), "--quiet"], capsys)[0] == 0
    dev = json.loads(report.read_text())["devices"][0]
    compared, measured = json_quantities(dev), dev["measured"]
    schema = report_schema()["$defs"]["Measured"]["properties"]
    for q in declared("measured"):
        assert q.of(measured) is not None, f"{q.name} not measured in the report"
        assert q.key in compared or not q.compared, f"{q.name} not in the baseline comparison"
        assert q.help is None or f"\nbisect_smem_{q.name}{{" in prom.read_text(), f"{q.name} not in Prometheus"
        assert q.nfd is None or f"/{q.nfd}={q.of(measured)}\n" in nfd.read_text(), f"{q.name} not an NFD label"
        # A nullable count is anyOf an integer and null; its bounds are on the integer.
        number = next(s for s in schema[q.name].get("anyOf", [schema[q.name]]) if s.get("type") == "integer")
        assert (number["minimum"], number["maximum"]) == q.bounds, f"{q.name} not in the schema"


def test_every_attribute_a_source_reports_is_declared() -> None:
    from bisect_smem.core.attributes import SOURCE_KEYS

    names = {q.name for q in declared("reported")}
    assert {key for keys in SOURCE_KEYS.values() for key in keys} == names
