"""The one writer: every file the tool writes (the JSON report, baselines, metrics, feature files, fit
results, exports, plots) is checked before any work is done (``output_path``), decided by what the file
is, never by its path, and written so that a reader sees the old file or the whole new one, never a part.

A regular file (or a link to one) is replaced atomically (core/atomic.py), keeping an existing file's mode
and otherwise taking the umask's; a file without any write permission is read-only and refused, and so
is a file this run reads as input (core/input.py says which), however it is named. The regular file that
is this process's stdout or stderr is written through that descriptor, as the shell that opened it
intends. Anything else that can be written (a terminal, /dev/null, a FIFO) is written in place, opened
when it is checked and without blocking: a FIFO that has no reader is refused before any work, one with
a reader keeps it until the output is written. Every OS error becomes an OutputError naming what the
file was and where (exit 2). What a run has planned and written is kept in its session (core/session.py).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from pathlib import Path

from bisect_smem.core import input as reader
from bisect_smem.core import session
from bisect_smem.core.atomic import replace_atomically
from bisect_smem.core.errors import OutputError, UsageError

_SPECIAL_FLAGS = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def target_of(path: Path) -> Path:
    """Where writing ``path`` lands: a symbolic link's final target (which may not exist yet). A link loop
    is left as it is: looking at it fails, and says so."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


def _stdio_fd(info: os.stat_result) -> int | None:
    """1 or 2 when ``info`` is the regular file open as this process's stdout or stderr, else None."""
    for fd in range(1, 3):  # stdout, stderr
        try:
            std = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(std.st_mode) and (std.st_dev, std.st_ino) == (info.st_dev, info.st_ino):
            return fd
    return None


def is_stdout(path: Path) -> bool:
    """True when writing ``path`` writes this process's stdout (``/dev/stdout``, the file or pipe behind
    it), /dev/null aside, which takes anything."""
    try:
        info, std = os.stat(path), os.fstat(1)
    except OSError:
        return False
    if stat.S_ISCHR(info.st_mode) and info.st_rdev == os.stat(os.devnull).st_rdev:
        return False
    return (info.st_dev, info.st_ino) == (std.st_dev, std.st_ino)


def check_writable(path: Path) -> str | None:
    """Why a file cannot be written to ``path``, or None when it can: decided by what the file is."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return _new_file_problem(target_of(path))
    except NotADirectoryError:
        return "a file is in the way of its folder"
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISDIR(info.st_mode):
        return f"{path} is a folder, not a file"
    name = reader.was_read(info.st_dev, info.st_ino)
    if name is not None:
        return f"it is {name}, which this run reads; write to another file"
    if stat.S_ISREG(info.st_mode):
        if not info.st_mode & 0o222 or not os.access(path, os.W_OK):
            return f"{path} is read-only"
        return None if _stdio_fd(info) is not None else _folder_problem(target_of(path).parent)
    return None if os.access(path, os.W_OK) else f"{path} is not writable"


def _new_file_problem(path: Path) -> str | None:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        return f"folder {parent} does not exist" if not parent.exists() else not_a_folder(parent)
    return _folder_problem(parent)


def not_a_folder(path: Path | str) -> str:
    """``/dev/null is a character device, not a folder``: what is at ``path`` where a folder was wanted."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = stat.S_IFREG
    return f"{path} is {'a file' if stat.S_ISREG(mode) else reader.kind_of(mode)}, not a folder"


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


def output_path(text: str | None, what: str = "the report") -> Path | None:
    """The file to write for ``--json TEXT`` (None when not given or '-'), checked before any work is done:
    a special file is opened now, without waiting (a FIFO without a reader is refused), and kept open
    until ``write_atomic`` writes it or ``forget`` ends the run."""
    if text is None or text == "-":
        return None
    if not text.strip():
        raise UsageError(f"cannot write {what} to an empty path (is a variable unset?)")
    if text.endswith(os.sep) or os.path.basename(text) in (".", ".."):
        # Path() drops the trailing slash, and the folder's name would be written as a file.
        raise UsageError(f"cannot write {what} to {text}: the path names a folder, not a file; give a file name")
    problem = check_writable(Path(text))
    if problem:
        raise UsageError(f"cannot write {what} to {text}: {problem}")
    _claim(text, what)
    fd = None
    try:
        if not stat.S_ISREG(os.stat(text).st_mode):
            fd = _open_special(Path(text))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UsageError(f"cannot write {what} to {text}: {_problem(exc)}") from None
    _forget_planned(text)
    session.current().planned[text] = (what, fd)
    return Path(text)


