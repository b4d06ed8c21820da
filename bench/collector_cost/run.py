"""The C collector's own cost per launch, on any machine with a C compiler and no GPU: the test fake libcupti
plays the callbacks a launch makes into the collector from a C loop (loop.c), with the collector recording and
with it subscribed to nothing; the least ns per launch of each, and the difference. Cases as in
trace_overhead.py: ``best`` (one configuration), ``distinct`` (10000, past the table), ``threads`` (8 at once),
``runtime`` (a runtime and a driver callback per launch, as PyTorch's launches make). What CUPTI itself costs
per callback on a GPU is not in it: ``bench/trace_overhead.py`` measures the whole on a GPU.

    python bench/collector_cost/run.py [--launches N] [--repeats R]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.launches < 8 or args.repeats < 1:
        parser.error(f"--launches must be >= 8 and --repeats >= 1 (got {args.launches}, {args.repeats})")
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        fakes = build_fakes(folder / "fakes")
        collector = build.collector_library({"XDG_CACHE_HOME": str(folder / "cache")})
        cc = build.compiler() or "cc"
        subprocess.run([cc, "-O2", f"-I{build.SOURCE_DIR}", "-o", str(folder / "loop"),
                        str(Path(__file__).with_name("loop.c")), "-ldl", "-lpthread"], check=True)
        bare = {k: v for k, v in os.environ.items() if k != "BISECT_SMEM_TRACE_DIR"}
        over = []
        for case in CASES:
            command = [str(folder / "loop"), str(fakes), str(collector), case, str(args.launches)]
            untraced, traced = [], []
            for i in range(args.repeats):
                untraced.append(ns_per_launch(command, bare))
                out = folder / f"{case}-{i}"
                out.mkdir()
                traced.append(ns_per_launch(command, {**bare, "BISECT_SMEM_TRACE_DIR": str(out)}))
            added = min(traced) - min(untraced)
            size = sum(p.stat().st_size for p in out.iterdir())
            print(f"{case:9} untraced {min(untraced):7.1f} ns, traced {min(traced):7.1f} ns: "
                  f"{added:7.1f} ns per launch added; trace file {size} B")
            if added > TARGET_NS:
                over.append(case)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
