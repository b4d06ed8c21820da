"""The C collector, driven by a fake libcupti with CUDA 13.0's real parameter layouts: what it records of
driver and runtime calls (enter and exit), refusals, cuLaunchKernelEx's cluster, graph kernel nodes and
captured launches, how it finds libcupti, and what it does when another subscriber was first."""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.core.trace_events import Trace
from bisect_smem.core.trace_read import read_trace
from bisect_smem.devices.collector import build
from tests.trace import fake_process as fake
from tests.trace.fake_process import CUTLASS
from tests.trace.fakes import HERE, need_cc, play

CUTLASS_NAME = CUTLASS.decode()
TABLE_CONFIGS, OVERFLOW_SLOTS = 8192, 1024  # collector.c's BSM_CONFIGS_MAX and BSM_OVERFLOW_SLOTS
CUDA12_HEADERS = "BISECT_SMEM_CUDA12_HEADERS"


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


def test_the_driver_is_asked_about_capture_only_while_a_capture_is_open(fakes: Path, collector: Path,
                                                                        tmp_path: Path) -> None:
    # The fake stream keeps saying "capturing" after cuStreamEndCapture: a launch after the end is recorded
    # as not captured only because the collector no longer asks the driver (a call per launch saved).
    done = play(fakes, collector, tmp_path / "t", "capture-closed")
    assert done.returncode == 0, done.stderr
    ex = sorted((lnch.captured, lnch.count) for lnch in read_trace(tmp_path / "t").launches
                if lnch.api == "cuLaunchKernelEx")
    assert ex == [(False, 1), (True, 1)]


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
    # counts are written as they grow: of five launches, the count line of the fourth outlives a SIGKILL
    assert [lnch.count for lnch in trace.launches if lnch.dynamic_bytes == 1000] == [4]


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


