"""The one reader of the files a person names: reports, baselines, compiled kernels. A file is read only
when it is a regular file (a FIFO, a device, a socket or a folder is refused before it is opened, and
opening never blocks), at most ``limit`` bytes, and its JSON, where it is JSON, holds no number of more
than MAX_DIGITS digits. Every refusal is an InputError (exit 2) whose text says what is wrong; the callers
put the file's name in front.

JSON text is read only where it holds no more values per KiB than any report does (``check_density``),
so that parsing a file takes memory of at most a small multiple of its size.

The reader says what it read: each file's device and inode are kept in the run's session (core/session.py,
``was_read``), so that the writer can refuse to replace a file this run took as input, however it is named.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from bisect_smem.core import session
from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen

MAX_DIGITS = 4300  # Python's own limit for turning digits into an int; far beyond any count the tool writes
MAX_VALUES_PER_KIB = 128
DENSITY_FROM_BYTES = 1 << 20
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK = 1 << 20


class InputError(UsageError):
    """An input file that cannot be used: not a regular file, too large, unreadable, or not the JSON it
    should be (exit 2). The text says what is wrong, without the file's name."""


@frozen
class Input:
    """A file read whole: its bytes and which file it was (device and inode, the same however it is named)."""

    data: bytes
    device: int
    inode: int


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words: ``a folder``, ``a FIFO``, ``a character device``..."""
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _cannot(exc: OSError) -> InputError:
    return InputError(f"cannot read it: {exc.strerror or exc}")


def read_file(path: Path | str, limit: int) -> Input:
    """The bytes of the regular file ``path``, at most ``limit``; anything else is an InputError."""
    check_regular(path)  # before anything is opened: a device or a FIFO never is
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise _cannot(exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between the two looks
            raise InputError(f"{kind_of(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise InputError(f"larger than {limit} B")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _cannot(exc) from None
    finally:
        os.close(fd)
    if size > limit:  # grew while it was read
        raise InputError(f"larger than {limit} B")
    session.current().reads[(info.st_dev, info.st_ino)] = str(path)
    return Input(b"".join(chunks), info.st_dev, info.st_ino)


def check_regular(path: Path | str) -> None:
    """An InputError when ``path`` is not a regular file that can be read (checked without opening it)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _cannot(exc) from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{kind_of(mode)}, not a regular file")


def refuse_waiting(path: str | None) -> None:
    """A FIFO or a socket named as an input is refused before anything opens it, so that nothing waits on
    one (what else a file is, or why it cannot be looked at, the reader says when it reads it)."""
    try:
        mode = os.stat(path).st_mode if path else stat.S_IFREG
    except OSError:
        return
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        raise UsageError(f"cannot read {path}: {kind_of(mode)}, not a regular file")


def check_density(data: bytes) -> None:
    """An InputError when JSON text holds more values per KiB than MAX_VALUES_PER_KIB: parsed, each value is a
    Python object of 30 to 70 bytes, so this bounds the memory a file takes to about ten times its size
    (the tool's own reports hold 30 to 60 values per KiB). Files below DENSITY_FROM_BYTES are not counted:
    at most a few tens of MB, whatever they hold."""
    if len(data) < DENSITY_FROM_BYTES:
        return
    values = data.count(b",") + data.count(b"{") + data.count(b"[")
    if values > MAX_VALUES_PER_KIB * len(data) // 1024:
        raise InputError(f"{values} values in {len(data)} B, more than {MAX_VALUES_PER_KIB} per KiB: "
                         "no report of this tool is that dense")


def parse_json(data: bytes) -> Any:
    """The JSON value of ``data``; text that is not JSON, or a number of more than MAX_DIGITS digits, is
    an InputError. How deep the value may nest is the schema's to say (core/schema.py)."""
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(str(exc)) from None
    except RecursionError:
        raise InputError("nested too deeply") from None
    except ValueError:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        raise InputError(f"a number of more than {MAX_DIGITS} digits") from None


def was_read(device: int, inode: int) -> str | None:
    """The name under which this run read the file (device, inode), or None."""
    return session.current().reads.get((device, inode))
