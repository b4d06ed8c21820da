"""The C collector, driven by a fake libcupti with CUDA 13.0's real parameter layouts: what it records of
driver and runtime calls (enter and exit), refusals, cuLaunchKernelEx's cluster, graph kernel nodes and
captured launches, how it finds libcupti, and what it does when another subscriber was first."""

from __future__ import annotations

import glob
import os
import subprocess
from pathlib import Path

import pytest

from bisect_smem.core.trace_events import Trace
from bisect_smem.core.trace_read import read_trace
from bisect_smem.devices.collector import build
from tests.trace.fake_process import CUTLASS
from tests.trace.fakes import HERE, need_cc, play

CUTLASS_NAME = CUTLASS.decode()


@pytest.fixture(scope="module")
def trace(recorded: Path) -> Trace:
    return read_trace(recorded)


def test_one_process_traced_with_the_libcupti_already_loaded(trace: Trace) -> None:
    (process,) = trace.processes
    assert process.untraced is None and process.collector == "c"
    assert process.cupti_found == "already loaded" and process.cupti_library.endswith("libcupti.so.13")
    assert "fake_process.py" in process.command


def test_a_runtime_attribute_set_and_its_driver_call_are_one_refused_request(trace: Trace) -> None:
    cutlass = [a for a in trace.attribute_sets if a.value == 279552]
    assert len(cutlass) == 1, trace.attribute_sets
    (a,) = cutlass
    assert (a.api, a.driver_api, a.correlation) == ("cudaFuncSetAttribute", "cuKernelSetAttribute", 7)
    assert a.attribute_name == "MaxDynamicSharedMemorySize" and a.refused and a.result_domain == "runtime"
    assert a.kernel is not None and a.kernel.startswith("_ZN7cutlass13device_kernel") and a.static_bytes == 0


def test_driver_attribute_sets_of_shared_memory_only(trace: Trace) -> None:
    driver = {(a.api, a.attribute, a.value, a.refused) for a in trace.attribute_sets if a.driver_api is None}
    # one byte over, refused; a carveout, accepted; attribute 3 (local memory) is not shared memory's
    assert driver == {("cuFuncSetAttribute", 8, 232449, True), ("cuFuncSetAttribute", 9, 100, False)}


def test_launches_counted_per_configuration_and_refusals_kept(trace: Trace) -> None:
    plain = sorted((lnch.dynamic_bytes, lnch.count, lnch.refused) for lnch in trace.launches
                   if lnch.api == "cuLaunchKernel")
    assert plain == [(1000, 5, False), (300000, 1, True)]


def test_launch_ex_cluster_static_bytes_and_capture(trace: Trace) -> None:
    (ex,) = [lnch for lnch in trace.launches if lnch.api == "cuLaunchKernelEx"]
    assert (ex.cluster, ex.block, ex.dynamic_bytes, ex.static_bytes) == ((2, 1, 1), (256, 1, 1), 200000, 1000)
    assert ex.captured and not ex.graph_node and ex.kernel == "_Z9clusteredv"


def test_a_runtime_launch_is_named_after_the_call_the_program_made(trace: Trace) -> None:
    (rt,) = [lnch for lnch in trace.launches if lnch.api == "cudaLaunchKernel"]
    assert (rt.kernel, rt.dynamic_bytes, rt.static_bytes, rt.block) == ("_Z6kernelPf", 2048, 0, (64, 1, 1))
    assert not any(lnch.correlation == 18 and lnch.api == "cuLaunchKernel" for lnch in trace.launches)


def test_graph_kernel_node_of_a_cukernel(trace: Trace) -> None:
    (node,) = [lnch for lnch in trace.launches if lnch.graph_node]
    assert node.kernel is not None and node.kernel.startswith("_ZN7cutlass")
    assert (node.dynamic_bytes, node.block, node.static_bytes) == (4096, (384, 1, 1), 0)


