"""The traced command of the signal tests: it counts the signals it gets. It prints ``ready PID``, then ``got
NAME`` at each SIGINT, SIGTERM or SIGHUP and ``continued`` at SIGCONT. SIGPWR is the end marker: at it, it
prints ``counts {...}`` (JSON) and exits 7. The marker has a higher number than every counted signal, and both
the tool and this process (Python runs pending handlers in signal-number order) handle pending signals lowest
first, so a second copy of a counted signal, sent before the marker, is always counted before it."""

from __future__ import annotations

import json
import os
import resource
import signal
from types import FrameType

EXIT_CODE = 7
COUNTED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
counts: dict[str, int] = {}


def count(signum: int, _frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    counts[name] = counts.get(name, 0) + 1
    print(f"got {name}", flush=True)


def end(_signum: int, _frame: FrameType | None) -> None:
    print("counts " + json.dumps(counts, sort_keys=True), flush=True)
    os._exit(EXIT_CODE)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGQUIT ends it without leaving a core file
    for signum in COUNTED:
        signal.signal(signum, count)
    signal.signal(signal.SIGCONT, lambda *_: print("continued", flush=True))
    signal.signal(signal.SIGPWR, end)
    print(f"ready {os.getpid()}", flush=True)
    while True:
        signal.pause()
