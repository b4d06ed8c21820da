"""Shared fixtures: the `gpu` marker skips itself without a device; CuPy and numba cache kernels in a temp folder."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a CUDA device and CuPy are usable here, else why not."""
    from bisect_smem.core.errors import BackendUnavailable
    from bisect_smem.devices.backends.cupy_backend import CupyBackend

    try:
        count = CupyBackend().device_count()
    except BackendUnavailable as exc:
        return str(exc)
    return None if count else "no CUDA device is visible"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=f"needs a GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cupy-cache"))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "numba-cache"))


def run_cli_json(args: list[str], folder: Path, capsys: pytest.CaptureFixture[str],
                 name: str = "r.json") -> tuple[int, dict]:
    """Run the tool through ``main`` with ``--json`` into ``folder``; its exit code and the parsed report."""
    from bisect_smem.app import cli

    out = folder / name
    code = cli.main([*args, "--json", str(out), "--quiet"])
    capsys.readouterr()
    return code, json.loads(out.read_text())
