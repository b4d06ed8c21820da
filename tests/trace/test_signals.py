"""A signal meant for the traced command reaches it exactly once, through real processes: the tool run by a
small job-control shell (job_shell.py) with a command that counts the signals it gets (signal_command.py).
Sent to the tool's pid or to its process group, with stdin redirected, typed at a terminal (a pty) as Ctrl-C
and Ctrl-Z; and a tool ended by SIGQUIT or SIGKILL leaves no command behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trace.fakes import need_cc

HERE = Path(__file__).resolve().parent
COMMAND_EXIT = 7  # signal_command.py's exit code at its end marker


@pytest.fixture(autouse=True)
def _environment(tmp_path_factory: pytest.TempPathFactory, fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_cc()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg"))
    monkeypatch.setenv("BISECT_SMEM_CUPTI_LIBRARY", str(fakes / "libcupti.so.13"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)


def shell(case: str, tmp_path: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(HERE / "job_shell.py"), case, str(tmp_path / "t"), *args],
                          capture_output=True, text=True, start_new_session=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("to", ["pid", "group"])
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_to_the_tool_reaches_the_command_once(to: str, signum: str, tmp_path: Path) -> None:
    # The tool's stdin is /dev/null and it has no terminal; the exit code is the command's own.
    assert shell(to, tmp_path, signum) == {"counts": {signum: 1}, "tool": f"exit {COMMAND_EXIT}"}


@pytest.mark.parametrize("case", ["ctrl-c", "ctrl-c-stdin-null"])
def test_ctrl_c_at_the_terminal_reaches_the_command_once(case: str, tmp_path: Path) -> None:
    # The terminal is given back to the tool when the command ends.
    assert shell(case, tmp_path) == {"counts": {"SIGINT": 1}, "tool": f"exit {COMMAND_EXIT}",
                                     "terminal_after": "tool"}


def test_a_command_not_found_gives_the_terminal_back(tmp_path: Path) -> None:
    # Its process took the terminal before its exec failed: the tool takes it back.
    assert shell("ctrl-missing", tmp_path) == {"tool": "exit 127", "terminal_after": "tool"}


def test_a_signal_the_tool_was_started_ignoring_stays_ignored(tmp_path: Path) -> None:
    # Under nohup, a SIGHUP is not relayed (the command, too, starts with it ignored).
    assert shell("nohup", tmp_path) == {"counts": {}, "tool": f"exit {COMMAND_EXIT}"}


def test_ctrl_z_stops_the_job_and_fg_continues_it(tmp_path: Path) -> None:
    # The command stops; the tool takes the terminal back and stops itself, so the shell sees the job stop;
    # fg continues the tool, which gives the command the terminal and continues it.
    assert shell("ctrl-z", tmp_path) == {"tool_at_ctrl_z": "stopped by SIGTSTP", "terminal_with_tool_stopped": "tool",
                                         "counts": {}, "tool": f"exit {COMMAND_EXIT}", "terminal_after": "tool"}


def test_sigquit_to_the_tool_ends_the_command_with_it(tmp_path: Path) -> None:
    # Relayed: the command ends of SIGQUIT (128+3), and the tool, still there, says so and reaps it.
    assert shell("quit", tmp_path) == {"tool": "exit 131", "command": "reaped by the tool"}


def test_sigkill_of_the_tool_leaves_no_command_running(tmp_path: Path) -> None:
    # SIGKILL cannot be relayed: the kernel kills the command with the tool (the shell is its subreaper).
    assert shell("kill", tmp_path) == {"tool": "killed by SIGKILL", "command": "killed by SIGKILL"}
