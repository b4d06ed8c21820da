"""The C collector's own cost per launch, on any machine with a C compiler and no GPU: the test fake libcupti
plays the callbacks a launch makes into the collector from a C loop (loop.c), with the collector recording and
with it subscribed to nothing, and built to return at once from every callback (the callbacks' own cost); the
least ns per launch of each, and the differences. ``--compare SOURCE`` times another collector.c alongside. Cases as in
trace_overhead.py: ``best`` (one configuration), ``distinct`` (10000, past the table), ``threads`` (8 at once),
``runtime`` (a runtime and a driver callback per launch, as PyTorch's launches make). What CUPTI itself costs
per callback on a GPU is not in it: ``bench/trace_overhead.py`` measures the whole on a GPU.

    python bench/collector_cost/run.py [--launches N] [--repeats R] [--compare SOURCE]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bisect_smem.devices.collector import build  # noqa: E402
from tests.trace.fakes import build_fakes  # noqa: E402

CASES = ("best", "distinct", "threads", "runtime")
TARGET_NS = 1000.0


def ns_per_launch(command: list[str], environ: dict[str, str]) -> float:
    done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=600, check=False)
    found = re.search(r"loop: ([0-9.]+) ns/launch", done.stdout)
    if done.returncode != 0 or found is None:
        sys.exit(f"error: {' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return float(found.group(1))


def build_collector(cc: str, source: Path, library: Path, *defines: str) -> Path:
    """``source`` (a collector.c) built as trace builds the collector, with ``defines``."""
    subprocess.run([cc, *build.FLAGS, *defines, f"-I{build.SOURCE_DIR}", "-o", str(library), str(source), *build.LIBS],
                   check=True)
    return library


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare", metavar="SOURCE", type=Path,
                        help="another collector.c to time the same way (e.g. an earlier commit's, from git show)")
    args = parser.parse_args()
    if args.launches < 8 or args.repeats < 1:
        parser.error(f"--launches must be >= 8 and --repeats >= 1 (got {args.launches}, {args.repeats})")
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        fakes = build_fakes(folder / "fakes")
        cc = build.compiler() or "cc"
        source = build.SOURCE_DIR / "collector.c"
        collectors = {"collector": build.collector_library({"XDG_CACHE_HOME": str(folder / "cache")})}
        if args.compare:
            collectors[f"{args.compare.name}"] = build_collector(cc, args.compare, folder / "compared.so")
        # CUPTI's callbacks alone: every callback enabled and returning at once, as trace_overhead.py's floor.
        floor = build_collector(cc, source, folder / "floor.so", "-DBSM_CUPTI_FLOOR")
        subprocess.run([cc, "-O2", f"-I{build.SOURCE_DIR}", "-o", str(folder / "loop"),
                        str(Path(__file__).with_name("loop.c")), "-ldl", "-lpthread"], check=True)
        bare = {k: v for k, v in os.environ.items() if k != "BISECT_SMEM_TRACE_DIR"}
        over = []
        for case in CASES:
            times: dict[str, list[float]] = {"untraced": [], "callbacks alone": [], **{name: [] for name in collectors}}
            sizes: dict[str, int] = {}
            for i in range(args.repeats):
                for name, library in [("untraced", floor), ("callbacks alone", floor), *collectors.items()]:
                    command = [str(folder / "loop"), str(fakes), str(library), case, str(args.launches)]
                    if name == "untraced":
                        times[name].append(ns_per_launch(command, bare))
                        continue
                    out = folder / f"{case}-{name}-{i}".replace(" ", "-")
                    out.mkdir()
                    times[name].append(ns_per_launch(command, {**bare, "BISECT_SMEM_TRACE_DIR": str(out)}))
                    sizes[name] = sum(p.stat().st_size for p in out.iterdir())
            least = {name: min(values) for name, values in times.items()}
            print(f"{case}: untraced {least['untraced']:.1f} ns, callbacks alone {least['callbacks alone']:.1f} ns")
            for name in collectors:
                added = least[name] - least["untraced"]
                print(f"  {name:24} {least[name]:7.1f} ns: {added:7.1f} ns per launch added, of which its own work "
                      f"{least[name] - least['callbacks alone']:7.1f} ns; trace file {sizes[name]} B")
                if name == "collector" and added > TARGET_NS:
                    over.append(case)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
