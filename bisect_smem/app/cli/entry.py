"""The command's entry point (``bisect-smem`` and ``python -m bisect_smem``): a measuring run's workers
start first (head_start.py), then the command line's modules are imported, under handlers of their own,
so that Ctrl-C, SIGTERM or SIGHUP while they load ends those workers and ends in the one line and the
exit code of any other interrupted run, never a traceback."""

from __future__ import annotations

import signal
import sys

from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.run import head_start
from bisect_smem.core.errors import SIGNAL_EXIT_BASE

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise(signum: int, _frame: object) -> None:
    raise _Interrupted(signum)


def main() -> int:
    """Start a measuring run's workers, import the command line and run it; a signal while it loads is exit
    128 + N with one line, and the workers end."""
    # A signal the caller ignores (nohup's SIGHUP, a background job's SIGINT) stays ignored.
    previous = {signum: signal.signal(signum, _raise) for signum in _SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        head_start.start(sys.argv[1:], SUBCOMMANDS)  # the workers start now, while the rest of the tool loads
        # Deferred: these imports are what a signal may interrupt, and the handlers above must come first.
        from bisect_smem.app.cli.main import main as run
    except _Interrupted as exc:
        head_start.release()
        name = signal.Signals(exc.signum).name
        print(f"error: {name} received while starting; no report was written", file=sys.stderr, flush=True)
        return SIGNAL_EXIT_BASE + exc.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return run()