def _abi_check(includes: list[Path]) -> None:
    """abi_check.c compiled against these header folders: it compiles only where every layout and id is equal."""
    done = subprocess.run([need_cc(), "-fsyntax-only", *(f"-I{i}" for i in includes), f"-I{build.SOURCE_DIR}",
                           str(HERE / "abi_check.c")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def test_collector_layouts_match_the_installed_headers() -> None:
    need_cc()
    include = _cuda_include()
    if include is None:
        pytest.skip("no CUDA toolkit with CUPTI headers (cupti_callbacks.h, cuda.h) to check the layouts against")
    _abi_check([include, include.parent.parent / "include"])


def test_collector_layouts_match_cuda_12_headers() -> None:
    """Against CUDA 12's CUPTI (the nvidia-cuda-cupti-cu12 wheel's headers), which R535-R570 drivers need:
    `make test` fetches them (tools/cuda12_headers.py) and names the folder in CUDA12_HEADERS, where a
    missing folder fails rather than skips."""
    need_cc()
    named = os.environ.get(CUDA12_HEADERS)
    folder = Path(named) if named else Path(sys.prefix) / "cuda12-headers"
    include = folder / "include"
    if not (include / "cuda_cupti" / "cupti_callbacks.h").is_file():
        if named:
            pytest.fail(f"{CUDA12_HEADERS}={named} holds no CUDA 12 CUPTI headers")
        pytest.skip(f"no CUDA 12 headers in {folder}: python tools/cuda12_headers.py {folder} (make cuda12-headers)")
    version = re.search(r"#define CUPTI_API_VERSION (\d+)", (include / "cuda_cupti" / "cupti_version.h").read_text())
    assert version is not None and int(version[1]) < 130000, "not CUDA 12's CUPTI"  # 12.x: 18..28; 13.0: 130001
    _abi_check([include / "cuda_cupti", include / "cuda_runtime", include / "cuda_nvcc"])


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


# ---- the record as written (format 2), read line by line: what the reader is given ----

def _files(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.name: [json.loads(line) for line in p.read_text().splitlines()] for p in sorted(folder.glob("*.jsonl"))}


def _largest(lines: list[dict[str, Any]], event: str, key: str) -> dict[Any, int]:
    """The largest count per id (count) or handle (overflow): the counts are written as they grow."""
    largest: dict[Any, int] = {}
    for line in lines:
        if line["event"] == event:
            largest[line[key]] = max(largest.get(line[key], 0), line["count"])
    return largest


@pytest.fixture(params=["c", "python"])
def any_collector(request: pytest.FixtureRequest, collector: Path) -> Path:
    """The C collector, and the ctypes fallback that stands in for it in Python commands: the same record."""
    return collector if request.param == "c" else build.SOURCE_DIR / "fallback" / "sitecustomize.py"


def _played(fakes: Path, collector: Path, out: Path, scenario: str, env: dict[str, str] | None = None,
            code: int = 0) -> dict[str, list[dict[str, Any]]]:
    done = play(fakes, collector, out, scenario, env)
    assert done.returncode == code, done.stderr
    return _files(out)


def test_a_refused_launch_carries_the_kernels_limits_at_the_refusal(fakes: Path, any_collector: Path,
                                                                    tmp_path: Path) -> None:
    (lines,) = _played(fakes, any_collector, tmp_path, "unraised").values()
    launches = [(r["dynamic_bytes"], r["block"][0], r["result"], r.get("max_dynamic_bytes"), r.get("max_threads"),
                 r.get("registers")) for r in lines if r["event"] == "launch"]
    assert launches == [
        (100000, 128, 1, fake.DEFAULT_DYNAMIC_BYTES, fake.MAX_THREADS, fake.REGISTERS),  # never raised: the 48 KiB default
        (100000, 128, 0, None, None, None),  # accepted once raised: no limits written
        (120000, 128, 1, 100000, fake.MAX_THREADS, fake.REGISTERS),  # over the raised limit
        (0, 2048, 1, 100000, fake.MAX_THREADS, fake.REGISTERS),  # refused for its threads
    ]
    (raised,) = [r for r in lines if r["event"] == "attribute"]
    assert (raised["value"], raised["result"]) == (100000, 0)


def test_a_refused_runtime_launch_has_unknown_limits(recorded: Path) -> None:
    (lines,) = _files(recorded).values()
    (refused,) = [r for r in lines if r["event"] == "launch" and r["result"] != 0]
    assert refused["domain"] == "driver" and refused["max_dynamic_bytes"] == fake.DEFAULT_DYNAMIC_BYTES
    assert all("max_dynamic_bytes" not in r for r in lines if r["event"] == "launch" and r["result"] == 0)


def test_each_program_image_writes_its_own_private_file(fakes: Path, any_collector: Path, tmp_path: Path) -> None:
    files = _played(fakes, any_collector, tmp_path, "exec")
    assert len(files) == 2, files
    pid = str(files[min(files)][0]["pid"])
    assert sorted(files) == [f"{pid}.2.jsonl", f"{pid}.jsonl"]
    for name, image, launched in ((f"{pid}.jsonl", 1, 2), (f"{pid}.2.jsonl", 2, 5)):
        lines = files[name]
        assert (lines[0]["event"], lines[0]["format"], lines[0]["image"]) == ("process", 2, image)
        assert "exec-after" in lines[0]["command"] if image == 2 else "exec-after" not in lines[0]["command"]
        (launch,) = [r for r in lines if r["event"] == "launch"]
        assert _largest(lines, "count", "id") == {launch["id"]: launched}  # two images' counts never mix
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600


def test_a_forked_child_writes_its_own_file_with_its_process_line(fakes: Path, any_collector: Path,
                                                                  tmp_path: Path) -> None:
    files = list(_played(fakes, any_collector, tmp_path, "forks").values())
    assert len(files) == 2
    parent, child = sorted(files, key=lambda lines: lines[0]["ppid"] == files[0][0]["pid"])
    assert child[0]["event"] == "process" and child[0]["ppid"] == parent[0]["pid"]
    assert [(r["dynamic_bytes"], r["id"]) for r in child if r["event"] == "launch"] == [(2000, 1)]
    assert _largest(child, "count", "id") == {1: 2}  # its os._exit ran no exit handler: the power of two stayed
    assert [r["dynamic_bytes"] for r in parent if r["event"] == "launch"] == [1000]
    assert _largest(parent, "count", "id") == {1: 2}


@pytest.mark.parametrize("scenario, code", [("ends-by-SIGKILL", -9), ("ends-by-SIGTERM", -15),
                                            ("ends-by-os._exit", 0)])
def test_counts_survive_an_end_without_exit_handlers(fakes: Path, any_collector: Path, tmp_path: Path, scenario: str,
                                                     code: int) -> None:
    (lines,) = _played(fakes, any_collector, tmp_path, scenario, code=code).values()
    (launch,) = [r for r in lines if r["event"] == "launch"]
    last_power_of_two = 1 << (fake.ENDED_AFTER.bit_length() - 1)
    assert _largest(lines, "count", "id") == {launch["id"]: last_power_of_two}


def test_launches_from_many_threads_are_each_counted_once(fakes: Path, any_collector: Path, tmp_path: Path) -> None:
    (lines,) = _played(fakes, any_collector, tmp_path, "threads").values()
    launches = [r for r in lines if r["event"] == "launch"]
    assert sorted(r["dynamic_bytes"] for r in launches) == list(range(fake.THREAD_CONFIGS))  # each written once
    each = fake.THREADS * fake.THREAD_LAUNCHES // fake.THREAD_CONFIGS
    assert _largest(lines, "count", "id") == {r["id"]: each for r in launches}


def test_past_the_table_launches_are_counted_per_kernel_in_a_bounded_file(fakes: Path, any_collector: Path,
                                                                         tmp_path: Path) -> None:
    ((name, lines),) = _played(fakes, any_collector, tmp_path, "past-table").items()
    launches = [r for r in lines if r["event"] == "launch"]
    refused = [r for r in launches if r["result"] != 0]
    assert len(launches) - len(refused) == TABLE_CONFIGS  # one line per configuration the table holds
    assert [r["dynamic_bytes"] for r in refused] == [300000]  # a refusal past the table still has its line
    counts, overflow = _largest(lines, "count", "id"), _largest(lines, "overflow", "handle")
    handles = {r["id"]: r["handle"] for r in launches}
    for kernel in {r["handle"] for r in launches if r["result"] == 0}:
        in_table = sum(counts.get(r["id"], 1) for r in launches if r["handle"] == kernel and r["result"] == 0)
        assert in_table + overflow.pop(kernel, 0) == fake.PAST_TABLE_CONFIGS * fake.PAST_TABLE_PASSES, kernel
    assert all(counts[i] == fake.PAST_TABLE_PASSES for i in counts if handles[i] in handles.values())
    # the bare handles, seen only past the table: their own counts while the overflow table has room, then one
    unplaced = overflow.pop(None, 0)
    assert unplaced > 0 and set(overflow.values()) == {2} and len(overflow) <= OVERFLOW_SLOTS
    assert sum(overflow.values()) + unplaced == 2 * fake.PAST_TABLE_HANDLES
    # no line per launch past the table: a count line per power of two reached, and the final count at exit
    written = {event: sum(1 for r in lines if r["event"] == event) for event in ("count", "overflow")}
    assert written == {"count": sum(_count_lines(n, 2) for n in counts.values()),
                       "overflow": sum(_count_lines(n, 1) for n in _largest(lines, "overflow", "handle").values())}
    assert (tmp_path / name).stat().st_size < 4_000_000


def _count_lines(count: int, first: int) -> int:
    """Lines a count leaves: one at each power of two from ``first`` up to it, one more at exit if it is none."""
    powers = count.bit_length() - first.bit_length() + 1
    return powers + (count & (count - 1) != 0)


def _listening() -> tuple[socket.socket, str]:
    name = f"bisect-smem-test-{os.getpid()}-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind("\0" + name)
    listener.settimeout(10)
    return listener, name


@pytest.mark.parametrize("folder, error", [("missing/folder", errno.ENOENT), ("x" * 4100, errno.ENAMETOOLONG)])
def test_a_collector_that_cannot_write_sends_one_notice(fakes: Path, any_collector: Path, tmp_path: Path, folder: str,
                                                        error: int) -> None:
    listener, name = _listening()
    out = tmp_path / folder
    with listener:
        done = play(fakes, any_collector, tmp_path, env={"BISECT_SMEM_TRACE_DIR": str(out), "BISECT_SMEM_TRACE_NOTIFY": name})
        assert done.returncode == 0, done.stderr  # the command runs on
        notice = json.loads(listener.recv(65536))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.recv(65536)  # one notice, not one per line
    assert (notice["event"], notice["pid"] > 0, notice["errno"]) == ("unwritable", True, error)
    assert notice["path"].startswith(str(out)[:1000]) and "fake_process.py" in notice["command"]
    assert not any(tmp_path.rglob("*.jsonl"))


def test_a_failed_write_sends_one_notice(fakes: Path, any_collector: Path, tmp_path: Path) -> None:
    listener, name = _listening()
    with listener:
        done = play(fakes, any_collector, tmp_path, "write-fails", {"BISECT_SMEM_TRACE_NOTIFY": name})
        assert done.returncode == 0, done.stderr
        notice = json.loads(listener.recv(65536))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.recv(65536)
    ((file_name, lines),) = _files(tmp_path).items()
    assert [r["event"] for r in lines] == ["process"]  # what was written before stays
    assert (notice["errno"], notice["path"]) == (errno.EFBIG, str(tmp_path / file_name))


def test_with_nobody_listening_an_unwritable_trace_leaves_the_command_alone(fakes: Path, collector: Path,
                                                                             tmp_path: Path) -> None:
    done = play(fakes, collector, tmp_path, env={"BISECT_SMEM_TRACE_DIR": str(tmp_path / "missing"),
                                                  "BISECT_SMEM_TRACE_NOTIFY": f"bisect-smem-nobody-{uuid.uuid4().hex}"})
    assert done.returncode == 0 and not done.stderr
