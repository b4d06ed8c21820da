"""A run leaves nothing in the temporary folder, however it ends: the leftover step's writer process
answers through files without a name, so a SIGTERM while it runs (or a kill of either process) leaves no
bisect-smem-* folder behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.processes import CMD, ENV, cmdline, descendants


def _ours(folder: Path) -> list[str]:
    # The simulator's per-user state folder is meant to outlive a run (it is what a leak leaves).
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("bisect-smem-")
                  and not p.name.startswith("bisect-smem-sim-"))


def test_the_leftover_step_leaves_no_folder_when_it_ends(tmp_path: Path) -> None:
    done = subprocess.run([*CMD, "--simulate", "h200", "--level", "full", "--quiet"], capture_output=True,
                          text=True, env={**ENV, "TMPDIR": str(tmp_path)}, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    assert _ours(tmp_path) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_leftover_step_leaves_no_folder(signum: int, tmp_path: Path) -> None:
    proc = subprocess.Popen([*CMD, "--simulate", "h200", "--level", "full", "--quiet", "--probe-timeout", "60"],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**ENV, "TMPDIR": str(tmp_path)})
    deadline, writer = time.monotonic() + 240, None
    while time.monotonic() < deadline and writer is None and proc.poll() is None:
        writer = next((p for p in descendants(proc.pid) if "leftover_writer" in cmdline(p)), None)
        time.sleep(0.005)
    assert writer is not None, "the run never reached the leftover step"
    os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, err
    time.sleep(0.5)  # the writer, killed with its worker, is gone
    assert not Path(f"/proc/{writer}").exists() or "leftover_writer" not in cmdline(writer)
    assert _ours(tmp_path) == []
