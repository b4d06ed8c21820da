"""Where a run's time goes, from the timeline its processes write (bisect_smem/app/timeline.py).

Each run of the benchmark gets ``BISECT_SMEM_TIMELINE=FILE``; the benchmark notes when it launched the
process and when the process ended, on the same monotonic clock. ``parts`` turns one run's file into the
intervals below (each from the first time any process of the run passed the point), and ``medians``
gives each interval's median over several runs.
"""

from __future__ import annotations

import statistics
from pathlib import Path

# (name, from, to): consecutive points of a run, the worker's context creation beside its imports.
PARTS = (
    ("parent start (interpreter, imports)", "launch", "parent start"),
    ("parent: parse, start the workers", "parent start", "workers started"),
    ("worker start (interpreter)", "workers started", "worker start"),
    ("worker start to context created", "worker start", "context created"),
    ("worker start to device open (CuPy, context, module)", "worker start", "device opened"),
    ("device open to first probe", "device opened", "first step"),
    ("probing (every step)", "first step", "steps done"),
    ("last step to the parent", "steps done", "workers done"),
    ("workers' exit (their contexts released)", "workers done", "workers exited"),
    ("report (verdicts, render, write)", "workers exited", "output written"),
    ("exit (interpreter teardown)", "output written", "exit"),
)


def read_points(path: Path, launched: float, ended: float) -> dict[str, float]:
    """The first time each point was passed, in seconds after the launch."""
    points = {"launch": 0.0, "exit": ended - launched}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return points
    for line in lines:
        seconds, _pid, what = line.split(" ", 2)
        points.setdefault(what, float(seconds) - launched)
    return points


def parts(points: dict[str, float]) -> dict[str, float]:
    """Each interval of PARTS whose two points this run passed, in seconds."""
    return {name: round(points[b] - points[a], 4) for name, a, b in PARTS if a in points and b in points}


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each interval's median over the runs that have it, in seconds, in the order of PARTS."""
    found = {}
    for name, _, _ in PARTS:
        values = [run[name] for run in runs if name in run]
        if values:
            found[name] = round(statistics.median(values), 4)
    return found
