"""A worker process's entry point:
``python -m bisect_smem.app.run.worker_process INDEX [--context] [--preload BACKEND]``.

The supervisor (runner.py), or the tool's head start (head_start.py) before it has loaded the rest of
itself, starts it as a fresh interpreter (CUDA and fork do not mix). With ``--context`` (a real device)
it first has the driver create device INDEX's primary context on a thread of its own: creating it takes
the driver a few hundred milliseconds, which then pass while this process imports the measurement and,
with ``--preload``, the backend's library (CuPy, numba), before its job can have arrived. Then it reads
its job (a pickled ``WorkerJob``) from stdin and serves it (worker.py), answering on its stdout, which it
keeps for the messages alone: anything else written to stdout goes to stderr. Ctrl-C is the supervisor's
to handle; it ends its workers. A worker whose job never comes (the run wanted none) leaves quietly.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from bisect_smem.app.run.timeline import mark
from bisect_smem.core.errors import BackendUnavailable
from bisect_smem.devices.backends.libcuda import libcuda


def start_context(index: int) -> threading.Thread:
    """Create device ``index``'s primary context on a daemon thread. A failure is left for the backend's
    own open to report, as it would be without this head start."""

    def create() -> None:
        try:
            libcuda().retain_primary_context(index)
        except BackendUnavailable:
            pass
        mark("context created")

    thread = threading.Thread(target=create, daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> int:
    """Start the context where asked, preload, read the job, serve it; the worker leaves through os._exit."""
    mark("worker start")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    index = int(argv[0])
    if "--context" in argv[1:]:
        start_context(index)
    messages = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # Deferred: the measurement's modules load after the context has started, while the driver creates it.
    from bisect_smem.app.run import worker

    preload = argv[argv.index("--preload") + 1] if "--preload" in argv[1:] else None
    return worker.serve_stdin(messages, preload)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
