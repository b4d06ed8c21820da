"""Where libcupti is found for a traced command, and which one was used.

The collector inside the traced process prefers a libcupti that process already loaded (two copies in one
process collide); the file found here is what it loads otherwise. The order: one already loaded in this
process, BISECT_SMEM_CUPTI_LIBRARY, the nvidia-cuda-cupti wheels that PyTorch installs (CUDA 13's
``nvidia/cu13/lib``, CUDA 12's ``nvidia/cuda_cupti/lib``), then the toolkit ($CUDA_HOME, /usr/local/cuda).
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from bisect_smem.devices.toolkit import SYSTEM_CUDA, toolkit_homes

OVERRIDE = "BISECT_SMEM_CUPTI_LIBRARY"
WHEEL_DIRS = ("nvidia/cu13/lib", "nvidia/cuda_cupti/lib", "nvidia/cu12/lib")
TOOLKIT_DIRS = ("extras/CUPTI/lib64", "lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")
INSTALL_HINT = ("install libcupti: pip install nvidia-cuda-cupti (CUDA 13) or nvidia-cuda-cupti-cu12 (CUDA 12), "
                f"or name the file with {OVERRIDE}=/path/to/libcupti.so")


@dataclass(frozen=True)
class Found:
    """A libcupti file and how it was found ("already loaded", the override, "wheel", "toolkit")."""

    path: str
    how: str


def _loaded() -> str | None:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "/libcupti.so" in path:
                    return path
    except OSError:
        pass
    return None


def _newest(folder: Path) -> str | None:
    """The libcupti.so.N of ``folder`` with the highest N (a wheel ships one)."""
    names = sorted(glob.glob(str(folder / "libcupti.so*")), key=lambda p: (len(p), p))
    return names[-1] if names else None


def candidates(search_path: list[str] | None = None, environ: dict[str, str] | None = None) -> list[Found]:
    """Every libcupti that could be used, best first (the order of the module's docstring)."""
    env = os.environ if environ is None else environ
    found = []
    loaded = _loaded()
    if loaded:
        found.append(Found(loaded, "already loaded"))
    if env.get(OVERRIDE):
        found.append(Found(env[OVERRIDE], OVERRIDE))
    for entry in search_path if search_path is not None else sys.path:
        for sub in WHEEL_DIRS:
            path = _newest(Path(entry or ".") / sub)
            if path:
                found.append(Found(path, f"wheel ({sub})"))
    homes = [*toolkit_homes(env), *map(Path, sorted(glob.glob(f"{SYSTEM_CUDA}-*"), reverse=True))]
    for home in homes:
        for sub in TOOLKIT_DIRS:
            path = _newest(Path(home) / sub)
            if path:
                found.append(Found(path, f"toolkit ({home})"))
    return [f for i, f in enumerate(found) if os.path.isfile(f.path) and f.path not in {g.path for g in found[:i]}]


def find(search_path: list[str] | None = None, environ: dict[str, str] | None = None) -> Found | None:
    """The libcupti to use, or None when there is none (then INSTALL_HINT says what to install)."""
    found = candidates(search_path, environ)
    return found[0] if found else None
