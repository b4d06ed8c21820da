"""The user's command, run with the collector injected: CUDA_INJECTION64_PATH names it in the environment the
command and every process it starts inherit. Its output passes through untouched (it keeps the tool's
stdin, stdout and stderr), signals sent to the tool go to it, and its exit code comes back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from types import FrameType

from bisect_smem.core.errors import UsageError

INJECTION = "CUDA_INJECTION64_PATH"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NOT_FOUND, NOT_EXECUTABLE = 127, 126  # as env(1), timeout(1) and the shells say it


class CommandNotStarted(UsageError):
    """The command could not be started: exit 127 (not found) or 126 (found, not executable), as the shells
    say it."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code  # type: ignore[misc]


def _foreground_of_terminal() -> bool:
    """Whether this process group owns the terminal: Ctrl-C then reaches the command itself."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def run_traced(command: Sequence[str], environment: Mapping[str, str]) -> int:
    """Run ``command`` with ``environment`` until it ends; its exit code (128+N when signal N ended it)."""
    try:
        child = subprocess.Popen(list(command), env=dict(environment))  # noqa: S603 - the user's own command
    except FileNotFoundError:
        raise CommandNotStarted(f"{command[0]}: command not found", NOT_FOUND) from None
    except PermissionError:
        raise CommandNotStarted(f"{command[0]}: permission denied (not executable)", NOT_EXECUTABLE) from None
    except OSError as exc:
        raise CommandNotStarted(f"{command[0]}: cannot run it: {exc.strerror or exc}", NOT_EXECUTABLE) from None
    terminal_sends_sigint = _foreground_of_terminal()

    def forward(signum: int, _frame: FrameType | None) -> None:
        # Ctrl-C at a terminal already reached the command, which shares our process group: sending it again
        # would interrupt its own cleanup.
        if signum == signal.SIGINT and terminal_sends_sigint:
            return
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    previous = {}
    for signum in FORWARDED:
        try:
            previous[signum] = signal.signal(signum, forward)
        except ValueError:  # not the main thread: the command still runs, signals stay as they are
            break
    try:
        while True:
            try:
                code = child.wait()
                break
            except InterruptedError:
                continue
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code
