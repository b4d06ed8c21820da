"""A small job-control shell for the signal tests: ``python job_shell.py CASE OUT_DIR``, started in a session of
its own. It runs ``bisect-smem trace --no-measure --out OUT_DIR -- python signal_command.py`` as a shell runs a
job, does what CASE says to it, and prints one JSON line of what happened (the command's signal counts, the
tool's exit code, how the command's process ended).

It is the subreaper of what it starts (PR_SET_CHILD_SUBREAPER), so a command the tool leaves behind becomes its
child and is seen, rather than ending up with init. Cases:
  pid SIG, group SIG    no terminal, stdin /dev/null: SIG to the tool's pid, or to its process group
  ctrl-c, ctrl-c-stdin-null    under a terminal (a pty it is the session leader of), the tool in its foreground:
                        Ctrl-C typed; with the tool's stdin the terminal, or /dev/null
  ctrl-z                under a terminal: Ctrl-Z typed, then ``fg`` as a shell does it
  ctrl-missing          under a terminal, a command that is not found: the terminal comes back to the tool
  nohup                 the tool started with SIGHUP ignored (as nohup does), then SIGHUP to its pid
  quit, kill            SIGQUIT, SIGKILL to the tool's pid
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import re
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEADLINE_S = 120  # only against a hang: every wait below ends on an event, not on time
MARKER = signal.SIGPWR
_PR_SET_CHILD_SUBREAPER = 36


class Output:
    """The lines the command (and the tool) print, read from a pipe or a pty's master."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buffer, self.lines = fd, b"", []

    def until(self, pattern: str) -> re.Match[str]:
        end = time.monotonic() + DEADLINE_S
        while True:
            for i, line in enumerate(self.lines):
                found = re.search(pattern, line)
                if found:
                    del self.lines[:i + 1]
                    return found
            if not select.select([self.fd], [], [], max(0.0, end - time.monotonic()))[0]:
                raise TimeoutError(f"no line matching {pattern!r}; read {self.lines}")
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # a pty's master reads EIO once every slave is closed
                data = b""
            if not data:
                raise EOFError(f"output ended before a line matching {pattern!r}; read {self.lines}")
            self.buffer += data
            *complete, self.buffer = self.buffer.split(b"\n")
            self.lines += [line.decode(errors="replace").rstrip("\r") for line in complete]


def wait(pid: int, options: int = 0) -> int:
    signal.alarm(DEADLINE_S)
    try:
        return os.waitpid(pid, options)[1]
    finally:
        signal.alarm(0)


def how(status: int) -> str:
    if os.WIFSTOPPED(status):
        return f"stopped by {signal.Signals(os.WSTOPSIG(status)).name}"
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit {os.WEXITSTATUS(status)}"


def start(case: str, out: str) -> tuple[subprocess.Popen[bytes], Output, int | None]:
    command = ["no-such-command-x"] if case == "ctrl-missing" else [sys.executable, str(HERE / "signal_command.py")]
    tool = [sys.executable, "-m", "bisect_smem", "trace", "--no-measure", "--out", out, "--", *command]
    if not case.startswith("ctrl-"):
        child = subprocess.Popen(tool, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, process_group=0)
        assert child.stdout is not None
        return child, Output(child.stdout.fileno()), None
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)  # this session's terminal, as a login's

    def foreground() -> None:  # the job's group is the terminal's foreground before it runs, as a shell does it
        os.setpgid(0, 0)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
        os.tcsetpgrp(slave, os.getpid())
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTTOU})

    stdin = subprocess.DEVNULL if case == "ctrl-c-stdin-null" else slave
    child = subprocess.Popen(tool, stdin=stdin, stdout=slave, stderr=slave, preexec_fn=foreground)  # noqa: PLW1509
    return child, Output(master), slave


def main(case: str, out: str) -> dict[str, Any]:
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # the shell hands the terminal around from the background
    if case == "nohup":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    tool, output, terminal = start(case, out)
    result: dict[str, Any] = {}
    if case == "ctrl-missing":
        result["tool"] = how(wait(tool.pid))
        assert terminal is not None
        result["terminal_after"] = "tool" if os.tcgetpgrp(terminal) == tool.pid else "other"
        return result
    command = int(output.until(r"ready (\d+)")[1])
    if case == "nohup":
        os.kill(tool.pid, signal.SIGHUP)  # ignored by the tool, so never relayed
    elif case in ("pid", "group"):
        signum = signal.Signals[sys.argv[3]]
        os.kill(tool.pid, signum) if case == "pid" else os.killpg(tool.pid, signum)
        output.until(f"got {signum.name}")
    elif case.startswith("ctrl-c"):
        os.write(output.fd, b"\x03")
        output.until("got SIGINT")
    elif case == "ctrl-z":
        os.write(output.fd, b"\x1a")
        result["tool_at_ctrl_z"] = how(wait(tool.pid, os.WUNTRACED))
        assert terminal is not None
        result["terminal_with_tool_stopped"] = "tool" if os.tcgetpgrp(terminal) == tool.pid else "other"
        os.tcsetpgrp(terminal, tool.pid)  # fg
        os.killpg(tool.pid, signal.SIGCONT)
        output.until("continued")
    elif case in ("quit", "kill"):
        os.kill(tool.pid, signal.SIGQUIT if case == "quit" else signal.SIGKILL)
        result["tool"] = how(wait(tool.pid))
        try:
            result["command"] = how(wait(command))  # left behind: it is this process's child now
        except ChildProcessError:
            result["command"] = "reaped by the tool"
        with contextlib.suppress(ProcessLookupError):
            os.kill(command, 0)
            result["command"] += ", still there"
        return result
    os.kill(tool.pid, MARKER)
    result["counts"] = json.loads(output.until(r"counts (.*)")[1])
    result["tool"] = how(wait(tool.pid))
    if terminal is not None:
        result["terminal_after"] = "tool" if os.tcgetpgrp(terminal) == tool.pid else "other"
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
