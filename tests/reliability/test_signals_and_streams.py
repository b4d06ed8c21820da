"""The tool as a process: signals end every worker, and a closed, full or broken stdout or stderr is
one line and a documented exit code, never a traceback and never exit 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import CMD, ENV, cmdline, descendants, state


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_mid_run_ends_every_worker(signum: int) -> None:
    proc = subprocess.Popen([*CMD, "--simulate", "h200,hang=4096", "--simulate", "h200,hang=4096",
                             "--probe-timeout", "120", "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 2:
        workers = {p for p in descendants(proc.pid) if "bisect_smem.app.run.worker_process" in cmdline(p)}
        time.sleep(0.2)
    time.sleep(2)  # the workers reach the hanging probe
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert len(workers) == 2
    assert proc.returncode == 128 + signum, err
    assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    time.sleep(0.5)
    assert not [p for p in workers if Path(f"/proc/{p}").exists() and state(p) != "Z"]


def run_shell(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=ENV, timeout=120)


PY = f"{sys.executable} -m bisect_smem"


@pytest.mark.parametrize(("script", "code", "fragment"), [
    (f"{PY} --simulate h200 >&-", 2, "stdout is closed"),
    (f"{PY} --simulate h200 --json - >&-", 2, "stdout is closed"),
    (f"{PY} --simulate h200 > /dev/full", 2, "No space left on device"),
    (f"{PY} profiles > /dev/full", 2, "No space left on device"),
])
def test_a_stdout_that_cannot_be_written_is_one_line_and_not_0(script: str, code: int, fragment: str) -> None:
    done = run_shell(script)
    assert done.returncode == code, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and fragment in done.stderr, done.stderr


def test_a_broken_pipe_is_one_line() -> None:
    # The reader is gone before the table is written (`true` exits at once; measuring takes longer).
    done = run_shell(f"set -o pipefail; {PY} --simulate h200 --simulate a100 | true")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == ["error: cannot write the output to stdout: Broken pipe"]


def test_head_takes_the_first_line_without_a_traceback() -> None:
    done = run_shell(f"set -o pipefail; {PY} --simulate h200 --simulate a100 | head -1")
    assert done.returncode in (0, 2) and done.stdout.count("\n") == 1 and "Traceback" not in done.stderr


def test_with_stderr_closed_errors_do_not_go_to_stdout() -> None:
    done = run_shell(f"{PY} --simulate nosuchgpu 2>&-")
    assert done.returncode == 2 and "error" not in done.stdout


def test_plugin_simulate_without_baseline_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--smem-simulate", "h200", str(tmp_path)], capture_output=True, text=True, env=ENV,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 4 and "--smem-simulate needs --smem-baseline DIR" in done.stderr + done.stdout


# The signal comes while the command line's modules load: a finder sends it when cli is looked for.
SIGNAL_WHILE_LOADING = """
import os, signal, sys
class SignalOnLoad:
    def find_spec(self, name, path=None, target=None):
        if name == "bisect_smem.app.cli.main":
            os.kill(os.getpid(), {signum})
        return None
if {ignored}:
    signal.signal({signum}, signal.SIG_IGN)
sys.meta_path.insert(0, SignalOnLoad())
sys.argv = ["bisect-smem", "--simulate", "h200", "--level", "quick", "--quiet"]
from bisect_smem.app.cli.entry import main
sys.exit(main())
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_modules_load_is_one_line(signum: int) -> None:
    done = subprocess.run([sys.executable, "-c", SIGNAL_WHILE_LOADING.format(signum=int(signum), ignored=False)],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 128 + signum and done.stdout == "", done.stderr
    assert done.stderr == f"error: {signum.name} received while starting; no report was written\n"


def test_a_signal_the_caller_ignores_stays_ignored_while_loading() -> None:
    done = subprocess.run([sys.executable, "-c", SIGNAL_WHILE_LOADING.format(signum=int(signal.SIGHUP), ignored=True)],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("device 0: ") and done.stderr == "", done.stderr


def test_under_nohup_a_hangup_mid_run_ends_nothing() -> None:
    proc = subprocess.Popen(["nohup", *CMD, "--simulate", "h200,hang=100000", "--probe-timeout", "1",
                             "--max-restarts", "0", "--level", "quick", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any("worker_process" in cmdline(p) for p in descendants(proc.pid)):
        time.sleep(0.05)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4 and "SIGHUP" not in err and out.startswith("device 0: "), err


def test_ctrl_c_while_the_parser_is_built_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli import main as cli

    def interrupted(argv: object = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["--simulate", "h200"]) == 130
    assert capsys.readouterr().err == "error: interrupted; no report was written\n"
