"""Files the tool writes: the JSON report, baselines, fit results and plots, each checked before any
work is done and written so that a reader sees the old file or the whole new one, never a part.

A regular file (or a link to one) is replaced atomically (core/atomic.py), keeping an existing file's mode
and otherwise taking the umask's. A special file (a terminal, /dev/null, a FIFO, /dev/stdout) is written directly,
never replaced. Every OS error becomes an OutputError naming the file (exit 2).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from bisect_smem.core.atomic import replace_atomically
from bisect_smem.core.errors import OutputError, UsageError


def is_special(path: Path) -> bool:
    """True for a target that must be written in place: anything under /dev or /proc, or an existing
    file that is neither regular nor a folder (a character device, a FIFO, a socket)."""
    if str(path).startswith(("/dev/", "/proc/")):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def target_of(path: Path) -> Path:
    """Where writing ``path`` lands: a symbolic link's final target (which may not exist yet)."""
    path = Path(path)
    return path.resolve() if path.is_symlink() else path


def write_atomic(path: Path, content: str | bytes, exclusive: bool = False, what: str = "the file") -> None:
    """Write ``content`` to ``path``: in place for a special file, else atomically through any link.

    ``exclusive`` refuses (OutputError) when the final name exists, decided atomically by link(2) on the
    finished temporary file, so of two concurrent writers exactly one succeeds.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        if is_special(Path(path)):
            _write_in_place(Path(path), data)
        else:
            replace_atomically(target_of(Path(path)), data, exclusive)
    except FileExistsError:
        raise OutputError(f"cannot write {what} to {path}: it exists (use --force to replace it)") from None
    except OSError as exc:
        raise OutputError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None


def _write_in_place(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def output_path(text: str | None, what: str = "the report") -> Path | None:
    """The file to write for ``--json TEXT`` (None when not given or '-'), checked before any work is done."""
    if text is None or text == "-":
        return None
    if not text.strip():
        raise UsageError(f"cannot write {what} to an empty path (is a variable unset?)")
    path = Path(text)
    problem = check_writable(path)
    if problem:
        raise UsageError(f"cannot write {what} to {text}: {problem}")
    return path


def check_writable(path: Path) -> str | None:
    """Why a report cannot be written to ``path``, or None when it can (checked before measuring)."""
    path = Path(path)
    if is_special(path):
        return _special_problem(path)
    path = target_of(path)
    if path.is_dir():
        return f"{path} is a folder, not a file"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"folder {parent} does not exist" if not parent.exists() else f"{parent} is a file, not a folder"
    return _folder_problem(parent)


def _special_problem(path: Path) -> str | None:
    if not path.exists():
        return f"{path} does not exist"
    return None if os.access(path, os.W_OK) else f"{path} is not writable"


def _folder_problem(folder: Path) -> str | None:
    """Why nothing can be created in ``folder`` (no permission, a read-only file system), or None."""
    if not os.access(folder, os.W_OK):
        return f"folder {folder} is not writable"
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"folder {folder} is on a read-only file system"
    except OSError:
        pass
    return None


def check_folder(text: str, what: str) -> Path:
    """A folder the tool will create files under (``--save-baseline DIR``), checked before measuring:
    it may not exist yet, but then its nearest existing parent must be a writable folder."""
    if not text.strip():
        raise UsageError(f"{what}: an empty path (is a variable unset?)")
    path = target_of(Path(text))
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{what} {text}: {existing} is a file, not a folder")
    problem = _folder_problem(existing)
    if problem:
        raise UsageError(f"{what} {text}: {problem}")
    return Path(text)


def make_folders(path: Path, what: str = "the file") -> None:
    """Create the folders above ``path``; an OS error becomes an OutputError naming it."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno == errno.EEXIST or isinstance(exc, FileExistsError | NotADirectoryError):
            raise OutputError(f"cannot write {what} to {path}: a file is in the way of its folder") from None
        raise OutputError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
