"""NVRTC through cuda-bindings, and a disk cache of compiled probe modules with their lowered names.

CuPy's RawModule recompiles every time it is given name expressions (it needs NVRTC to tell it the
mangled names), so its kernel cache never serves the probe module and every run paid the compile.
Here a module is compiled once per (source, names, options, architecture, NVRTC version) and kept as a
cubin beside a small JSON file of its lowered names; a later run only loads it. A damaged or foreign
cache entry is compiled again, never trusted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not on Windows: there, each process that misses an entry compiles it
    fcntl = None  # type: ignore[assignment]

from bisect_smem.core.atomic import replace_atomically
from bisect_smem.core.environment import CACHE_DIR as CACHE_ENV
from bisect_smem.core.frozen import frozen

CACHE_FORMAT = 1


class NvrtcUnavailable(Exception):
    """cuda-bindings' NVRTC cannot be loaded here (the caller falls back to CuPy's compiler)."""


@frozen
class Compiled:
    """One NVRTC compile: the log, each name expression's lowered (mangled) name, and the image."""

    ok: bool
    log: str
    lowered: dict[str, str]
    image: bytes  # a cubin for sm_XX targets, PTX for compute_XX


def bindings() -> Any:
    """cuda-bindings' NVRTC module; NvrtcUnavailable where cuda-bindings is not installed."""
    try:
        # Deferred: cuda-bindings is an extra, loaded only where a probe module or fit --ptx compiles.
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise NvrtcUnavailable(f"cuda-bindings is not installed ({exc})") from exc
    return nvrtc


@functools.cache
def supported_archs() -> tuple[int, ...]:
    """The ``sm_XX`` numbers this NVRTC can target; NvrtcUnavailable without cuda-bindings' NVRTC."""
    nvrtc = bindings()
    try:
        err, archs = nvrtc.nvrtcGetSupportedArchs()
    except RuntimeError as exc:  # the NVRTC library itself could not be found
        raise NvrtcUnavailable(f"NVRTC is not loadable ({exc})") from exc
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcUnavailable(f"NVRTC is not loadable ({err})")
    return tuple(archs)


def nvrtc_version() -> str:
    """``13.0``."""
    _, major, minor = bindings().nvrtcVersion()
    return f"{major}.{minor}"


def compile_source(source: str, arch: str, names: list[str], options: tuple[str, ...] = (),
                   cubin: bool = False) -> Compiled:
    """Compile for ``arch`` (``sm_90``): a cubin with ``cubin``, else PTX for the matching compute_XX."""
    nvrtc = bindings()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"probe.cu", 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcUnavailable(f"nvrtcCreateProgram failed ({err})")
    try:
        for name in names:
            nvrtc.nvrtcAddNameExpression(prog, name.encode())
        target = f"--gpu-architecture={arch if cubin else arch.replace('sm_', 'compute_')}"
        opts = [target.encode(), *(o.encode() for o in options)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log_text = log.decode(errors="replace").rstrip("\x00 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return Compiled(False, log_text, {}, b"")
        lowered = {name: nvrtc.nvrtcGetLoweredName(prog, name.encode())[1].decode() for name in names}
        size_of, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if cubin
                        else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
        _, size = size_of(prog)
        image = b" " * size
        get(prog, image)
        return Compiled(True, log_text, lowered, image)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def cache_dir() -> Path:
    """Where compiled modules are kept: $BISECT_SMEM_CACHE_DIR, else beside CuPy's kernel cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    cupy_cache = os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")
    return Path(cupy_cache) / "bisect_smem"


def cache_key(source: str, names: list[str], options: tuple[str, ...], arch: str, version: str) -> str:
    """The entry's name: everything that changes the compiled image."""
    text = json.dumps([CACHE_FORMAT, source, sorted(names), list(options), arch, version])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def cached_cubin(source: str, names: list[str], options: tuple[str, ...], arch: str,
                 folder: Path | None = None) -> tuple[Path, dict[str, str]]:
    """The path of the module's cubin and its lowered names, compiling and caching it when not cached.

    Raises NvrtcUnavailable where cuda-bindings' NVRTC cannot serve, and CompileFailed with the log
    when the source does not compile."""
    if int(arch.removeprefix("sm_")) not in supported_archs():
        raise NvrtcUnavailable(f"this NVRTC cannot build a cubin for {arch}")
    folder = folder or cache_dir()
    key = cache_key(source, names, options, arch, nvrtc_version())
    cubin, index = folder / f"{key}.cubin", folder / f"{key}.json"
    lowered = _read_entry(cubin, index, names)
    if lowered is not None:
        return cubin, lowered
    folder.mkdir(parents=True, exist_ok=True)
    with _compiling(folder / f"{key}.lock"):
        lowered = _read_entry(cubin, index, names)  # another process may have compiled it meanwhile
        if lowered is not None:
            return cubin, lowered
        built = compile_source(source, arch, names, options, cubin=True)
        if not built.ok:
            raise CompileFailed(built.log)
        # Readers in other processes see no file or the whole file (two writers write the same bytes).
        replace_atomically(cubin, built.image)
        replace_atomically(index, json.dumps({"sha256": hashlib.sha256(built.image).hexdigest(),
                                         "lowered": built.lowered}, sort_keys=True).encode())
    return cubin, built.lowered


@contextlib.contextmanager
def _compiling(lock: Path) -> Iterator[None]:
    """Held while a missing entry is compiled: the workers of several devices (and other runs) that miss
    the same entry at once wait for the first one's compile and load it, rather than each compiling it.
    The lock goes with its process, however that ends. Where there is no flock, each compiles."""
    if fcntl is None:
        yield
        return
    with lock.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class CompileFailed(Exception):
    """The probe source did not compile; carries NVRTC's log."""

    def __init__(self, log: str) -> None:
        super().__init__(log)
        self.log = log


def _read_entry(cubin: Path, index: Path, names: list[str]) -> dict[str, str] | None:
    """The cached lowered names when both files are there, whole and matching; else None."""
    try:
        entry = json.loads(index.read_text())
        image = cubin.read_bytes()
    except (OSError, ValueError):
        return None
    lowered = entry.get("lowered") if isinstance(entry, dict) else None
    if (not isinstance(lowered, dict) or set(lowered) != set(names)
            or entry.get("sha256") != hashlib.sha256(image).hexdigest()):
        return None
    return lowered
