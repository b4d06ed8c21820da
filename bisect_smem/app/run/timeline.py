"""Where a run's time goes. With ``BISECT_SMEM_TIMELINE=FILE`` in the environment, every process of a run
(the tool, its workers) appends one line to FILE for each point it passes: ``SECONDS PID WHAT``, the
seconds on the system's monotonic clock, which all processes share. ``bench/bench.py`` reads the lines
to split a run into its parts. Without the variable nothing is written."""

from __future__ import annotations

import os
import time

from bisect_smem.core.environment import TIMELINE as ENV


def mark(what: str) -> None:
    """Note that this process has reached ``what`` (where the timeline is asked for)."""
    path = os.environ.get(ENV)
    if not path:
        return
    try:
        with open(path, "a") as timeline:
            timeline.write(f"{time.monotonic():.6f} {os.getpid()} {what}\n")
    except OSError:
        pass  # a diagnostic must never cost the run
