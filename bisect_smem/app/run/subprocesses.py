"""How bisect_smem starts a fresh Python process of its own (a device's worker, the leftover writer): the
same interpreter with the same flags, and an import path on which it finds this same package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bisect_smem.app.run.timeline import mark

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
WORKER_MODULE = "bisect_smem.app.run.worker_process"  # a device's worker: INDEX [--context] [--preload BACKEND]


def python_command(module: str, *args: str) -> list[str]:
    """``python -m module args...`` with this interpreter and its flags (``-X importtime``, ``-E``, ...),
    as multiprocessing's spawn passes them (through subprocess's own helper)."""
    return [sys.executable, *subprocess._args_from_interpreter_flags(), "-m", module, *args]


def python_environment() -> dict[str, str]:
    """This process's environment, with this package's root first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def start_worker(index: int, backend: str, context: bool = True) -> subprocess.Popen:
    """A fresh interpreter as device ``index``'s worker for ``backend``, waiting for its job on stdin. It
    leads a process group of its own: ending the group ends whatever it started too."""
    args = [str(index), *(["--context"] if context else []), "--preload", backend]
    proc = subprocess.Popen(python_command(WORKER_MODULE, *args), env=python_environment(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, process_group=0)
    mark("workers spawned")
    return proc