def file_identity(path: Path) -> tuple[object, ...] | None:
    """What names one file however it is spelt (a link, a hard link, ``a/../b``): its device and inode, or
    for a file not made yet the path every link resolved; None for a special file, which several outputs
    may share (each is written in place, none replaces another)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return ("new", os.path.realpath(path))
    except OSError:
        return None
    return ("file", info.st_dev, info.st_ino) if stat.S_ISREG(info.st_mode) and _stdio_fd(info) is None else None


def _claim(text: str, what: str) -> None:
    """Refuse a second output onto the file another output of this run is to be written to: the later
    write would replace the earlier one whole, and a result asked for would be lost."""
    identity = file_identity(Path(text))
    if identity is None:
        return
    planned_files = session.current().planned_files
    other = planned_files.get(identity)
    if other is not None and other[1] != what:
        raise UsageError(f"cannot write {what} to {text}: {other[1]} is written there too ({other[0]}); "
                         "give each output its own file")
    planned_files[identity] = (text, what)


def _open_special(path: Path) -> int:
    fd = os.open(path, _SPECIAL_FLAGS)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)  # the reader sets the pace
    return fd


def _problem(exc: OSError) -> str:
    return "a FIFO with no reader" if exc.errno == errno.ENXIO else (exc.strerror or str(exc))


def write_atomic(path: Path, content: str | bytes, exclusive: bool = False, what: str | None = None) -> None:
    """Write ``content`` to ``path`` (see the module's docstring); ``exclusive`` refuses (OutputError) when the
    final name exists, decided atomically by link(2) on the finished temporary file, so of two concurrent
    writers exactly one succeeds. ``what`` defaults to what ``output_path`` was told the file is."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    run = session.current()
    planned_what, fd = run.planned.pop(str(path), (None, None))
    where = f"cannot write {what or planned_what or 'the file'} to {path}"
    try:
        if fd is not None:
            _write_fd(fd, data)
        else:
            _write_path(Path(path), data, exclusive)
    except FileExistsError:
        raise OutputError(f"{where}: it exists (use --force to replace it)") from None
    except OSError as exc:
        raise OutputError(f"{where}: {_problem(exc)}") from None
    finally:
        if fd is not None:
            os.close(fd)
    run.written.append(str(path))


def _write_path(path: Path, data: bytes, exclusive: bool) -> None:
    problem = check_writable(path)  # the file may have changed since it was checked
    if problem:
        raise OSError(errno.EPERM, problem)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        fd = _open_special(path)
        try:
            _write_fd(fd, data)
        finally:
            os.close(fd)
    elif info is not None and _stdio_fd(info) is not None:
        # Through the descriptor the shell opened: a second one would start at its own offset.
        std = _stdio_fd(info)
        (sys.stdout if std == 1 else sys.stderr).flush()
        _write_fd(std, data)
    else:
        replace_atomically(target_of(path), data, exclusive)


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def check_folder(text: str, what: str) -> Path:
    """A folder the tool will create files under (``--save-baseline DIR``), checked before measuring:
    it may not exist yet, but then its nearest existing parent must be a writable folder."""
    if not text.strip():
        raise UsageError(f"{what}: an empty path (is a variable unset?)")
    try:
        os.stat(text)
    except (FileNotFoundError, NotADirectoryError):
        pass  # made when saved; a file in the way is named below
    except OSError as exc:  # a link loop
        raise UsageError(f"{what} {text}: {exc.strerror or exc}") from None
    existing = Path(os.path.realpath(text))
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{what} {text}: {not_a_folder(existing)}")
    problem = _folder_problem(existing)
    if problem:
        raise UsageError(f"{what} {text}: {problem}")
    return Path(text)


def check_within(path: Path, folder: Path, what: str) -> None:
    """Refuse (OutputError) a ``path`` under ``folder`` that a link leads out of it: a link planted in a
    baseline folder would otherwise have ``--force`` replace a file anywhere the user can write."""
    root, real = os.path.realpath(folder), os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise OutputError(f"cannot write {what} to {path}: a link leads it to {real}, outside {folder}; "
                          "remove the link")


def make_folders(path: Path, what: str = "the file") -> list[Path]:
    """Create the folders above ``path`` and return those it made (``remove_folders`` takes them away again
    when the write fails); an OS error becomes an OutputError naming it."""
    missing, made = [], []
    parent = Path(path).parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            remove_folders(made)
            if isinstance(exc, NotADirectoryError):
                raise OutputError(f"cannot write {what} to {path}: a file is in the way of its folder") from None
            raise OutputError(f"cannot write {what} to {path}: {exc.strerror or exc}") from None
        made.append(folder)
    return made


def remove_folders(made: list[Path]) -> None:
    """Remove folders ``make_folders`` made, deepest first, as long as they are empty."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            break


def written() -> list[str]:
    """The files written whole in this run, in order."""
    return list(session.current().written)


def _forget_planned(text: str) -> None:
    _, fd = session.current().planned.pop(text, (None, None))
    if fd is not None:
        os.close(fd)


def close_planned() -> None:
    """End a run: close what was opened for outputs never written (a FIFO, a terminal)."""
    for text in list(session.current().planned):
        _forget_planned(text)
