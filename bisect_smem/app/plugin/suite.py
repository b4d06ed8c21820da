"""The baseline suite the plugin adds with --smem-baseline: the devices measured once, one test per device
and quantity, judged as ``--compare`` judges them. Loaded by the plugin's hooks only when asked to measure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bisect_smem.analysis.baseline import comparable, compare_device, incomplete_reason, model_slug
from bisect_smem.app.render.baselines import regression_line
from bisect_smem.app.run.requests import build_request
from bisect_smem.app.run.runner import run
from bisect_smem.core.errors import BisectSmemError, ExitCode
from bisect_smem.core.quantities import compare_quantities


class SmemRegression(AssertionError):
    """A quantity that differs from its baseline."""


class QuantityItem(pytest.Item):
    """One quantity of one device against its baseline (or a setup failure that stands in for them)."""

    def __init__(self, *, regression: Any = None, problem: str | None = None, skip: str | None = None,
                 incomplete: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.regression, self.problem, self.skip_reason = regression, problem, skip
        self.incomplete = incomplete  # the failure that stands for a measurement that did not complete

    def runtest(self) -> None:
        """Fail with 'baseline X, now Y' when the quantity regressed; skip or fail for setup problems."""
        if self.skip_reason:
            pytest.skip(self.skip_reason)
        if self.problem:
            raise SmemRegression(self.problem)
        if self.regression.fails:
            raise SmemRegression(regression_line(self.regression))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The regression line alone, without a traceback."""
        if isinstance(excinfo.value, SmemRegression):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where the test lives, for pytest's report."""
        return self.path, None, self.name


class BaselineSuite(pytest.Collector):
    """Measures the devices and yields one item per device and quantity."""

    def __init__(self, *, directory: Path, simulate: list[str], allow_missing: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.directory, self.simulate, self.allow_missing = directory, simulate, allow_missing

    def collect(self) -> list[pytest.Item]:
        """Measure the devices once and yield a test per device and quantity."""
        try:
            devices = measure(self.simulate)
        except BisectSmemError as exc:
            return [QuantityItem.from_parent(self, name="measure", problem=f"could not measure: {exc}")]
        return [item for dev in devices for item in self._device_items(dev)]

    def _device_items(self, dev: Any) -> list[pytest.Item]:
        """One device's tests, judged as --compare judges it (analysis/baseline.py compare_device): what an
        incomplete measurement lacks is skipped, not failed, and the measurement itself is one failure."""
        prefix = f"device{dev.index}-{model_slug(dev.name)}"

        def item(name: str, **kwargs: Any) -> pytest.Item:
            return QuantityItem.from_parent(self, name=f"{prefix}::{name}", **kwargs)

        try:
            result = compare_device(self.directory, dev)
        except BisectSmemError as exc:
            return [item("baseline", problem=str(exc))]
        items = [item("measured", incomplete=True, problem=(
            f"not measured completely ({incomplete_reason(dev)}); what it lacks ({len(result.unmeasured)} "
            "quantities) is not compared"))] if dev.incomplete else []
        if result.baseline is None:
            allowed = self.allow_missing
            return [*items, item("baseline", skip=result.note if allowed else None, problem=None if allowed else result.note)]
        if result.baseline_problem:
            items.append(item("baseline", problem=result.baseline_problem))
        lost = {r.name for r in result.unmeasured}
        for regression in compare_quantities(*comparable(dev, result.baseline)[:2]):
            skip = "not measured now (the measurement was incomplete): not a regression" if regression.name in lost else None
            items.append(item(regression.name, regression=regression, skip=skip))
        return items


def measure(simulate: list[str]) -> tuple[Any, ...]:
    """Every device, measured once: the simulated ones when given, else this machine's GPUs."""
    return run(build_request(None, simulate))


def collect(session: pytest.Session, directory: Path, simulate: list[str], allow_missing: bool) -> list[pytest.Item]:
    """The suite's tests for this session."""
    return BaselineSuite.from_parent(session, name="smem-baseline", directory=directory, simulate=simulate,
                                     allow_missing=allow_missing).collect()


def exit_status(session: pytest.Session, exitstatus: int) -> int:
    """4 when the only failures are devices not measured completely, else the session's own status."""
    incomplete = [i for i in session.items if isinstance(i, QuantityItem) and i.incomplete]
    if incomplete and exitstatus == pytest.ExitCode.TESTS_FAILED and session.testsfailed == len(incomplete):
        return ExitCode.INCOMPLETE
    return exitstatus
