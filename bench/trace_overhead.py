"""What trace adds per launch: a launch-bound loop of an empty CuPy RawKernel, run untraced and under
``bisect-smem trace`` (the C collector), each REPEATS times; the least µs per launch of each, and the
difference. Target: at most 1 µs per launch.

    python bench/trace_overhead.py [--launches N] [--repeats R]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

EMPTY = r'extern "C" __global__ void empty(int x) {}'


def loop(launches: int) -> None:
    """The loop itself (in its own process): µs per launch, after a warm-up, synchronized at the end."""
    import cupy

    kernel = cupy.RawKernel(EMPTY, "empty")
    arg = (cupy.int32(1),)
    for _ in range(1000):
        kernel((1,), (32,), arg)
    cupy.cuda.Device().synchronize()
    start = time.perf_counter()
    for _ in range(launches):
        kernel((1,), (32,), arg)
    cupy.cuda.Device().synchronize()
    print(f"loop: {(time.perf_counter() - start) / launches * 1e6:.3f} us/launch")


def timed(command: list[str]) -> float:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.search(r"loop: ([0-9.]+) us/launch", done.stdout)
    if done.returncode != 0 or found is None:
        sys.exit(f"error: {' '.join(command[:4])}... failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return float(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop:
        loop(args.launches)
        return 0
    me = [sys.executable, os.path.abspath(__file__), "--loop", "--launches", str(args.launches)]
    runs: dict[str, list[float]] = {"untraced": [], "C collector": [], "ctypes collector": []}
    for _ in range(args.repeats):
        runs["untraced"].append(timed(me))
        for name, choice in (("C collector", "c"), ("ctypes collector", "python")):
            with tempfile.TemporaryDirectory() as out:
                os.environ["BISECT_SMEM_COLLECTOR"] = choice
                runs[name].append(timed([sys.executable, "-m", "bisect_smem", "trace", "--no-measure", "--out",
                                         os.path.join(out, "t"), "--", *me]))
    for name, times in runs.items():
        print(f"{name + ':':18} {min(times):.3f} us/launch (runs: {', '.join(f'{t:.3f}' for t in times)})")
    added = min(runs["C collector"]) - min(runs["untraced"])
    print(f"added by trace: {added:.3f} us per launch with the C collector (target <= 1 us), "
          f"{min(runs['ctypes collector']) - min(runs['untraced']):.3f} us with the ctypes one")
    return 0 if added <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
