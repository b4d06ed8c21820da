"""pytest plugin: the regression suite over saved baselines, one test per device and quantity.

    pytest --smem-baseline DIR [--smem-simulate PROFILE ...] [--smem-allow-missing] --junitxml out.xml

The devices are measured once, when the session collects; each quantity of each device becomes a test
named ``smem-baseline::device<N>-<model>::<quantity>`` that fails with "baseline X, now Y". A device
measured incompletely is one failed test (``::measured``), what it lacks is skipped, and the session exits
4 when nothing else failed, as ``--compare`` does. Without
``--smem-baseline`` the plugin does nothing, and it never imports CuPy until asked to measure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options: --smem-baseline, --smem-simulate, --smem-allow-missing."""
    group = parser.getgroup("bisect_smem", "shared memory baselines (bisect_smem)")
    group.addoption("--smem-baseline", metavar="DIR", help="compare this machine's GPUs with the baselines in DIR")
    group.addoption("--smem-simulate", action="append", metavar="PROFILE",
                    help="measure a simulated device instead of the GPUs (repeatable)")
    group.addoption("--smem-allow-missing", action="store_true", help="skip devices that have no baseline")


def pytest_configure(config: pytest.Config) -> None:
    """Options that would be ignored without --smem-baseline are a usage error, not "no tests ran"."""
    if config.getoption("smem_baseline") is not None and not config.getoption("smem_baseline").strip():
        raise pytest.UsageError("--smem-baseline was given an empty path (is a variable unset?)")
    if config.getoption("smem_baseline") is None:
        for option in ("smem_simulate", "smem_allow_missing"):
            if config.getoption(option):
                raise pytest.UsageError(f"--{option.replace('_', '-')} needs --smem-baseline DIR")
        return
    folder = Path(config.getoption("smem_baseline"))
    if not folder.is_dir():  # a mistyped folder would otherwise be "no baseline", skipped with --smem-allow-missing
        what = "is not a folder" if folder.exists() else "does not exist"
        raise pytest.UsageError(f"--smem-baseline {folder} {what}")


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
            from bisect_smem.app.render.baselines import regression_line  # deferred: see collect()

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
        # Deferred: pytest loads this plugin in every session; the tool is imported only when asked to measure.
        from bisect_smem.core.errors import BisectSmemError

        try:
            devices = measure(self.simulate)
        except BisectSmemError as exc:
            return [QuantityItem.from_parent(self, name="measure", problem=f"could not measure: {exc}")]
        return [item for dev in devices for item in self._device_items(dev)]

    def _device_items(self, dev: Any) -> list[pytest.Item]:
        """One device's tests, judged as --compare judges it (analysis/baseline.py compare_device): what an
        incomplete measurement lacks is skipped, not failed, and the measurement itself is one failure."""
        # Deferred, as in collect(): the tool is imported only when asked to measure.
        from bisect_smem.analysis.baseline import comparable, compare_device, incomplete_reason, model_slug
        from bisect_smem.core.errors import BisectSmemError
        from bisect_smem.core.quantities import compare_quantities

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
    from bisect_smem.app.run.requests import build_request  # deferred: see BaselineSuite.collect
    from bisect_smem.app.run.runner import run

    return run(build_request(None, simulate))


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --smem-baseline, add the baseline suite's tests to the session."""
    directory = config.getoption("smem_baseline")
    if not directory:
        return
    suite = BaselineSuite.from_parent(session, name="smem-baseline", directory=Path(directory),
                                      simulate=config.getoption("smem_simulate") or [],
                                      allow_missing=config.getoption("smem_allow_missing"))
    items.extend(suite.collect())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Exit 4, as --compare does, when the only failures are devices not measured completely: the run is to
    be repeated, nothing regressed."""
    from bisect_smem.core.errors import ExitCode  # deferred, as in collect()

    incomplete = [i for i in session.items if isinstance(i, QuantityItem) and i.incomplete]
    if incomplete and exitstatus == pytest.ExitCode.TESTS_FAILED and session.testsfailed == len(incomplete):
        session.exitstatus = ExitCode.INCOMPLETE
