"""The command's entry point (``bisect-smem`` and ``python -m bisect_smem``): the command line's modules
are imported here, under handlers of their own, so that Ctrl-C, SIGTERM or SIGHUP while they load ends
in the one line and the exit code of any other interrupted run, never a traceback."""

from __future__ import annotations

import signal
import sys

from bisect_smem.core.errors import SIGNAL_EXIT_BASE

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise(signum: int, _frame: object) -> None:
    raise _Interrupted(signum)


def main() -> int:
    """Import the command line and run it; a signal while it loads is exit 128 + N with one line."""
    # A signal the caller ignores (nohup's SIGHUP, a background job's SIGINT) stays ignored.
    previous = {signum: signal.signal(signum, _raise) for signum in _SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        # Deferred: these imports are what a signal may interrupt, and the handlers above must come first.
        from bisect_smem.app.cli import main as run
    except _Interrupted as exc:
        name = signal.Signals(exc.signum).name
        print(f"error: {name} received while starting; no report was written", file=sys.stderr, flush=True)
        return SIGNAL_EXIT_BASE + exc.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return run()
