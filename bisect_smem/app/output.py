"""Files the tool writes: the JSON report, baselines, fit results and plots, each checked before any
work is done and written so that a reader sees the old file or the whole new one, never a part."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bisect_smem.core.errors import UsageError


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` so that readers see the old file or the whole new one, never a part.

    The temporary file lives in the same folder (os.replace is atomic only within one file system)
    and is removed if anything fails, a full disk included.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        data = content.encode("utf-8") if isinstance(content, str) else content
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def output_path(text: str | None, what: str = "the report") -> Path | None:
    """The file to write for ``--json TEXT`` (None for none or '-'), checked before any work is done."""
    if not text or text == "-":
        return None
    path = Path(text)
    problem = check_writable(path)
    if problem:
        raise UsageError(f"cannot write {what} to {text}: {problem}")
    return path


def check_writable(path: Path) -> str | None:
    """Why a report cannot be written to ``path``, or None when it can (checked before measuring)."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder, not a file"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"folder {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"folder {parent} is not writable"
    return None
