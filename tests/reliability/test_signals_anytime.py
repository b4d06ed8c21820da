"""A signal at any moment is one line and exit 128 + N: after the files were written (the line names them),
while Python creates a class (it wraps the signal in a RuntimeError), while the entry point itself loads,
and at random moments of a whole run."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_smem.app.cli import interrupts
from bisect_smem.app.outputs import writer as output
from tests.conftest import one_error
from tests.conftest import run_main as run
from tests.processes import CMD, ENV


def test_ctrl_c_after_the_files_are_written_names_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    real = output.write_atomic
    report, metrics = tmp_path / "r.json", tmp_path / "m.prom"

    def then_ctrl_c(path, content, exclusive=False, what=None):
        real(path, content, exclusive, what)
        if Path(path) == metrics:
            raise KeyboardInterrupt

    monkeypatch.setattr(output, "write_atomic", then_ctrl_c)
    code, _, err = run(["--simulate", "h200", "--level", "quick", "--json", str(report), "--prom", str(metrics)],
                       capsys)
    assert code == 130, err
    written = one_error(err).removeprefix("error: interrupted; written before it: ").split(", ")
    assert sorted(written) == sorted([str(report), str(metrics)])
    assert json.loads(report.read_text())["devices"]


class _SignalOnSetName:
    """A descriptor whose ``__set_name__`` is where the signal lands, as a dataclass field's may."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __set_name__(self, owner: type, name: str) -> None:
        raise self.exc


@pytest.mark.parametrize(("exc", "code", "line"), [
    (KeyboardInterrupt(), 130, "error: interrupted; no report was written"),
    (interrupts.Signalled(signal.SIGTERM), 143, "error: SIGTERM received; workers ended, no report was written"),
    (interrupts.Signalled(signal.SIGHUP), 129, "error: SIGHUP received; workers ended, no report was written"),
], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_a_class_is_created_is_one_line(exc: BaseException, code: int, line: str,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.run import runner

    def create_a_class(*_args: object, **_kwargs: object) -> None:
        type("Made", (), {"field": _SignalOnSetName(exc)})  # Python wraps what __set_name__ raises

    monkeypatch.setattr(runner, "run_all", create_a_class)
    got, _, err = run(["--simulate", "h200"], capsys)
    assert (got, one_error(err)) == (code, line)


def test_a_wrapped_signal_is_found_and_other_errors_are_not() -> None:
    try:
        type("Made", (), {"field": _SignalOnSetName(KeyboardInterrupt())})
    except RuntimeError as exc:
        wrapped = exc
    assert interrupts.signal_of(wrapped) == signal.SIGINT
    assert interrupts.signal_of(RuntimeError("no signal")) is None
    looped = ValueError("a")
    looped.__context__ = ValueError("b")
    looped.__context__.__context__ = looped
    assert interrupts.signal_of(looped) is None


# The signal comes from __set_name__ while a class is created as the command line's modules load.
SIGNAL_IN_SET_NAME = """
import os, signal, sys
class Lands:
    def __set_name__(self, owner, name):
        os.kill(os.getpid(), {signum})
        for _ in range(100000):  # the handler runs here, inside __set_name__
            pass
class SignalOnLoad:
    def find_spec(self, name, path=None, target=None):
        if name == "bisect_smem.app.cli.main":
            type("Made", (), {{"field": Lands()}})
        return None
sys.meta_path.insert(0, SignalOnLoad())
sys.argv = ["bisect-smem", "--simulate", "h200", "--level", "quick", "--quiet"]
from bisect_smem.app.cli.entry import main
sys.exit(main())
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_a_class_is_created_at_load_is_one_line(signum: int) -> None:
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_SET_NAME.format(signum=int(signum))],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 128 + signum and done.stdout == "", done.stderr
    assert done.stderr == f"error: {signum.name} received while starting; no report was written\n"


# The signal comes while the entry module itself imports what it needs, before main() runs: the tool is
# started as python -m bisect_smem is.
SIGNAL_WHILE_ENTRY_LOADS = """
import os, runpy, signal, sys
class SignalOnLoad:
    def find_spec(self, name, path=None, target=None):
        if name == "bisect_smem.app.run.head_start":
            os.kill(os.getpid(), {signum})
        return None
sys.meta_path.insert(0, SignalOnLoad())
sys.argv = ["bisect_smem", "--simulate", "h200", "--level", "quick", "--quiet"]
runpy.run_module("bisect_smem", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_entry_point_loads_is_one_line(signum: int) -> None:
    done = subprocess.run([sys.executable, "-c", SIGNAL_WHILE_ENTRY_LOADS.format(signum=int(signum))],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 128 + signum and done.stdout == "", done.stderr
    assert done.stderr == f"error: {signum.name} received while starting; no report was written\n"


def test_importing_the_entry_point_takes_no_signal() -> None:
    """A program that imports the tool (a test, the plugin) keeps its own handlers."""
    script = ("import signal; before = signal.getsignal(signal.SIGINT); import bisect_smem.app.cli.entry; "
              "print(signal.getsignal(signal.SIGINT) is before)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.stdout == "True\n", done.stderr


FUZZ_SEED = 33
FUZZ_RUNS = 12
FUZZ_BUDGET_S = 60.0


def _python_start_s() -> float:
    """How long the bare interpreter takes to start here, with room for a busy machine: before that no code
    of the tool's can run, and a signal then is Python's own (its site import), which no package can answer."""
    took = []
    for _ in range(3):
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], env=ENV, check=True, timeout=60)
        took.append(time.monotonic() - began)
    return 2 * max(took)


def test_signals_at_random_moments_are_one_line_and_128_plus_n(tmp_path: Path) -> None:
    rng = random.Random(FUZZ_SEED)
    floor = _python_start_s()
    deadline = time.monotonic() + FUZZ_BUDGET_S
    for case in range(FUZZ_RUNS):
        assert time.monotonic() < deadline, f"the fuzz ran past {FUZZ_BUDGET_S} s at case {case}"
        signum = rng.choice(interrupts.SIGNALS)
        delay = floor + rng.uniform(0.0, 0.6)
        report = tmp_path / f"r{case}.json"
        proc = subprocess.Popen([*CMD, "--simulate", "h200", "--level", "quick", "--quiet", "--json", str(report)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        time.sleep(delay)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        where = f"case {case}: {signum.name} after {delay:.3f} s: {err!r}"
        assert "Traceback" not in err and "Fatal Python error" not in err, where
        if proc.returncode == 0:  # it finished first
            assert err == "" and out.startswith("device 0: "), where
            continue
        assert proc.returncode == 128 + signum, where
        line = one_error(err)
        if "written before it: " in line:
            for name in line.split("written before it: ", 1)[1].split(", "):
                assert json.loads(Path(name).read_text())["devices"], where
        else:
            assert line.endswith("no report was written") and not report.exists(), where
