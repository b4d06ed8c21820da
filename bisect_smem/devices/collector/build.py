"""The collector's build: compiled at first use with the system C compiler and cached by the hash of its
source under $XDG_CACHE_HOME/bisect-smem (default ~/.cache), written atomically.

At first use rather than at install: the package stays pure Python (one wheel for every platform), the
collector needs no CUDA headers so any ``cc`` builds it in well under a second, and a machine without a
compiler still installs and traces Python commands through the ctypes fallback.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bisect_smem.core.atomic import replace_atomically

SOURCE_DIR = Path(__file__).resolve().parent
SOURCES = ("collector.c", "cupti_abi.h")
FLAGS = ("-O2", "-fPIC", "-shared", "-std=gnu11", "-fvisibility=default")
LIBS = ("-ldl", "-lpthread")
COMPILE_TIMEOUT_S = 120


class CollectorBuildError(Exception):
    """The collector could not be built: no C compiler, or it failed (the text carries its log's end)."""


def cache_dir(environ: dict[str, str] | None = None) -> Path:
    """Where built collectors are kept."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "bisect-smem"


def source_hash() -> str:
    """The hash of the collector's source and flags: a new source or flag is a new file."""
    digest = hashlib.sha256(" ".join(FLAGS + LIBS).encode())
    for name in SOURCES:
        digest.update((SOURCE_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def compiler(environ: dict[str, str] | None = None) -> str | None:
    """The C compiler: $CC, else cc, else gcc or clang; None when there is none."""
    env = os.environ if environ is None else environ
    for name in (env.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def collector_library(environ: dict[str, str] | None = None) -> Path:
    """The built collector, compiled now if this source was never built here."""
    folder = cache_dir(environ)
    target = folder / f"collector-{source_hash()}.so"
    if target.is_file():
        return target
    cc = compiler(environ)
    if cc is None:
        raise CollectorBuildError("no C compiler (cc, gcc or clang) to build the collector")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # Built in a folder of its own, then moved into place whole: a concurrent or killed build never
        # leaves half a library where another run would load it.
        with tempfile.TemporaryDirectory(prefix=".collector-", dir=folder) as work:
            built = Path(work) / "collector.so"
            done = subprocess.run([cc, *FLAGS, "-o", str(built), str(SOURCE_DIR / "collector.c"), *LIBS],
                                  capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False)
            if done.returncode != 0:
                raise CollectorBuildError(f"{cc} failed to build the collector: {done.stderr.strip()[-500:]}")
            replace_atomically(target, built.read_bytes())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CollectorBuildError(f"cannot build the collector in {folder}: {exc}") from None
    return target
