"""Kernel names on a driver without cuFuncGetName and cuKernelGetName (before R545): the collector takes them
from the calls that made the handles (cuLibraryGetKernel, cuModuleGetFunction, cuKernelGetFunction,
cudaGetFuncBySymbol) and writes each as a `function` line, so that CUTLASS's refused initialize() is still
named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bisect_smem.core.trace_read import read_trace
from tests.trace.fake_process import CUTLASS
from tests.trace.fakes import build_fakes, lines, play


@pytest.fixture(scope="module")
def r535_out(tmp_path_factory: pytest.TempPathFactory, collector: Path) -> Path:
    fakes = build_fakes(tmp_path_factory.mktemp("fakes-r535"), r535=True)
    out = tmp_path_factory.mktemp("r535")
    done = play(fakes, collector, out, "r535")
    assert done.returncode == 0, done.stderr
    return out


def _functions(written: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {r["handle"]: (r["api"], r["name"]) for r in written if r["event"] == "function"}


def test_cutlass_refused_initialize_is_named_without_the_drivers_name_calls(r535_out: Path) -> None:
    (refused,) = [a for a in read_trace(r535_out).attribute_sets if a.value == 279552]
    assert refused.refused and refused.kernel == CUTLASS.decode()
    written = lines(r535_out)
    (driver_set,) = [r for r in written if r.get("api") == "cuKernelSetAttribute"]
    # the handle's name is in the function line of the call that made it, for a reader that names by handle
    assert _functions(written)[driver_set["handle"]] == ("cuLibraryGetKernel", CUTLASS.decode())


def test_each_call_that_makes_a_handle_names_it_once(r535_out: Path) -> None:
    written = lines(r535_out)
    functions = _functions(written)
    assert sorted(functions.values()) == sorted([
        ("cuLibraryGetKernel", CUTLASS.decode()), ("cuModuleGetFunction", "_Z6kernelPf"),
        ("cuKernelGetFunction", CUTLASS.decode()),  # the CUfunction of a named CUkernel
        ("cudaGetFuncBySymbol", "_Z11stub_kernelPf"),  # the host stub's own symbol
    ])
    assert len([r for r in written if r["event"] == "function"]) == len(functions)
    (launch,) = [r for r in written if r["event"] == "launch" and r["correlation"] == 6]
    assert launch["name"] == CUTLASS.decode() and functions[launch["handle"]][0] == "cuKernelGetFunction"


def test_launches_of_the_module_function_are_named(r535_out: Path) -> None:
    names = {(lnch.api, lnch.dynamic_bytes): lnch.kernel for lnch in read_trace(r535_out).launches}
    assert names[("cuLaunchKernel", 1000)] == names[("cuLaunchKernel", 300000)] == "_Z6kernelPf"


def test_a_driver_with_the_name_calls_writes_no_function_lines(fakes: Path, collector: Path, tmp_path: Path) -> None:
    done = play(fakes, collector, tmp_path, "r535")  # the same calls, on a driver that names handles itself
    assert done.returncode == 0, done.stderr
    written = lines(tmp_path)
    assert not [r for r in written if r["event"] == "function"]
    assert [a.kernel for a in read_trace(tmp_path).attribute_sets if a.value == 279552] == [CUTLASS.decode()]
