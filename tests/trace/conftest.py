"""Fixtures of the trace tests: the collector built once into a temporary cache, the fakes built once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trace.fakes import build_fakes, need_cc, play


@pytest.fixture(scope="session")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The collector, built as trace builds it, in a cache folder of its own."""
    need_cc()
    from bisect_smem.devices.collector import build

    return build.collector_library({"XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))})


@pytest.fixture(scope="session")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the fake libcupti and driver."""
    return build_fakes(tmp_path_factory.mktemp("fakes"))


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory, fakes: Path, collector: Path) -> Path:
    """A trace folder of the whole scenario of fake_process.py."""
    out = tmp_path_factory.mktemp("recorded")
    done = play(fakes, collector, out)
    assert done.returncode == 0, done.stderr
    return out

