"""The collector's library: the one shipped prebuilt for this machine, else one compiled at first use with the
system C compiler and cached by the hash of its source under $XDG_CACHE_HOME/bisect-smem (default ~/.cache).

Prebuilt: the manylinux2014 wheels (x86_64, aarch64) carry it, built against glibc 2.17 by ``make wheel``
(zig cc), so a node without a compiler traces any command. Its file name holds the hash of the source it was
built from, and it is used only while that is the hash of the source shipped beside it: an edited collector.c
in a checkout never runs a stale binary. Elsewhere (another platform, an edited source) ``cc`` builds it: it
needs no CUDA headers, so any C compiler does in well under a second.

What is injected into every CUDA process must be the tool's own: a library is used only where it and its
folder belong to this user (or, for the shipped one, to root or the owner of the package) and nobody else can
write them. A cached one that fails is rebuilt; a cache folder that fails is left alone, and the collector is
built for this run in a fresh private folder instead.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from bisect_smem.core.atomic import replace_atomically

SOURCE_DIR = Path(__file__).resolve().parent
SOURCES = ("collector.c", "cupti_abi.h")
FLAGS = ("-O2", "-fPIC", "-shared", "-std=gnu11", "-fvisibility=default")
LIBS = ("-ldl", "-lpthread")
COMPILE_TIMEOUT_S = 120

PREBUILT_DIR = SOURCE_DIR / "prebuilt"
# The wheels' platforms: manylinux2014 is glibc 2.17 (RHEL 7 and later, Ubuntu 14.04 and later).
PREBUILT_MACHINES = ("x86_64", "aarch64")
PREBUILT_GLIBC = "2.17"
PRIVATE_FOLDER_MODE = 0o700
LIBRARY_MODE = 0o755
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


class CollectorBuildError(Exception):
    """No collector for this machine: none shipped, and no C compiler, or it failed (the text says which)."""


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


def library_name() -> str:
    """The file name of a collector built from this source, cached or prebuilt."""
    return f"collector-{source_hash()}.so"


def prebuilt_path(machine: str) -> Path:
    """Where the collector prebuilt for ``machine`` (a name of PREBUILT_MACHINES) from this source lies."""
    return PREBUILT_DIR / machine / library_name()


def compile_command(cc: Sequence[str], output: Path) -> list[str]:
    """The command line that builds the collector into ``output`` with the compiler ``cc`` (its words)."""
    return [*cc, *FLAGS, "-o", str(output), str(SOURCE_DIR / "collector.c"), *LIBS]


def compiler(environ: dict[str, str] | None = None) -> str | None:
    """The C compiler: $CC, else cc, else gcc or clang, on the environment's PATH; None when there is none."""
    env = os.environ if environ is None else environ
    for name in (env.get("CC"), "cc", "gcc", "clang"):
        found = shutil.which(name, path=env.get("PATH")) if name else None
        if found:
            return found
    return None


def prebuilt(machine: str | None = None) -> tuple[Path | None, str]:
    """The collector shipped for this machine and built from the source beside it; else None, and why not
    (another platform or C library, a checkout whose source changed since, a file others could write)."""
    machine = machine or platform.machine()
    if machine not in PREBUILT_MACHINES:
        return None, f"none is shipped for {machine}"
    if not _glibc():
        return None, "the one shipped needs glibc"
    library = prebuilt_path(machine)
    if not library.exists():
        built = any(library.parent.glob("collector-*.so"))
        return None, ("the one shipped was built from another source" if built else
                      "this installation ships none (a checkout, or an install from source)")
    # Trusted as far as this module, which is running: an installed package belongs to root, to the user who
    # installed it, or to the account that keeps a shared environment.
    owners = {os.geteuid(), 0, os.stat(__file__).st_uid}
    if not (_private(library.parent, owners, stat.S_ISDIR) and _private(library, owners, stat.S_ISREG)):
        return None, f"the one shipped, {library}, or its folder could be written by someone else"
    return library, "shipped"


def collector_library(environ: dict[str, str] | None = None) -> Path:
    """The collector to inject: the prebuilt one, else the cached build of this source, compiled now when
    there is none, or when the one there could have been written by someone else."""
    shipped, why_not = prebuilt()
    if shipped is not None:
        return shipped
    folder = cache_dir(environ)
    if not _private_folder(folder):
        # Not ours, or others can write it: what is in it cannot be trusted, and neither can a build put
        # there. This run builds in a folder of its own, gone when the tool ends.
        folder = Path(tempfile.mkdtemp(prefix="bisect-smem-collector-"))
        atexit.register(_remove_in, os.getpid(), folder)
    target = folder / library_name()
    if _private(target, {os.geteuid()}, stat.S_ISREG):
        return target
    return _build(target, environ, why_not)


def _build(target: Path, environ: dict[str, str] | None, why_not_prebuilt: str) -> Path:
    """Compile the collector into ``target`` (in a private folder), replacing whatever is there."""
    cc = compiler(environ)
    if cc is None:
        raise CollectorBuildError(f"no prebuilt collector: {why_not_prebuilt}; no C compiler (cc, gcc or clang)")
    try:
        # Built in a folder of its own, then put in place whole: a concurrent or killed build never leaves
        # half a library where another run would load it. Its mode is set, not taken from the file it
        # replaces (a planted one may be writable by all) nor from the umask.
        with tempfile.TemporaryDirectory(prefix=".collector-", dir=target.parent) as work:
            built = Path(work) / "collector.so"
            done = subprocess.run(compile_command([cc], built), capture_output=True, text=True,
                                  timeout=COMPILE_TIMEOUT_S, check=False)
            if done.returncode != 0:
                raise CollectorBuildError(f"{cc} failed to build the collector: {done.stderr.strip()[-500:]}")
            replace_atomically(target, built.read_bytes(), mode=LIBRARY_MODE)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CollectorBuildError(f"cannot build the collector in {target.parent}: {exc}") from None
    return target


def _remove_in(pid: int, folder: Path) -> None:
    """Remove ``folder`` at the exit of process ``pid`` alone: a forked child inherits the atexit hooks."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def _private_folder(folder: Path) -> bool:
    """Make ``folder`` (0700) where it is missing; whether it is then this user's, writable by nobody else."""
    try:
        folder.mkdir(mode=PRIVATE_FOLDER_MODE, parents=True, exist_ok=True)
    except OSError:
        return False
    return _private(folder, {os.geteuid()}, stat.S_ISDIR)


def _private(path: Path, owners: set[int], is_kind: Callable[[int], bool]) -> bool:
    """Whether ``path`` itself (a link is not followed) is of the kind ``is_kind`` tests its mode for
    (stat.S_ISREG, stat.S_ISDIR), belongs to one of ``owners`` and cannot be written by group or others."""
    try:
        status = os.lstat(path)
    except OSError:
        return False
    return is_kind(status.st_mode) and status.st_uid in owners and not status.st_mode & _WRITABLE_BY_OTHERS


def _glibc() -> str | None:
    """This process's C library, as "glibc 2.36"; None where it is not glibc (musl has no such name)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None
