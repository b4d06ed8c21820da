"""The head start: a measuring command line's workers start before the tool loads the rest of itself, each is
handed to the run it belongs to, and every one no run claims is ended before anything is measured."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.run import head_start
from bisect_smem.app.run.requests import build_request
from bisect_smem.app.run.runner import run
from bisect_smem.app.run.subprocesses import python_environment, start_worker
from bisect_smem.core.session import Session
from tests.processes import alive


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two visible devices, and every backend's library installed, whatever this host has."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())


@pytest.mark.parametrize(("argv", "workers"), [
    ([], [("cupy", 0), ("cupy", 1)]),
    (["--level", "full", "--json", "r.json", "--verbose"], [("cupy", 0), ("cupy", 1)]),
    (["--device", "1"], [("cupy", 1)]),
    (["--device=1", "--device", "0", "--device", "1"], [("cupy", 1), ("cupy", 0)]),
    (["--backend", "numba", "--device", "0"], [("numba", 0)]),
    (["--backend=all", "--device", "0"], [("cupy", 0), ("numba", 0)]),
])
def test_a_measuring_command_line_starts_one_worker_per_device_and_backend(
        two_gpus: None, argv: list[str], workers: list[tuple[str, int]]) -> None:
    assert head_start.planned_workers(argv, SUBCOMMANDS) == workers


@pytest.mark.parametrize("argv", [
    ["fit", "--tile", "128x128x64"], ["check"], ["--help"], ["-h"], ["--version"], ["--inline"],
    ["--simulate", "h200"], ["--simulate=h200"], ["--sim", "h200"], ["--backend", "sim"], ["--backend", "tpu"],
    ["--dev", "1"], ["--back", "numba"], ["--device", "x"], ["--device"], ["--quiet", "schema"],
])
def test_anything_else_gets_no_head_start(two_gpus: None, argv: list[str]) -> None:
    assert head_start.planned_workers(argv, SUBCOMMANDS) == []


def test_no_worker_without_a_sign_of_a_gpu_or_the_backends_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(head_start, "device_nodes", lambda: [])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert head_start.planned_workers([], SUBCOMMANDS) == []
    assert head_start.planned_workers(["--device", "0"], SUBCOMMANDS) == [("cupy", 0)]  # asked for by name
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "numba" else object())
    assert head_start.planned_workers(["--backend", "all", "--device", "0"], SUBCOMMANDS) == [("cupy", 0)]


def test_the_names_read_here_are_the_parsers_own() -> None:
    parser = cli.build_parser()
    options = {name for action in parser._actions for name in action.option_strings}
    assert set(head_start.READ_HERE) <= options


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_registered_subcommand_gets_no_head_start(two_gpus: None, name: str) -> None:
    assert head_start.planned_workers(["--device", "0"], SUBCOMMANDS) == [("cupy", 0)]
    assert head_start.planned_workers([name, "--device", "0"], SUBCOMMANDS) == []


def test_a_claimed_worker_leaves_the_pool_and_the_rest_are_ended() -> None:
    mine, other = start_worker(0, "sim", context=False), start_worker(1, "sim", context=False)
    session, elsewhere = Session(started={("sim", 0): mine, ("sim", 1): other}), Session()
    try:
        assert head_start.claim(elsewhere, "sim", (0, 1)) == {}  # another run's workers are not this one's
        assert head_start.claim(session, "sim", (0, 2)) == {0: mine}
        head_start.release(session)
        assert other.returncode is not None and not session.started
        assert mine.poll() is None  # the claimed one is its run's to end
    finally:
        mine.kill()
        mine.wait()


def test_a_worker_whose_job_never_comes_leaves_quietly() -> None:
    proc = start_worker(0, "sim", context=False)
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stdout.read() == b""


def test_a_started_worker_measures_the_device_it_was_started_for(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "timeline"
    monkeypatch.setenv("BISECT_SMEM_TIMELINE", str(trace))
    started = start_worker(0, "sim", context=False)
    (report,) = run(build_request(None, ["h200"], isolate=True), started={0: started})
    assert report.error is None and report.measured.optin_dynamic_ceiling_bytes == 232448
    served = {line.split()[1] for line in trace.read_text().splitlines() if line.endswith(" job received")}
    assert served == {str(started.pid)}
    assert started.returncode in (0, -9)  # reaped: it left, or the runner ended it after its last message


FORKED_RUN = """
import sys
from bisect_smem.app.run import head_start
worker = head_start.ForkedWorker(0, "sim")  # forked before anything else is loaded, as the head start does
from bisect_smem.app.run.requests import build_request
from bisect_smem.app.run.runner import run
(report,) = run(build_request(None, ["h200"], isolate=True), started={0: worker})
print(report.error, report.measured.optin_dynamic_ceiling_bytes, worker.pid, worker.returncode)
"""


def test_a_forked_worker_measures_its_device_and_is_reaped(tmp_path: Path) -> None:
    trace = tmp_path / "timeline"
    done = subprocess.run([sys.executable, "-c", FORKED_RUN], capture_output=True, text=True, timeout=120,
                          env={**python_environment(), "BISECT_SMEM_TIMELINE": str(trace)})
    assert done.returncode == 0, done.stderr
    error, optin, pid, code = done.stdout.split()
    # Reaped: it left by itself (0), or the runner ended it after its last message (-9).
    assert (error, optin) == ("None", "232448") and code in ("0", "-9")
    served = {line.split()[1] for line in trace.read_text().splitlines() if line.endswith(" job received")}
    assert served == {pid}


def test_a_forked_worker_ends_with_its_group_and_its_wait_times_out() -> None:
    script = ("import os, signal, subprocess; from bisect_smem.app.run import head_start\n"
              "w = head_start.ForkedWorker(0, 'sim')\n"
              "assert os.getpgid(w.pid) == w.pid and w.poll() is None\n"
              "try:\n    w.wait(timeout=0.05)\nexcept subprocess.TimeoutExpired:\n    print('timed out')\n"
              "os.killpg(w.pid, signal.SIGKILL)\nprint(w.wait(timeout=10))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env=python_environment())
    assert done.stdout.split("\n")[:2] == ["timed out", str(-9)], done.stderr


def test_a_forked_worker_waited_for_by_two_threads_is_reaped_once() -> None:
    # The runner's reader thread and its main thread both wait for a worker: neither may see the other's
    # reaping as an error.
    script = ("import threading; from bisect_smem.app.run import head_start\n"
              "codes = []\n"
              "for _ in range(40):\n"
              "    w = head_start.ForkedWorker(0, 'sim'); w.stdin.close()\n"
              "    ts = [threading.Thread(target=lambda: codes.append(w.wait(timeout=30))) for _ in range(2)]\n"
              "    [t.start() for t in ts]; [t.join() for t in ts]\n"
              "print(len(codes), set(codes))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=python_environment())
    assert (done.stdout.strip(), done.stderr) == ("80 {0}", "")


def test_a_head_start_for_a_run_that_finds_no_gpu_leaves_nothing_behind(tmp_path: Path) -> None:
    pytest.importorskip("numba")
    trace = tmp_path / "timeline"
    env = {**python_environment(), "BISECT_SMEM_TIMELINE": str(trace), "CUDA_VISIBLE_DEVICES": "0"}
    done = subprocess.run([sys.executable, "-m", "bisect_smem", "--backend", "numba", "--quiet"], env=env,
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 3:
        pytest.skip("a GPU is here: the no-GPU path is not the one run")
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: no usable GPU")
    points = [line.split(" ", 2) for line in trace.read_text().splitlines()]
    assert [what for _, _, what in points].count("workers spawned") == 1
    workers = {int(pid) for _, pid, what in points if what == "worker start"}
    time.sleep(0.2)
    assert not [pid for pid in workers if alive(pid)]


SIGTERM_WHILE_LOADING = """
import os, signal, subprocess, sys, time
from bisect_smem.app.cli import entry
from bisect_smem.app.run import head_start
head_start.planned_workers = lambda argv, subcommands: [("sim", 0)]

