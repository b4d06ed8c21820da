"""What a command hands over once its work is done: every requested file first, then the text for stdout,
so that a stdout that is closed, full or a broken pipe never costs a file (nothing measured is lost).

A command checks its outputs before any work (outputs/writer.py), adds each file when it has its content, and
delivers once. A file that cannot be written does not keep the others from being written; a refusal found
on the way (a baseline that may not be saved) is raised only after everything else was delivered, as
NotAllDelivered, which still carries the text for stdout.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bisect_smem.app.outputs import writer
from bisect_smem.core.errors import BisectSmemError, OutputError
from bisect_smem.core.text import printable

Content = str | bytes | Callable[[], str | bytes]


class NotAllDelivered(BisectSmemError):
    """Something asked for could not be delivered, after everything else was: ``error`` says what (its exit
    code is the run's), and ``text`` is still printed on stdout."""

    def __init__(self, error: BisectSmemError, text: str) -> None:
        super().__init__(str(error))
        self.error, self.text = error, text
        self.exit_code = error.exit_code  # type: ignore[misc]

    def describe(self) -> str:
        """The error's own line."""
        return self.error.describe()


@dataclass
class _File:
    path: Path
    what: str
    content: Content
    exclusive: bool
    folders: bool
    note: str | None
    within: Path | None = None  # a folder the file must stay in, through any link


def _refuse_written(f: _File, done: dict[tuple[object, ...], _File]) -> None:
    """A file this delivery wrote already (a baseline onto the --json report) is not replaced by another."""
    identity = writer.file_identity(f.path)
    earlier = done.get(identity) if identity is not None else None
    if earlier is not None:
        raise OutputError(f"cannot write {f.what} to {f.path}: {earlier.what} is written there too "
                          f"({earlier.path}); give each output its own file")


class Delivery:
    """The files a command writes, written in the order they were added, each whatever became of the others."""

    def __init__(self) -> None:
        self.files: list[_File] = []

    def file(self, path: Path, what: str, content: Content, *, exclusive: bool = False, folders: bool = False,
             note: str | None = None, within: Path | None = None) -> None:
        """Write ``content`` (or what the callable returns) to ``path``; with ``folders`` its folders are made
        first (and removed again if the write fails); ``note`` goes to stderr once it is written; ``within``
        refuses a path that a link leads out of that folder."""
        self.files.append(_File(Path(path), what, content, exclusive, folders, note, within))

    def write(self, refused: BisectSmemError | None = None, text: str = "") -> None:
        """Write every file; then raise NotAllDelivered (with ``text``) for the first file that failed, or
        for ``refused``, what was refused before the files were written."""
        failures: list[str] = []
        done: dict[tuple[object, ...], _File] = {}  # the regular files written so far, by file_identity
        for f in self.files:
            made: list[Path] = []
            try:
                _refuse_written(f, done)
                if f.within is not None:
                    writer.check_within(f.path, f.within, f.what)
                content = f.content() if callable(f.content) else f.content
                made = writer.make_folders(f.path, f.what) if f.folders else []
                writer.write_atomic(f.path, content, exclusive=f.exclusive, what=f.what)
            except OutputError as exc:
                writer.remove_folders(made)
                failures.append(str(exc))
                continue
            identity = writer.file_identity(f.path)
            if identity is not None:
                done[identity] = f
            if f.note:
                print(printable(f.note), file=sys.stderr, flush=True)
        if failures:
            more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
            raise NotAllDelivered(OutputError(failures[0] + more), text)
        if refused is not None:
            raise NotAllDelivered(refused, text)
