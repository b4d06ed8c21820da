"""The folder a trace is kept in, claimed for that trace alone: ``--out DIR``, or without it a new numbered
folder in the working directory (bisect-smem-trace-1, -2, ..., one more than the highest there, as nsys numbers
its reports). The claim is a file (CLAIM) made with O_EXCL before anything runs, so of two traces started into
one folder exactly one gets it, and a folder that holds a trace, running or done, is never written to again.
The folder is made 0700 and the claim 0600: the files of a trace hold full command lines. Beside the claim,
LIMITS_FILE keeps the limits the trace is explained against, so that ``--from`` explains it the same way on any
machine rather than against whatever GPU that machine has."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.app.run.trace_explain import LIMITS_FILE, limits_document
from bisect_smem.core.atomic import replace_atomically
from bisect_smem.core.errors import OutputError, UsageError
from bisect_smem.devices.collector.environment import DIR_BYTES

STEM = "bisect-smem-trace"
CLAIM = "trace.json"
CLAIM_FORMAT = 1
FOLDER_MODE, FILE_MODE = 0o700, 0o600
OLDER_TRACE = ("*.jsonl", LIMITS_FILE)  # what a folder traced into before the claim file existed holds
_NUMBERED = re.compile(rf"{re.escape(STEM)}-(\d{{1,9}})")


class Claimed:
    """A trace folder this run holds; ``release`` gives it up while nothing has run in it yet."""

    def __init__(self, path: Path, made: bool) -> None:
        self.path, self.made = path, made
        self.written = [CLAIM]  # the tool's own files in it, which release removes

    def release(self) -> None:
        """Remove the tool's files, and the folder where this run made it and it is empty again."""
        for name in reversed(self.written):
            with contextlib.suppress(OSError):
                (self.path / name).unlink()
        if self.made:
            with contextlib.suppress(OSError):
                self.path.rmdir()


def record_limits(claimed: Claimed, here: Target) -> None:
    """Keep ``here`` beside the trace in ``claimed``, for --from (trace_explain.LIMITS_FORMAT); an OutputError where it cannot
    be written."""
    path = claimed.path / LIMITS_FILE
    claimed.written.append(LIMITS_FILE)
    try:
        replace_atomically(path, limits_document(here).encode(), exclusive=True, mode=FILE_MODE)
    except OSError as exc:
        raise OutputError(f"cannot write the trace's limits to {path}: {exc.strerror or exc}") from None


def held_message(folder: Path) -> str:
    """Why ``folder`` is refused, and the options that go on from there."""
    return (f"--out {folder} already holds a trace: explain it with --from {folder}, or name a new folder with "
            "--out (without --out, each trace gets a new numbered folder)")


def _check_length(folder: Path) -> None:
    length = len(os.fsencode(str(folder)))
    if length >= DIR_BYTES:
        raise UsageError(f"--out {folder}: its absolute path is {length} bytes; the collector takes at most "
                         f"{DIR_BYTES - 1}: name a shorter folder")


def _claim_file(folder: Path, command: Sequence[str]) -> None:
    fd = os.open(folder / CLAIM, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as claim:
        json.dump({"format": CLAIM_FORMAT, "command": list(command),
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, claim)
        claim.write("\n")


def claim(out: Path | None, command: Sequence[str], parent: Path = Path()) -> Claimed:
    """``out`` (or a new numbered folder under ``parent``), made if missing and claimed for this trace; a
    UsageError when it holds a trace already, cannot be made, or is too long a path for the collector."""
    if out is None:
        return _numbered(parent, command)
    folder = out.resolve()
    _check_length(folder)
    if folder.is_dir() and any(next(folder.glob(pattern), None) for pattern in OLDER_TRACE):
        raise UsageError(held_message(out))
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(FOLDER_MODE)
        made = True
    except FileExistsError:
        made = False
    except OSError as exc:
        raise UsageError(f"cannot make --out {out}: {exc.strerror or exc}") from None
    try:
        _claim_file(folder, command)
    except FileExistsError:
        raise UsageError(held_message(out)) from None
    except OSError as exc:
        Claimed(folder, made).release()
        raise UsageError(f"cannot write in --out {out}: {exc.strerror or exc}") from None
    return Claimed(folder, made)


def _numbered(parent: Path, command: Sequence[str]) -> Claimed:
    try:
        names = os.listdir(parent)
    except OSError as exc:
        raise UsageError(f"cannot list {parent.resolve()} for a new trace folder: {exc.strerror or exc}") from None
    number = max((int(m[1]) for m in map(_NUMBERED.fullmatch, names) if m), default=0)
    while True:
        number += 1
        folder = (parent / f"{STEM}-{number}").resolve()
        _check_length(folder)
        try:
            folder.mkdir(FOLDER_MODE)
        except FileExistsError:
            continue  # another trace took this number at the same moment: the next one
        except OSError as exc:
            raise UsageError(f"cannot make the trace folder {folder}: {exc.strerror or exc}") from None
        try:
            _claim_file(folder, command)
        except OSError as exc:
            Claimed(folder, True).release()
            raise UsageError(f"cannot write in the trace folder {folder}: {exc.strerror or exc}") from None
        return Claimed(folder, True)