class SlowToLoad:  # the command line's modules take long to load, as on a cold node: the signal comes then
    def find_spec(self, name, path=None, target=None):
        if name == "bisect_smem.app.cli.main":
            worker = entry._SESSION.started["sim", 0]
            # A sleeper holds the worker's job pipe open: the worker cannot leave by itself on end of file.
            sleeper = subprocess.Popen(["sleep", "60"], pass_fds=[worker.stdin.fileno()],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(worker.pid, sleeper.pid, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        return None

sys.meta_path.insert(0, SlowToLoad())
print(entry.main(), flush=True)
"""


def test_a_sigterm_while_the_tool_loads_ends_the_started_workers_too() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_WHILE_LOADING], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=python_environment())
    worker, sleeper = (int(pid) for pid in proc.stdout.readline().split())
    try:
        out, err = proc.communicate(timeout=60)
        assert (out.strip(), err.strip()) == ("143", "error: SIGTERM received while starting; no report was written")
        assert not alive(worker)
    finally:
        os.kill(sleeper, signal.SIGKILL)
        if alive(worker):
            os.kill(worker, signal.SIGKILL)


@pytest.mark.gpu
def test_the_workers_start_before_the_tool_has_loaded(tmp_path: Path) -> None:
    trace, report = tmp_path / "timeline", tmp_path / "report.json"
    env = {**python_environment(), "BISECT_SMEM_TIMELINE": str(trace)}
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bisect_smem", "--device", "0", "--quiet", "--level", "quick",
                           "--json", str(report)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    points: dict[str, tuple[float, str]] = {}
    for line in trace.read_text().splitlines():
        seconds, pid, what = line.split(" ", 2)
        points.setdefault(what, (float(seconds) - start, pid))
    # The worker was spawned before the parent had loaded the rest of itself and reached its main().
    assert points["workers spawned"][0] < points["parent start"][0]
    assert points["job received"][1] == points["worker start"][1]
    assert json.loads(report.read_text())["devices"][0]["measured"]["optin_dynamic_ceiling_bytes"] > 0
    assert not [pid for pid in {p for _, p in points.values()} if alive(int(pid)) and int(pid) != os.getpid()]