def test_libcupti_by_path_when_none_is_loaded(fakes: Path, collector: Path, tmp_path: Path) -> None:
    done = play(fakes, collector, tmp_path, "cupti-by-path",
                {"BISECT_SMEM_CUPTI_LIBRARY": str(fakes / "libcupti.so.13")})
    assert done.returncode == 0, done.stderr
    (process,) = read_trace(tmp_path).processes
    assert process.cupti_found == "BISECT_SMEM_CUPTI_LIBRARY" and process.untraced is None
    assert len(read_trace(tmp_path).attribute_sets) == 3


def test_without_libcupti_the_process_runs_and_says_why(fakes: Path, collector: Path, tmp_path: Path) -> None:
    done = play(fakes, collector, tmp_path, "cupti-by-path", {"BISECT_SMEM_CUPTI_LIBRARY": "/nonexistent/libcupti.so"})
    assert done.returncode == 0, done.stderr  # the program runs on; with no subscriber nothing is recorded
    trace = read_trace(tmp_path)
    assert trace.processes[0].untraced == "no libcupti could be loaded" and not trace.attribute_sets


def test_another_subscriber_first_leaves_the_process_untraced(fakes: Path, collector: Path, tmp_path: Path) -> None:
    done = play(fakes, collector, tmp_path, env={"FAKE_CUPTI_BUSY": "1"})
    assert done.returncode == 0, done.stderr
    trace = read_trace(tmp_path)
    assert "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in (trace.processes[0].untraced or "")
    assert not trace.attribute_sets and not trace.launches


def test_a_killed_process_keeps_every_line_written(fakes: Path, collector: Path, tmp_path: Path) -> None:
    done = play(fakes, collector, tmp_path, "killed")
    assert done.returncode == -9
    trace = read_trace(tmp_path)
    assert len(trace.attribute_sets) == 3 and trace.torn_lines == 0
    # the counts are written at exit: a killed process's repeated launch reads as launched once
    assert [lnch.count for lnch in trace.launches if lnch.dynamic_bytes == 1000] == [1]


def test_the_build_is_cached_by_source_hash(collector: Path) -> None:
    assert collector.name == f"collector-{build.source_hash()}.so"
    again = build.collector_library({"XDG_CACHE_HOME": str(collector.parent.parent)})
    assert again == collector


def _cuda_include() -> Path | None:
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda",
             *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
    for home in filter(None, homes):
        for sub in ("include", "extras/CUPTI/include", "targets/x86_64-linux/include"):
            if (Path(home) / sub / "cupti_callbacks.h").is_file() and (Path(home) / "include" / "cuda.h").is_file():
                return Path(home) / sub
    return None


def test_collector_layouts_match_the_installed_headers() -> None:
    cc = need_cc()
    include = _cuda_include()
    if include is None:
        pytest.skip("no CUDA toolkit with CUPTI headers (cupti_callbacks.h, cuda.h) to check the layouts against")
    done = subprocess.run([cc, "-fsyntax-only", f"-I{include}", f"-I{include.parent.parent / 'include'}",
                           f"-I{build.SOURCE_DIR}", str(HERE / "abi_check.c")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_python_fallback_records_the_same_requests(fakes: Path, tmp_path: Path) -> None:
    fallback = build.SOURCE_DIR / "fallback" / "sitecustomize.py"
    done = play(fakes, fallback, tmp_path, "python")
    assert done.returncode == 0, done.stderr
    trace = read_trace(tmp_path)
    (process,) = trace.processes
    assert process.collector == "python" and process.untraced is None and process.cupti_found == "already loaded"
    refused = {(a.api, a.value, a.kernel) for a in trace.attribute_sets if a.refused}
    assert ("cuFuncSetAttribute", 232449, "_Z6kernelPf") in refused
    assert ("cudaFuncSetAttribute", 279552, CUTLASS_NAME) in refused
    launches = {(lnch.api, lnch.dynamic_bytes, lnch.count, lnch.cluster) for lnch in trace.launches}
    assert {("cuLaunchKernel", 1000, 5, (0, 0, 0)), ("cuLaunchKernelEx", 200000, 1, (2, 1, 1))} <= launches
