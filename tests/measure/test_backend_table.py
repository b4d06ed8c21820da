"""The backends' table: one line per backend, read without loading any backend or its library, each line
building its backend, and no circle between the table and the backends."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys

import pytest

from bisect_smem.core.errors import UsageError
from bisect_smem.devices.backends.entry import BackendEntry
from bisect_smem.devices.backends.table import BACKENDS, REAL_BACKENDS, get_backend
from tests.paths import PACKAGE, ROOT


def _loaded_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"import json, sys; {code}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_reading_the_table_loads_no_backend_and_no_library() -> None:
    loaded = _loaded_after("from bisect_smem.devices.backends.table import BACKENDS")
    ours = [m for m in loaded if m.startswith("bisect_smem.devices.backends.")]
    assert sorted(ours) == sorted(["bisect_smem.devices.backends.entry", "bisect_smem.devices.backends.table",
                                   *(f"bisect_smem.devices.backends.{name}" for name in BACKENDS)])
    assert [m for m in loaded if m.split(".")[0] in ("cupy", "numba", "numba_cuda", "cuda")] == []


@pytest.mark.parametrize("name", list(BACKENDS))
def test_each_line_builds_its_backend_and_loads_no_library(name: str) -> None:
    # Building a backend imports its module, never CuPy or numba: those load when a device is opened.
    loaded = _loaded_after(f"from bisect_smem.devices.backends.table import get_backend; get_backend({name!r})")
    assert f"bisect_smem.devices.backends.{name}.backend" in loaded
    assert [m for m in loaded if m.split(".")[0] in ("cupy", "numba")] == []
    assert get_backend(name).name == name


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_backend_module_imported_first_needs_no_table(name: str) -> None:
    # The old registry held each backend's required modules and was imported by the backends it imported:
    # a circle that held only while the registry came first. A backend now reads its own package's entry.
    module = BACKENDS[name].factory.split(":")[0]
    loaded = _loaded_after(f"import {module}")
    assert module in loaded and "bisect_smem.devices.backends.table" not in loaded


def test_no_module_but_the_tables_users_imports_it() -> None:
    # The backends never import the table; the table imports only their packages' entries.
    importers = [str(path.relative_to(PACKAGE)) for path in PACKAGE.joinpath("devices").rglob("*.py")
                 if any(isinstance(node, ast.ImportFrom) and node.module == "bisect_smem.devices.backends.table"
                        for node in ast.walk(ast.parse(path.read_text())))]
    assert importers == []


def test_the_simulator_is_built_from_the_simulate_texts() -> None:
    backend = get_backend("sim", ("h200", "a100,fewer=1"))
    assert backend.device_count() == 2 and backend.open(1, (0,)).model.fewer_blocks == 1
    with pytest.raises(UsageError, match="unknown profile 'k80'"):
        get_backend("sim", ("k80",))


def test_an_unknown_name_lists_the_table() -> None:
    with pytest.raises(UsageError, match=r"unknown backend 'opencl'; valid: cupy, numba, sim$"):
        get_backend("opencl")


def test_all_means_every_backend_that_reaches_a_gpu() -> None:
    assert REAL_BACKENDS == ("cupy", "numba")
    assert BACKENDS["sim"].simulated and not BACKENDS["sim"].required_modules


def test_a_missing_module_is_named_and_asked_of_its_top_package(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def find_spec(name: str) -> object | None:
        asked.append(name)
        return None if name == "cuda" else object()

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert BACKENDS["numba"].missing_module() == "cuda.bindings"
    assert asked == ["numba", "numba_cuda", "cuda"]  # "cuda.bindings" is asked as "cuda": asking imports nothing
    assert BACKENDS["cupy"].missing_module() is None


def test_an_entry_names_a_module_and_an_attribute() -> None:
    with pytest.raises(ValueError, match="factory must be 'module:attribute'"):
        BackendEntry(name="opencl", factory="bisect_smem.devices.backends.opencl")
