"""The numba-cuda backend without a GPU: its kernels compile to PTX through NVVM for every profile, the
internals it reaches for the opt-in are still where it expects them, and cross-checks find disagreements."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.analysis.crosscheck import cross_check, with_cross_checks
from bisect_smem.app.cli import main as cli
from bisect_smem.core.profiles import PROFILES, ArchProfile
from tests.conftest import run_cli_json
from tests.nvrtc import target
from tests.paths import ROOT

numba_backend = pytest.importorskip("bisect_smem.devices.backends.numba.backend")
pytest.importorskip("numba_cuda", reason="numba-cuda is in the test extra")


@pytest.fixture(scope="module")
def cuda():
    return numba_backend.import_cuda()


def _kernels():
    from bisect_smem.devices.backends.numba import kernels as numba_kernels

    return numba_kernels


@pytest.mark.parametrize("profile", PROFILES, ids=target)
def test_numba_kernels_compile_to_ptx_for_every_profile(profile: ArchProfile, cuda) -> None:
    from numba import uint32, uint64

    cc = profile.compute_capability
    for name, fn in _kernels().kernel_functions(cc, (0, 1, 1024, 49152)).items():
        signature = (uint32, uint32, uint32[:]) if name.startswith("probe") else (uint32[:], uint64)
        try:
            ptx, _ = cuda.compile_ptx(fn, signature, cc=profile.compute_capability)
        except Exception as exc:  # noqa: BLE001 - NVVM names an unsupported target in its message
            if "unsupported" in str(exc).lower() or "not supported" in str(exc).lower():
                pytest.skip(f"this NVVM cannot target {target(profile)}: {exc}")
            raise
        assert f".target {target(profile)}" in ptx
        if name.startswith("probe:"):
            static = int(name.split(":")[1])
            declared = [line for line in ptx.splitlines() if ".shared" in line and ".b8" in line]
            assert sum(".extern" in line for line in declared) == 1, declared  # the dynamic array
            assert sum(f"[{static}]" in line for line in declared) == (1 if static else 0), declared
            # Each register is read inline where the target has it, and never emitted where it does not.
            for register in ("total_smem_size", "reserved_smem_offset_begin", "reserved_smem_offset_end",
                             "reserved_smem_offset_cap"):
                assert bool(re.search(rf"mov\.u32\s+%r\d+, %{register};", ptx)) == (cc >= (8, 0)), register
            assert bool(re.search(r"mov\.u32\s+%r\d+, %aggr_smem_size;", ptx)) == (cc >= (9, 0)), name
        else:
            assert re.search(r"mov\.u32\s+%r\d+, %smid;", ptx) and re.search(r"mov\.u64\s+%rd\d+, %globaltimer;", ptx)
        assert ".extern .func" not in ptx and "bisect_smem_" not in ptx  # nothing left to link in


def _closure_key(cc: tuple[int, int]) -> str:
    """The part of numba's cache key that comes from what each kernel closes over, computed in a fresh
    process (numba hashes ``serialize.dumps`` of the closure's values)."""
    code = ("import hashlib, sys; from bisect_smem.devices.backends.numba import backend as nb; nb.import_cuda(); "
            "from numba.cuda.serialize import dumps; from bisect_smem.devices.backends.numba import kernels as nk; "
            f"fns = nk.kernel_functions({cc!r}, (0, 1024)); "
            "print(sorted((n, hashlib.sha256(dumps(tuple(c.cell_contents for c in f.__closure__ or ()))).hexdigest()) "
            "for n, f in fns.items()))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc.stdout


def test_the_kernels_cache_key_is_the_same_in_every_process() -> None:
    # An intrinsic or a module in a kernel's closure pickles differently per process, and every run
    # would then miss the cache.
    first, second = _closure_key((9, 0)), _closure_key((9, 0))
    assert first == second and "probe:1024" in first
    assert _closure_key((8, 0)) != first  # the registers a cc has are part of the key


@pytest.mark.parametrize("cc", [(7, 5), (9, 0)], ids=str)
def test_the_kernels_can_be_pickled_into_numba_s_cache(cc: tuple[int, int], cuda) -> None:
    # numba refuses to cache a kernel that links a file ("Cannot pickle CUDACodeLibrary with linking
    # files"); it saves what _reduce_states returns.
    from numba import types, uint32, uint64
    from numba.cuda.compiler import compile_cuda

    for name, fn in _kernels().kernel_functions(cc, (0, 1024)).items():
        args = (uint32, uint32, uint32[:]) if name.startswith("probe") else (uint32[:], uint64)
        library = compile_cuda(fn, types.void, args, cc=cc).library
        library.get_asm_str(cc=cc)
        assert not library._linking_files, name
        state = pickle.loads(pickle.dumps(library._reduce_states()))
        assert state["ptx_cache"] and state["llvm_strs"], name


def test_kernels_are_compiled_with_numba_s_disk_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      cuda) -> None:
    # cuda.jit with a signature compiles at once, which needs a GPU: record what it is asked instead.
    calls = []

    def jit(signature: str, **options):
        return lambda function: calls.append((signature, options, function)) or function

    monkeypatch.setattr(cuda, "jit", jit)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    from numba.core import config

    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path))
    kernels, residency = numba_backend.compile_kernels(cuda, (9, 0), (0, 1024))
    assert set(kernels) == {(0, False), (0, True), (1024, False), (1024, True)}
    assert len(calls) == 5 and all(options == {"cache": True} for _, options, _ in calls)
    assert kernels[(0, False)] is kernels[(0, True)]  # one function: the second compile is a cache load
    assert any(tmp_path.iterdir())  # numba's cache directory for this source file, under NUMBA_CACHE_DIR


