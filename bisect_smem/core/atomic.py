"""The one way the tool replaces a file: readers, in this process or another, see the old file or the
whole new one, never a part. The reports, baselines, plots and fit results (app/outputs/writer.py) and the
compiled-module cache (devices/nvrtc.py) are all written through it.

The one kind of I/O core does beside reading back the tool's own files (saved.py): it lives here because
the two layers that write, devices and app, share nothing lower.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def umask_mode() -> int:
    """The mode a new file gets from open(): 0666 less the umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


_TEMPORARY_EXTRA_BYTES = len(".") + len(".") + 8 + len(".tmp")  # mkstemp's 8 random letters between


def _temporary_stem(path: Path) -> str:
    """The final name, cut (in bytes, as the file system counts) so that the temporary name beside it is
    no longer than the longest name the folder allows: a legal 242-255-byte name must not fail only
    because of the temporary file."""
    try:
        name_max = os.pathconf(path.parent if str(path.parent) else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    raw = os.fsencode(path.name)
    return os.fsdecode(raw[:max(1, name_max - _TEMPORARY_EXTRA_BYTES)])


def replace_atomically(path: Path, data: bytes, exclusive: bool = False, mode: int | None = None) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk, and move it into place,
    with ``mode`` where given, else keeping an existing file's mode (else the umask's). ``exclusive`` refuses with FileExistsError when
    ``path`` exists, decided atomically by link(2) on the finished file, so of two writers exactly one
    wins. The temporary file lives in the same folder (rename and link are atomic only within one file
    system) and is removed if anything fails, a full disk included. OS errors propagate."""
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = umask_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{_temporary_stem(path)}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            os.link(tmp, path)
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
