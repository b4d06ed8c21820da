"""What the process tests look at: a fresh ``python -m bisect_smem`` and the processes it started, read
from /proc."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.paths import ROOT

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
CMD = [sys.executable, "-m", "bisect_smem"]


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``: its children, theirs, and so on."""
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        try:
            kids = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        found.update(int(k) for k in kids)
        todo.extend(int(k) for k in kids)
    return found


def cmdline(pid: int) -> str:
    """The command line of ``pid``, '' once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def state(pid: int) -> str:
    """The state letter of ``pid`` (Z: a zombie), 'gone' once it is reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (neither gone nor a zombie)."""
    return state(pid) not in ("Z", "gone")
