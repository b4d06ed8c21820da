"""NVIDIA's PTX assembler as a second reader of a PTX file's static shared memory, where it is installed.

``ptxas -v`` prints, for each entry it assembles, ``Used N registers, ..., M bytes smem``: the same number
as the cubin's ``.nv.shared.<entry>`` section (less the 1 KB system window from sm_90 on). No GPU is
needed. It is looked for on PATH, under $CUDA_HOME or $CUDA_PATH, in /usr/local/cuda, and in NVIDIA's
``nvidia-cuda-nvcc`` wheels (CUDA 13's and 12's).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from bisect_smem.core.frozen import frozen
from bisect_smem.devices.toolkit import toolkit_homes

WHEEL_HOMES = ("cu13", "cuda_nvcc")  # under the nvidia namespace package, newest first
PTXAS_TIMEOUT_S = 120  # a library's PTX of thousands of kernels assembles in tens of seconds
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_USED = re.compile(r"\bUsed \d+ registers")
_SMEM = re.compile(r"\b(\d+) bytes smem")
_VERSION = re.compile(r"release (\d+\.\d+)")


class PtxasFailed(Exception):
    """ptxas ran but gave no answer: the message is its first error line."""


@frozen
class PtxasAnswer:
    """Static shared memory (bytes) per entry, as ptxas assembled it, and which ptxas (e.g. ``13.0``)."""

    smem_bytes: dict[str, int]
    version: str


def find_ptxas() -> Path | None:
    """The ptxas executable, or None where none is installed."""
    found = shutil.which("ptxas")
    if found:
        return Path(found)
    homes = toolkit_homes()
    try:
        wheels = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        wheels = None
    if wheels is not None and wheels.submodule_search_locations:
        # NVIDIA's wheels: nvidia-cuda-nvcc 13 installs nvidia/cu13/bin/ptxas, the -cu12 one nvidia/cuda_nvcc/bin.
        homes += [Path(folder) / wheel for folder in wheels.submodule_search_locations for wheel in WHEEL_HOMES]
    for home in homes:
        for name in ("ptxas", "ptxas.exe"):
            candidate = home / "bin" / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    return None


def ptxas_smem(ptxas: Path, ptx: Path, arch: str, entry: str | None = None) -> PtxasAnswer:
    """Assemble ``ptx`` for ``arch`` (e.g. sm_90) with ``-v`` and read each entry's smem line; only
    ``entry`` where one is named, so one kernel of a library's PTX does not cost them all."""
    command = [str(ptxas), "-v", f"-arch={arch}", *(["-e", entry] if entry else []), str(ptx), "-o", os.devnull]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=PTXAS_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
        version = _version(ptxas)
    except subprocess.TimeoutExpired:
        raise PtxasFailed(f"ptxas took more than {PTXAS_TIMEOUT_S} s") from None
    except OSError as exc:
        raise PtxasFailed(f"ptxas cannot be run: {exc.strerror or exc}") from None
    log = done.stdout + done.stderr
    if done.returncode != 0:
        errors = [line for line in log.splitlines() if "error" in line or "fatal" in line] or log.splitlines()
        raise PtxasFailed(errors[0].strip()[:120] if errors else f"ptxas exited with {done.returncode}")
    return PtxasAnswer(_smem_lines(log), version)


@functools.lru_cache(maxsize=4)
def _version(ptxas: Path) -> str:
    """ptxas's release, e.g. ``13.0``: asked once per executable."""
    said = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True, errors="replace",
                          timeout=PTXAS_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False).stdout
    named = _VERSION.search(said)
    return named.group(1) if named else "of unknown version"


def _smem_lines(log: str) -> dict[str, int]:
    """Entry -> smem bytes from ptxas's -v log: each 'Compiling entry function' line, then its 'Used' line."""
    smem: dict[str, int] = {}
    entry = None
    for line in log.splitlines():
        started = _ENTRY.search(line)
        if started:
            entry = started.group(1)
        elif entry is not None and _USED.search(line):
            used = _SMEM.search(line)
            smem[entry] = int(used.group(1)) if used else 0  # no smem field: the entry uses none
            entry = None
    return smem
