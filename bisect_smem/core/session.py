"""One run of the tool as one object: what it has read, what it will write and has written, the workers it
started ahead and those it has ended, and the signal handlers it replaced (pytest-benchmark keeps a run's
options, storage and results in one ``BenchmarkSession`` the same way).

The session holds plain data; the modules that fill it say what each field means and act on it:
core/input.py (``reads``), app/outputs/writer.py (``planned``, ``planned_files``, ``written``),
app/run/head_start.py (``started``), app/run/runner.py (``exiting``) and app/cli/interrupts.py
(``held_handlers``, ``pending_signals``). The command line opens one per run (``begin``) and passes it
down where the run's own code goes (the runner, the head start, the signal handlers); the reader and the
writer, which every command reaches through many layers, find the run's session with ``current``. Two
sessions share nothing: a test opens its own instead of clearing or patching module state.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Session:
    """The state of one run of the tool (see the module's docstring for who fills each field)."""

    reads: dict[tuple[int, int], str] = field(default_factory=dict)  # (device, inode) -> the name it was read by
    planned: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # output as given -> (what, special fd)
    planned_files: dict[tuple[object, ...], tuple[str, str]] = field(default_factory=dict)  # identity -> (path, what)
    written: list[str] = field(default_factory=list)  # files written whole, in order
    started: dict[tuple[str, int], Any] = field(default_factory=dict)  # (backend, device) -> a worker started ahead
    exiting: list[Any] = field(default_factory=list)  # workers ended and not yet waited for
    held_handlers: dict[int, Any] = field(default_factory=dict)  # signal -> the handler before the tool's
    pending_signals: list[int] = field(default_factory=list)  # signals that came before the tool could answer


_current: contextvars.ContextVar[Session] = contextvars.ContextVar("bisect_smem_session")


def current() -> Session:
    """The session of the run in progress; outside any run (a library caller), one of this context's own,
    made on first use. A thread starts outside the run: the runner hands its threads the session instead."""
    try:
        return _current.get()
    except LookupError:
        session = Session()
        _current.set(session)
        return session


@contextmanager
def begin(session: Session | None = None) -> Iterator[Session]:
    """Make ``session`` (a new one when None) the run in progress until the block ends."""
    session = session if session is not None else Session()
    token = _current.set(session)
    try:
        yield session
    finally:
        _current.reset(token)
