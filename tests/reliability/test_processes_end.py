"""Every process the tool starts ends with it: a signal during --level full ends the leftover writer as
well as the workers, SIGHUP to the whole process group is one line, and a run in one process ends at its
device timeout instead of waiting forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.processes import CMD, ENV, alive, cmdline, descendants


@pytest.mark.parametrize("where", [[], ["--probe-timeout", "60"]], ids=["inline", "worker"])
def test_sigterm_during_the_leftovers_ends_the_writer(where: list[str]) -> None:
    # The writer is caught and stopped (SIGSTOP) as soon as it runs, so it cannot finish on its own: if it is
    # gone after the tool ends, the tool ended it (SIGKILL ends a stopped process). No timing window is
    # needed, however slow the machine.
    for _attempt in range(5):
        proc = subprocess.Popen([*CMD, "--simulate", "h200", "--level", "full", "--quiet", *where], env=ENV,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        writer, deadline = None, time.monotonic() + 60
        while writer is None and proc.poll() is None and time.monotonic() < deadline:
            writer = next((p for p in descendants(proc.pid) if "leftover_writer" in cmdline(p)), None)
            time.sleep(0.002)
        if writer is not None:
            try:
                os.kill(writer, signal.SIGSTOP)
            except ProcessLookupError:
                writer = None  # it finished between the look and the stop
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        if writer is None or proc.returncode != 128 + signal.SIGTERM:
            continue  # the run ended before the writer could be caught: try again
        try:
            gone_by = time.monotonic() + 60  # a SIGKILL lands when the kernel next runs it
            while alive(writer) and time.monotonic() < gone_by:
                time.sleep(0.01)
            assert not alive(writer), f"the leftover writer {writer} outlived the tool"
        finally:
            if alive(writer):
                os.kill(writer, signal.SIGKILL)
        assert err.strip().splitlines() == [err.strip()] and "SIGTERM received" in err
        return
    pytest.fail("the leftover writer was never caught running")


def test_ending_a_worker_ends_what_it_started() -> None:
    # A worker leads its own process group (the runner starts it as one); the supervisor ends the group,
    # so the writer it started ends with it, whatever ended the worker (a timeout, a signal).
    from bisect_smem.app.run import runner

    script = ("import subprocess, time; child = subprocess.Popen(['sleep', '120']); "
              "print(child.pid, flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    grandchild = int(proc.stdout.readline())
    runner._end(proc)
    proc.wait(timeout=60)
    proc.stdout.close()
    # The kill ends the grandchild when it is next scheduled, later on a loaded machine: wait for it, not 0.2 s.
    deadline = time.monotonic() + 60
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.returncode == -signal.SIGKILL and not alive(grandchild)


def test_sighup_to_the_process_group_is_one_line() -> None:
    proc = subprocess.Popen([*CMD, "--simulate", "h200,hang=4096", "--simulate", "h200,hang=4096",
                             "--probe-timeout", "120", "--quiet"], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len([p for p in descendants(proc.pid) if "worker_process" in cmdline(p)]) < 2:
        time.sleep(0.1)
    time.sleep(2)  # the workers reach the hanging probe
    os.killpg(proc.pid, signal.SIGHUP)  # as a closing terminal does: to every process of the group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert err.strip().splitlines() == ["error: SIGHUP received; workers ended, no report was written"], err


def test_an_inline_run_ends_at_its_device_timeout() -> None:
    script = ("from bisect_smem.app.run.requests import build_request; from bisect_smem.app.run.runner import run; "
              "run(build_request(None, ['h200,hang=100000'], isolate=False, device_timeout_s=1.0))")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4 and time.monotonic() - start < 60
    assert done.stderr.strip() == ("error: device 0 did not finish within 1 s, and a run in one process (--inline) "
                                   "cannot end a hung probe: the run ends, no report was written")