def test_kernels_compile_every_run_where_no_cache_directory_can_be_written(monkeypatch: pytest.MonkeyPatch,
                                                                           cuda) -> None:
    from numba.cuda import dispatcher

    calls = []
    monkeypatch.setattr(cuda, "jit", lambda signature, **options: lambda f: calls.append(options) or f)

    def no_locator(function):
        raise RuntimeError("cannot cache function 'probe': no locator available for file")

    monkeypatch.setattr(dispatcher, "CUDACache", no_locator)
    numba_backend.compile_kernels(cuda, (9, 0), (0,))
    assert calls == [{}, {}, {}]


def test_the_numpy_shim_restores_row_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    monkeypatch.delattr(np, "row_stack", raising=False)
    numba_backend.numpy_with_compat()
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

    real = importlib.util.find_spec
    monkeypatch.setattr(numba_backend, "libcuda", lambda: OneDevice())
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("numba") else real(name, *a))
    assert cli.main(["--backend", "numba"]) == 3
    err = capsys.readouterr().err
    assert "the numba backend needs numba" in err and "pip install numba-cuda (the numba extra)" in err


def _sim_report(spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):

    from bisect_smem.core.model import Report
    from bisect_smem.core.schema import construct

    _, report = run_cli_json(["--simulate", spec], tmp_path, capsys, f"{spec.replace(',', '_')}.json")
    return construct(report, Report).devices[0]


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


CACHED_RUN = """
import json
from bisect_smem.devices.backends.numba.backend import NumbaSession
from bisect_smem.devices.probes import ProbeKernel

session = NumbaSession(0, (0, 1024))
dispatchers = [*session._kernels.values(), session._residency]
hits = sum(sum(d.stats.cache_hits.values()) for d in dispatchers)
misses = sum(sum(d.stats.cache_misses.values()) for d in dispatchers)
optin = ProbeKernel(1024, True)
assert session.set_max_dynamic(optin, 100_000).ok
outcomes = [session.launch(ProbeKernel(0, False), 40_000, 128), session.launch(optin, 100_000, 256)]
print(json.dumps({"hits": hits, "misses": misses,
                  "outcomes": [[o.outcome.name, o.bytes_verified, repr(o.registers)] for o in outcomes]}))
"""


@pytest.mark.gpu
def test_a_second_process_loads_every_numba_kernel_from_the_cache(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),
           "PYTHONPATH": str(ROOT)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", CACHED_RUN], env=env, capture_output=True, text=True,
                                      check=True).stdout.splitlines()[-1]) for _ in range(2)]
    # First run: each function compiles once; its opt-in twin is already a cache load.
    assert (runs[0]["misses"], runs[0]["hits"]) == (3, 2), runs[0]
    assert (runs[1]["misses"], runs[1]["hits"]) == (0, 5), runs[1]
    assert runs[0]["outcomes"] == runs[1]["outcomes"]
    assert [o[0] for o in runs[1]["outcomes"]] == ["OK", "OK"] and runs[1]["outcomes"][1][1] == 100_000 + 1024


def test_scipy_is_hidden_while_numba_loads_and_only_then(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from bisect_smem.devices.backends.numba.backend import scipy_hidden

    monkeypatch.delitem(sys.modules, "scipy", raising=False)
    with scipy_hidden(), pytest.raises(ImportError):
        import scipy  # noqa: F401
    assert "scipy" not in sys.modules  # a later import is free to find it
    loaded = types.ModuleType("scipy")
    monkeypatch.setitem(sys.modules, "scipy", loaded)
    with scipy_hidden():
        assert sys.modules["scipy"] is loaded  # already imported by this process: left alone
