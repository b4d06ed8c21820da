"""pytest plugin: the regression suite over saved baselines, one test per device and quantity.

    pytest --smem-baseline DIR [--smem-simulate PROFILE ...] [--smem-allow-missing] --junitxml out.xml

The devices are measured once, when the session collects; each quantity of each device becomes a test
named ``smem-baseline::device<N>-<model>::<quantity>`` that fails with "baseline X, now Y". A device
measured incompletely is one failed test (``::measured``), what it lacks is skipped, and the session exits
4 when nothing else failed, as ``--compare`` does. Without
``--smem-baseline`` the plugin does nothing: these hooks are all pytest loads in every session, and the
suite (``suite.py``, which imports the tool) is loaded only when asked to measure.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

# The suite, once this session collected it: only its items can change the session's exit status.
SUITE = pytest.StashKey[ModuleType]()


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


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --smem-baseline, add the baseline suite's tests to the session."""
    directory = config.getoption("smem_baseline")
    if not directory:
        return
    # Deferred: pytest loads this plugin in every session; the tool is imported only when asked to measure.
    from bisect_smem.app.plugin import suite

    config.stash[SUITE] = suite
    items.extend(suite.collect(session, Path(directory), config.getoption("smem_simulate") or [],
                               config.getoption("smem_allow_missing")))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Exit 4, as --compare does, when the only failures are devices not measured completely: the run is to
    be repeated, nothing regressed."""
    suite = session.config.stash.get(SUITE, None)
    if suite is not None:
        session.exitstatus = suite.exit_status(session, exitstatus)
