"""Starting fast without cutting corners: the CuPy module holds what the planned steps need and still
compiles, the context starts beside the import, and backends run side by side give the same reports."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

from bisect_smem.app.run.runner import run_concurrently
from bisect_smem.devices.backends.cupy import backend as cupy_backend
from bisect_smem.devices.kernel_abi import (
    FAULT_VARIANT_NAMES,
    ILLEGAL_ACCESS_NAME,
    NVRTC_OPTIONS,
    VALIDATE_NAMES,
    cluster_dsm_name,
    module_name_expressions,
    module_source,
    probe_name,
    residency_name,
)
from bisect_smem.experiments.config import DEFAULT_STATIC_SIZES, MeasureConfig
from bisect_smem.experiments.plan import plan_steps
from tests.nvrtc import NvrtcUnavailable, compile_source, supported_archs


def _kinds(config: MeasureConfig, supported: tuple[str, ...] | None = None) -> frozenset[str]:
    return frozenset(step.kind for step in plan_steps(config, supported))


def test_the_module_holds_every_variant_the_plan_needs_and_no_other() -> None:
    every = module_name_expressions(DEFAULT_STATIC_SIZES)
    assert module_name_expressions(DEFAULT_STATIC_SIZES, _kinds(MeasureConfig(level="full"))) == every
    # The planted-fault variants of the validation kernels only where validation runs.
    standard = module_name_expressions(DEFAULT_STATIC_SIZES, _kinds(MeasureConfig()))
    assert standard == [name for name in every if name not in FAULT_VARIANT_NAMES]
    bare = module_name_expressions(DEFAULT_STATIC_SIZES, _kinds(MeasureConfig(residency=False, carveout=False,
                                                                               clusters=False)))
    assert bare == ([probe_name(s, o) for s in DEFAULT_STATIC_SIZES for o in (False, True)] + [ILLEGAL_ACCESS_NAME]
                    + list(VALIDATE_NAMES))
    staircase = module_name_expressions(DEFAULT_STATIC_SIZES, frozenset({"residency"}))
    assert residency_name(0) in staircase and residency_name(1) not in staircase
    assert cluster_dsm_name(True) not in staircase and cluster_dsm_name(True) in every


@pytest.mark.parametrize("kinds", [None, frozenset(), frozenset({"residency"}), frozenset({"carveout", "clusters"})],
                         ids=str)
def test_every_subset_of_the_module_compiles(kinds: frozenset[str] | None) -> None:
    try:
        if 90 not in supported_archs():
            pytest.skip("this NVRTC cannot target sm_90")
    except NvrtcUnavailable as exc:
        pytest.fail(f"NVRTC must be installed for the compile checks (the test extra has it): {exc}")
    names = module_name_expressions((0, 1024), kinds)
    ok, log, lowered, ptx = compile_source(module_source(), "sm_90", names, NVRTC_OPTIONS)
    assert ok, log
    text = ptx.decode(errors="replace")
    assert sorted(lowered) == sorted(names)
    assert text.count(".entry ") == len(names)


def test_the_context_starts_on_its_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class Driver:
        def retain_primary_context(self, ordinal: int) -> None:
            time.sleep(0.05)
            calls.append((ordinal, threading.current_thread() is threading.main_thread()))

    monkeypatch.setattr(cupy_backend, "libcuda", lambda: Driver())
    starter = cupy_backend.ContextStarter(3)
    starter.wait()
    assert calls == [(3, False)] and starter.error is None


def test_a_context_that_fails_to_start_is_left_to_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver():
        raise cupy_backend.BackendUnavailable("no NVIDIA driver found (libcuda.so.1 could not be loaded)")

    monkeypatch.setattr(cupy_backend, "libcuda", no_driver)
    starter = cupy_backend.ContextStarter(0)
    starter.wait()
    assert "no NVIDIA driver" in str(starter.error)


@dataclass(frozen=True)
class _Backend:
    name: str


@dataclass(frozen=True)
class _Request:
    backend: _Backend
    isolated: bool = True


def test_backends_in_worker_processes_run_side_by_side() -> None:
    running, overlapped = set(), []

    def run(request: _Request, printer: object) -> tuple[str]:
        running.add(request.backend.name)
        time.sleep(0.2)
        overlapped.append(len(running))
        running.discard(request.backend.name)
        return (request.backend.name,)

    reports = run_concurrently([_Request(_Backend("cupy")), _Request(_Backend("numba"))], run, None)
    assert list(reports.items()) == [("cupy", ("cupy",)), ("numba", ("numba",))]
    assert max(overlapped) == 2


def test_in_process_backends_run_one_after_another() -> None:
    running, seen = [], []

    def run(request: _Request, printer: object) -> tuple[str]:
        running.append(request.backend.name)
        seen.append(len(running))
        time.sleep(0.05)
        running.remove(request.backend.name)
        return ()

    run_concurrently([_Request(_Backend("cupy"), False), _Request(_Backend("numba"), False)], run, None)
    assert seen == [1, 1]


def test_an_error_in_a_side_backend_reaches_the_caller() -> None:
    def run(request: _Request, printer: object) -> tuple:
        if request.backend.name == "numba":
            raise cupy_backend.BackendUnavailable("the numba backend needs numba")
        return ()

    with pytest.raises(cupy_backend.BackendUnavailable, match="needs numba"):
        run_concurrently([_Request(_Backend("cupy")), _Request(_Backend("numba"))], run, None)


def test_a_device_is_opened_with_the_kinds_of_its_planned_steps(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli import main as cli
    from bisect_smem.app.run import in_process

    seen = []
    real = in_process.open_device

    def open_device(*args, **kwargs):
        seen.append(kwargs.get("step_kinds"))
        return real(*args, **kwargs)

    monkeypatch.setattr(in_process, "open_device", open_device)  # the simulated device is measured in this process
    assert cli.main(["--simulate", "h200", "--quiet", "--json", "-"]) in (0, 1)
    capsys.readouterr()
    assert seen == [_kinds(MeasureConfig())]
    assert {"default_ceiling", "static_split", "residency", "carveout", "clusters"} <= seen[0]
