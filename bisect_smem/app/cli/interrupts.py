"""Signals as the command line reports them: one line and exit 128 + N, whenever the signal comes.

Standard library only, since the entry point imports it before anything else. It holds the one exception a
handled signal raises (``Signalled``), finds a signal however Python wrapped it (a ``RuntimeError`` from
``__set_name__`` while a class is created carries the ``KeyboardInterrupt`` as its cause), writes the line
that names the files written whole before it, and keeps a signal that comes while the entry module is
still loading until the entry point can answer it. What it replaced and what it kept are the run's
(core/session.py): ``held_handlers`` and ``pending_signals``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType

from bisect_smem.core.errors import SIGNAL_EXIT_BASE
from bisect_smem.core.session import Session

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_CHAIN_LIMIT = 64  # exceptions followed along __cause__/__context__: a chain is short, a cycle is not

Handler = Callable[[int, FrameType | None], object] | int | None


class Signalled(BaseException):
    """A signal, raised where the program is, as KeyboardInterrupt is, so that every cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def raise_signalled(signum: int, _frame: FrameType | None) -> None:
    """A signal handler: raise ``Signalled``."""
    raise Signalled(signum)


def signal_of(exc: BaseException) -> int | None:
    """The signal an exception stands for, looking through what wrapped it (``__cause__``, then
    ``__context__``), or None when no signal is in its chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _CHAIN_LIMIT:
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):
            return int(signal.SIGINT)
        if isinstance(current, Signalled):
            return current.signum
        current = current.__cause__ or current.__context__
    return None


def exit_code(signum: int) -> int:
    """128 + N."""
    return SIGNAL_EXIT_BASE + signum


def ended_line(signum: int, written: Sequence[str], starting: bool = False) -> str:
    """What a person reads when signal ``signum`` ended the run: which files were written whole before it."""
    what = f"written before it: {', '.join(written)}" if written else "no report was written"
    if starting:
        return f"{signal.Signals(signum).name} received while starting; {what}"
    if signum == signal.SIGINT:
        return f"interrupted; {what}"
    return f"{signal.Signals(signum).name} received; workers ended, {what}"


def _is_the_program() -> bool:
    """True when this process is the tool itself (``bisect-smem`` or ``python -m bisect_smem``), not a
    program that imports it (the pytest plugin, a test): only the tool may take its signals."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "bisect_smem.__main__" or \
        os.path.basename(sys.argv[0] if sys.argv else "") == "bisect-smem"


def hold_early(session: Session) -> None:
    """While the entry point loads: keep a signal in ``session`` for ``install`` instead of letting Python turn
    it into a traceback (SIGINT) or end the process without a line (SIGTERM, SIGHUP). Only in the tool's
    own process."""
    if session.held_handlers or not _is_the_program():
        return

    def keep(signum: int, _frame: FrameType | None) -> None:
        if not session.pending_signals:
            session.pending_signals.append(signum)

    try:
        for signum in SIGNALS:
            # A signal the caller ignores (nohup's SIGHUP, a background job's SIGINT) stays ignored.
            if signal.getsignal(signum) is not signal.SIG_IGN:
                session.held_handlers[signum] = signal.signal(signum, keep)
    except ValueError:  # not the main thread: signals are not ours to take
        session.held_handlers.clear()


def install(session: Session, signals: tuple[int, ...] = SIGNALS) -> dict[int, Handler]:
    """Raise ``Signalled`` on each of ``signals`` the caller does not ignore (those ``hold_early`` holds in
    ``session``, where it held them); returns the handlers to restore at the end (none off the main thread,
    where signals are not ours to take). ``raise_pending`` then answers a signal that came while the entry
    point loaded."""
    previous = dict(session.held_handlers) or {signum: signal.getsignal(signum) for signum in signals
                                               if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        for signum in previous:
            signal.signal(signum, raise_signalled)
    except ValueError:  # not the main thread: the first one is refused, before any is set
        return {}
    session.held_handlers.clear()
    return previous


def raise_pending(session: Session) -> None:
    """Raise ``Signalled`` for a signal that came while the entry point loaded, if one did."""
    if session.pending_signals:
        raise Signalled(session.pending_signals.pop())


def restore(previous: dict[int, Handler]) -> None:
    """Put back the handlers ``install`` replaced."""
    for signum, handler in previous.items():
        signal.signal(signum, handler)  # type: ignore[arg-type]
