"""The commands that measure nothing, against a bare Python start, side by side: ``--help``, ``check``,
``export``, ``schema``, ``profiles`` and ``fit --no-local``, each a fresh process, every round running each
once after ``python -c pass``, so that the ratios compare processes started side by side.

    python bench/startup.py [--repeat N] [--out startup.json]

Needs no GPU. The targets: ``--help`` and ``check`` at most 2.5x a bare start, ``fit --no-local`` at most
3x. Exit 1 when one is missed. ``bench/bench.py`` runs the same on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BARE = "python -c pass"
TARGETS = {"--help": 2.5, "check": 2.5, "fit --no-local": 3.0}  # times a bare start, at most


def commands(report: Path) -> dict[str, list[str]]:
    """Each timed command line, by its label."""
    tool = [sys.executable, "-m", "bisect_smem"]
    return {BARE: [sys.executable, "-c", "pass"], "--help": [*tool, "--help"], "check": [*tool, "check", str(report)],
            "export prom": [*tool, "export", "prom", str(report)], "schema": [*tool, "schema"],
            "profiles": [*tool, "profiles"],
            "fit --no-local": [*tool, "fit", "--tile", "128x256x64", "--dtype", "bf16", "--arch", "9.0", "--no-local"]}


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):  # fit may say 1 (does not fit); anything else is a broken benchmark
        raise SystemExit(f"error: {' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return elapsed


def measure(repeat: int) -> dict[str, dict[str, float]]:
    """Median, min and max seconds of each command, and each median over the bare start's."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        subprocess.run([sys.executable, "-m", "bisect_smem", "--simulate", "h200", "--quiet", "--json", str(report)],
                       cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
        lines = commands(report)
        for command in lines.values():  # one warm-up each: bytecode written, files in the page cache
            _seconds(command)
        samples: dict[str, list[float]] = {label: [] for label in lines}
        for _ in range(repeat):
            for label, command in lines.items():
                samples[label].append(_seconds(command))
    bare = statistics.median(samples[BARE])
    return {label: {"median_s": round(statistics.median(s), 4), "min_s": round(min(s), 4), "max_s": round(max(s), 4),
                    "over_bare": round(statistics.median(s) / bare, 3)} for label, s in samples.items()}


def targets(results: dict[str, dict[str, float]]) -> list[tuple[str, str, str, bool]]:
    """Each start-up target: what, measured, goal, met."""
    return [(f"{label} / {BARE}", f"{results[label]['over_bare']}x", f"<= {goal}x", results[label]["over_bare"] <= goal)
            for label, goal in TARGETS.items()]


def main() -> int:
    """Time the commands, print the table and the targets, write the JSON where asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    results = measure(args.repeat)
    width = max(map(len, results))
    for label, r in results.items():
        print(f"{label:<{width}}  median {r['median_s']:.4f} s  min {r['min_s']:.4f}  max {r['max_s']:.4f}  "
              f"{r['over_bare']}x bare")
    met = targets(results)
    for what, value, goal, ok in met:
        print(f"target {what}: {value} ({goal}) {'met' if ok else 'MISSED'}")
    if args.out:
        Path(args.out).write_text(json.dumps({"startup": results, "targets": [list(t) for t in met]}, indent=1) + "\n")
    return 0 if all(ok for *_, ok in met) else 1


if __name__ == "__main__":
    sys.exit(main())
