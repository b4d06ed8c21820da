"""Triton kernels in a trace, known by what Triton's cache keeps beside each compiled kernel: its metadata
(``<cache>/<hash>/<name>.json``: num_warps, num_stages, ``shared``, the target it was compiled for),
where the cache is ``$TRITON_CACHE_DIR``, else ``~/.triton/cache``, as the traced command had it. A
Triton kernel's name is its Python function's, which says nothing of its config: without the cache,
the trace can only say why it is not known."""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.core.frozen import frozen
from bisect_smem.core.profiles import cc_text

MAX_ENTRIES = 50_000  # cache folders read at most: a cache is one folder per compiled kernel
MAX_METADATA_BYTES = 1 << 20  # a metadata file is a few KiB
# Triton names a kernel after its Python function, unmangled: an identifier.
PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")


@frozen
class Compiled:
    """One compiled kernel of the cache, as its metadata says."""

    name: str
    num_warps: int
    num_stages: int
    shared_bytes: int  # metadata.shared: what its launch asks for
    arch: int | None  # the target's compute capability as Triton writes it (90), None when not said
    version: str | None  # the Triton release that compiled it, where the metadata says


def cache_folder() -> Path:
    """Where Triton keeps compiled kernels: $TRITON_CACHE_DIR, else ~/.triton/cache."""
    given = os.environ.get("TRITON_CACHE_DIR")
    return Path(given) if given else Path.home() / ".triton" / "cache"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _read(path: Path) -> Compiled | None:
    """One metadata file, or None where it is not a readable one."""
    try:
        if path.stat().st_size > MAX_METADATA_BYTES:
            return None
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    warps, stages, shared = (_int(data.get(key)) for key in ("num_warps", "num_stages", "shared"))
    if warps is None or stages is None or shared is None:
        return None
    target = data.get("target")
    arch = _int(target.get("arch")) if isinstance(target, dict) else None
    version = data.get("triton_version")
    return Compiled(data["name"], warps, stages, shared, arch, version if isinstance(version, str) else None)


@functools.lru_cache(maxsize=4)
def compiled_in(folder: Path) -> tuple[Compiled, ...]:
    """Every kernel the cache ``folder`` holds (read once per folder and process); none where it is absent."""
    found: list[Compiled] = []
    try:
        entries = sorted(folder.iterdir())[:MAX_ENTRIES]
    except OSError:
        return ()
    for entry in entries:
        try:
            names = [p for p in entry.iterdir() if p.suffix == ".json" and not p.name.startswith("__grp__")]
        except OSError:
            continue
        found += [c for c in map(_read, names) if c is not None]
    return tuple(found)


def _config(c: Compiled) -> str:
    return f"num_warps {c.num_warps}, num_stages {c.num_stages}, metadata.shared {c.shared_bytes} B"


def recognize(kernel: str, requested_bytes: int, target: Target | None) -> tuple[str, ...] | None:
    """What Triton's cache says of a traced request by ``kernel``: its config and what its launch asks for,
    against what the process asked and the target's opt-in limit, or why its config is not known; None for a
    name the cache does not hold (a plain name asking for the device's ceiling is as likely cuDNN's or a CuPy
    kernel's as Triton's)."""
    if not PLAIN_NAME.match(kernel):
        return None
    folder = cache_folder()
    entries = [c for c in compiled_in(folder) if c.name == kernel]
    arch = None if target is None or target.compute_capability is None else \
        target.compute_capability[0] * 10 + target.compute_capability[1]
    ceiling = target is not None and requested_bytes == target.optin_limit_bytes
    if not entries:
        return None  # nothing says it is Triton's
    here = [c for c in entries if arch is None or c.arch in (arch, None)]
    if not here:
        built_for = ", ".join(sorted({f"sm_{c.arch}" for c in entries}))
        return (f"fit (triton): {kernel} is in Triton's cache {folder} compiled for {built_for} only, not for "
                f"this GPU (cc {cc_text(target.compute_capability)}): its config here is not known",)
    # A launch asks metadata.shared itself; an attribute set asks the device's ceiling, whatever the kernel needs.
    same = [c for c in here if c.shared_bytes == requested_bytes]
    configs = sorted(dict.fromkeys((c.num_warps, c.num_stages, c.shared_bytes, c.version) for c in (same or here)),
                     key=lambda config: config[:3])
    if len(configs) > 1:
        listed = "; ".join(f"num_warps {w}, num_stages {s}, {b} B" for w, s, b, _ in configs[:4])
        more = f" and {len(configs) - 4} more" if len(configs) > 4 else ""
        return (f"fit (triton): {len(configs)} compilations of {kernel} in Triton's cache {folder} ({listed}{more}): "
                "which one ran is not known from its name",)
    c = next(c for c in (same or here) if (c.num_warps, c.num_stages, c.shared_bytes, c.version) == configs[0])
    lines = [f"fit (triton {c.version or 'version not recorded'}, {kernel}, Triton's cache):",
             f"  {_config(c)}" + (", the same as asked" if same else
                                  f"; the process asked {requested_bytes} B" +
                                  (", the device's ceiling, as Triton's launcher does" if ceiling else ""))]
    if target is not None and target.optin_limit_bytes is not None:
        over = c.shared_bytes - target.optin_limit_bytes
        where = target.short or target.name
        lines.append(f"  {'over' if over > 0 else 'within'} the opt-in limit of {where} ({target.optin_limit_bytes} B)"
                     + (f" by {over} B: Triton raises OutOfResources" if over > 0 else f", {-over} B to spare"))
    return tuple(lines)
