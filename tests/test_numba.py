"""The numba-cuda backend without a GPU: its kernels compile to PTX through NVVM for every profile, the
internals it reaches for the opt-in are still where it expects them, and cross-checks find disagreements."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from bisect_smem.analysis.crosscheck import cross_check, with_cross_checks
from bisect_smem.app import cli
from bisect_smem.core.profiles import PROFILES, ArchProfile
from tests.conftest import run_cli_json

numba_backend = pytest.importorskip("bisect_smem.devices.backends.numba_backend")
pytest.importorskip("numba_cuda", reason="numba-cuda is in the test extra")


@pytest.fixture(scope="module")
def functions() -> dict:
    cuda = numba_backend.import_cuda()
    return cuda, numba_backend.kernel_functions(cuda, numba_backend.helpers_path(), (0, 1, 1024, 49152))


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.arch)
def test_numba_kernels_compile_to_ptx_for_every_profile(profile: ArchProfile, functions: tuple) -> None:
    from numba import uint32, uint64

    cuda, fns = functions
    for name, fn in fns.items():
        signature = (uint32, uint32, uint32[:]) if name.startswith("probe") else (uint32[:], uint64)
        try:
            ptx, _ = cuda.compile_ptx(fn, signature, cc=profile.compute_capability)
        except Exception as exc:  # noqa: BLE001 - NVVM names an unsupported target in its message
            if "unsupported" in str(exc).lower() or "not supported" in str(exc).lower():
                pytest.skip(f"this NVVM cannot target {profile.arch}: {exc}")
            raise
        assert f".target {profile.arch}" in ptx
        if name.startswith("probe:"):
            static = int(name.split(":")[1])
            declared = [line for line in ptx.splitlines() if ".shared" in line and ".b8" in line]
            assert sum(".extern" in line for line in declared) == 1, declared  # the dynamic array
            assert sum(f"[{static}]" in line for line in declared) == (1 if static else 0), declared
            assert "bisect_smem_sreg" in ptx
        else:
            assert "bisect_smem_smid" in ptx and "bisect_smem_globaltimer" in ptx


def test_the_numpy_shim_restores_row_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    monkeypatch.delattr(np, "row_stack", raising=False)
    numba_backend.apply_numpy_compat()
    assert np.row_stack is np.vstack


def test_numba_internals_used_for_the_opt_in_are_still_there() -> None:
    # kernel_handle() reaches compiled._codelibrary.get_cufunc().handle; fail loudly if numba-cuda moves it.
    from numba.cuda import codegen, dispatcher

    assert callable(getattr(codegen.CUDACodeLibrary, "get_cufunc", None))
    assert "self._codelibrary" in inspect.getsource(dispatcher._Kernel)
    from cuda.bindings import driver as cu

    assert hasattr(cu, "cuKernelSetAttribute") and hasattr(cu, "cuKernelGetFunction")


def test_missing_numba_names_the_extra(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    class OneDevice:
        def device_count(self) -> int:
            return 1

    real = numba_backend.importlib.util.find_spec
    monkeypatch.setattr(numba_backend, "libcuda", lambda: OneDevice())
    monkeypatch.setattr(numba_backend.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("numba") else real(name, *a))
    assert cli.main(["--backend", "numba"]) == 3
    err = capsys.readouterr().err
    assert "the numba backend needs numba" in err and "pip install 'bisect-smem[numba]'" in err


def _sim_report(spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):

    from bisect_smem.core.model import Report

    _, report = run_cli_json(["--simulate", spec], tmp_path, capsys, f"{spec.replace(',', '_')}.json")
    return Report.from_dict(report).devices[0]


def test_cross_check_agrees_on_equal_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _sim_report("h200", tmp_path, capsys)
    rows = cross_check(a, a)
    assert len(rows) > 100 and {r.verdict for r in rows} == {"match"}


def test_cross_check_names_both_values_when_backends_disagree(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    a = _sim_report("h200", tmp_path, capsys)
    b = replace(_sim_report("h200,optin=200K", tmp_path, capsys), backend="numba")
    rows = {r.quantity: r for r in cross_check(a, b)}
    row = rows["sim = numba: optin_dynamic_ceiling_bytes"]
    assert row.verdict == "MISMATCH" and row.note == "sim 232448, numba 204800"
    merged = with_cross_checks({"sim": (a,), "numba": (b,)})
    assert [d.backend for d in merged] == ["sim", "numba"]
    assert any(v.quantity.startswith("sim = numba: ") for v in merged[0].verdicts)
