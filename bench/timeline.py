"""Where a run's time goes, from the timeline its processes write (bisect_smem/app/run/timeline.py).

Each run of the benchmark gets ``BISECT_SMEM_TIMELINE=FILE``; the benchmark notes when it launched the
process and when the process ended, on the same monotonic clock. ``parts`` turns one run's file into the
intervals below (each from the first time any process of the run passed the point), and ``medians``
gives each interval's median over several runs.
"""

from __future__ import annotations

import statistics
from pathlib import Path

# (name, from, to): the points of a run. The workers are spawned first (the head start, or the runner where
# the command line had none); the parent's imports and the worker's context creation run beside the
# worker's own start.
PARTS = (
    ("start to the workers' spawn", "launch", "workers spawned"),
    ("worker start (interpreter)", "workers spawned", "worker start"),
    ("worker start to context created", "worker start", "context created"),
    ("worker start to its job (preloaded, job received)", "worker start", "job received"),
    ("worker start to device open (CuPy, context, module)", "worker start", "device opened"),
    ("parent start (interpreter, imports; beside the worker)", "launch", "parent start"),
    ("parent: parse, hand the workers their jobs", "parent start", "workers started"),
    ("device open to first probe", "device opened", "first step"),
    ("probing (every step)", "first step", "steps done"),
    ("last step to the parent", "steps done", "workers done"),
    ("workers' exit (contexts released), the report built beside it", "workers done", "workers exited"),
    ("report written (files, stdout)", "workers exited", "output written"),
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


# A worker's own points, for runs with several workers (``--backend all``), where the first to pass a point
# is not the one the run waits for.
WORKER_POINTS = ("worker start", "context created", "job received", "device opened", "first step", "steps done")


def slowest_worker(path: Path, launched: float) -> dict[str, float]:
    """The points of the worker that finished its steps last, in seconds after the launch."""
    workers: dict[str, dict[str, float]] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        seconds, pid, what = line.split(" ", 2)
        if what in WORKER_POINTS:
            workers.setdefault(pid, {}).setdefault(what, round(float(seconds) - launched, 4))
    finished = [points for points in workers.values() if "steps done" in points]
    return max(finished, key=lambda points: points["steps done"]) if finished else {}


def point_medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each worker point's median over the runs that have it, in seconds after the launch."""
    return {what: round(statistics.median(r[what] for r in runs if what in r), 4)
            for what in WORKER_POINTS if any(what in r for r in runs)}
