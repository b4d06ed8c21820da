"""One step is one experiment: each runs with a StepContext, the Prior the later steps build on is made
once, and one ``expect`` reads every probe's outcome (fits, too big, or a fault)."""

from __future__ import annotations

import inspect

import pytest

from bisect_smem.core.errors import ProbeFault
from bisect_smem.devices.backends.sim.backend import SimBackend
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.device_info import open_device
from bisect_smem.devices.probes import ClusterOutcome, LaunchOutcome, LeftoverOutcome, Outcome
from bisect_smem.experiments import context
from bisect_smem.experiments.clusters import DOES_NOT_LAUNCH
from bisect_smem.experiments.config import MeasureConfig
from bisect_smem.experiments.context import StepContext
from bisect_smem.experiments.expect import NOTHING_TOO_BIG, expect
from bisect_smem.experiments.measure import DeviceMeasurement
from bisect_smem.experiments.plan import plan_steps
from bisect_smem.experiments.steps import assemble


def test_expect_reads_fits_too_big_and_faults() -> None:
    assert expect(LaunchOutcome(Outcome.OK), "a launch") is True
    assert expect(LaunchOutcome(Outcome.INVALID_VALUE), "a launch") is False
    assert expect(LaunchOutcome(Outcome.OUT_OF_RESOURCES), "a launch") is False
    with pytest.raises(ProbeFault, match="a launch: unexpected verify_failed") as fault:
        expect(LaunchOutcome(Outcome.VERIFY_FAILED, "3 B wrong"), "a launch")
    assert not fault.value.sticky
    with pytest.raises(ProbeFault) as sticky:
        expect(LeftoverOutcome(Outcome.ILLEGAL_ADDRESS), "a read")
    assert sticky.value.sticky
    with pytest.raises(ProbeFault, match="must run: unexpected invalid_value"):
        expect(LeftoverOutcome(Outcome.INVALID_VALUE), "must run", NOTHING_TOO_BIG)
    assert expect(ClusterOutcome(Outcome.CLUSTER_MISCONFIG), "a cluster", DOES_NOT_LAUNCH) is False
    with pytest.raises(ProbeFault):
        expect(ClusterOutcome(Outcome.CLUSTER_MISCONFIG), "a cluster")


def test_every_step_runs_with_its_context_alone() -> None:
    for step in plan_steps(MeasureConfig(level="full")):
        parameters = list(inspect.signature(step.run).parameters.values())
        assert [p.name for p in parameters] == ["ctx"], step.key
        assert inspect.get_annotations(type(step).run, eval_str=True)["ctx"] is StepContext, step.key
    assert not [name for name in vars(DeviceMeasurement) if name.startswith("measure_")]


def test_the_prior_is_built_once_after_the_quick_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    built = []
    real = context.Prior.build

    def counting(earlier, facts):  # noqa: ANN001, ANN202
        built.append(earlier)
        return real(earlier, facts)

    monkeypatch.setattr(context.Prior, "build", staticmethod(counting))
    config = MeasureConfig(level="full")
    session, info = open_device(SimBackend((SimSpec.parse("h200"),)), 0, config.static_sizes)
    done, error = DeviceMeasurement.for_device(session, info, config).run(plan_steps(config))
    assert error is None and len(built) == 1
    assert built[0].optin_dynamic_ceiling_bytes == 232448 and built[0].allocation_granularity_bytes == 128
    measured, errors = assemble(done)
    assert errors == ["leftovers: needs a writer in another process, which this run was not given"]
    assert measured.residency and measured.carveout and measured.clusters and measured.march is not None
