"""The command's entry point (``bisect-smem`` and ``python -m bisect_smem``): a measuring run's workers
start first (head_start.py), then the command line's modules are imported, under handlers of their own,
so that Ctrl-C, SIGTERM or SIGHUP while they load ends those workers and ends in the one line and the
exit code of any other interrupted run, never a traceback. A signal that comes while this module itself
loads is kept (interrupts.hold_early) and answered the same way as soon as ``main`` starts. The run's
session (core/session.py) is made here, first, and handed to everything that follows."""

from __future__ import annotations

import sys

from bisect_smem.app.cli import interrupts
from bisect_smem.core.session import Session

# The program's one session, made as it starts: a signal may come before main() does.
_SESSION = Session()
interrupts.hold_early(_SESSION)  # first: what this module imports next is time a signal may come in

from bisect_smem.app.cli.commands import SUBCOMMANDS  # noqa: E402
from bisect_smem.app.run import head_start  # noqa: E402


def main() -> int:
    """Start a measuring run's workers, import the command line and run it; a signal while it loads is exit
    128 + N with one line, and the workers end."""
    session = _SESSION
    previous = interrupts.install(session)
    try:
        interrupts.raise_pending(session)
        head_start.start(sys.argv[1:], SUBCOMMANDS, session)  # the workers start now, while the rest loads
        # Deferred: these imports are what a signal may interrupt, and the handlers above must come first.
        from bisect_smem.app.cli.main import main as run
    except BaseException as exc:  # a signal, however Python wrapped it (a class being created wraps it)
        signum = interrupts.signal_of(exc)
        if signum is None:
            raise
        head_start.release(session)
        print(f"error: {interrupts.ended_line(signum, [], starting=True)}", file=sys.stderr, flush=True)
        return interrupts.exit_code(signum)
    finally:
        interrupts.restore(previous)
    return run(session=session)
