"""What trace adds per launch, in four launch-bound loops, each run untraced and under ``bisect-smem trace``
(the C collector, then the ctypes one), REPEATS times; the least µs per launch of each, and the difference.
Target: at most 1 µs per launch with the C collector, in every case.

- ``best``: one empty CuPy RawKernel, one configuration: the collector counts a repeat.
- ``distinct``: the same kernel cycled through 10000 configurations (dynamic shared memory 0..39996 B), more
  than the collector's table holds: first sights, and launches past the table.
- ``threads``: 8 threads launching at once, each on its own stream: the collector's counting under contention.
- ``torch``: a PyTorch loop of in-place adds: each launch makes a runtime and a driver callback. Skipped,
  with a message, where PyTorch is not installed.

    python bench/trace_overhead.py [--case CASE ...] [--launches N] [--repeats R]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

EMPTY = r'extern "C" __global__ void empty(int x) {}'
DISTINCT_CONFIGS = 10_000
THREADS = 8
WARM_UP = 1000
TARGET_US = 1.0


def _empty_kernel() -> tuple[object, tuple[object, ...]]:
    import cupy

    return cupy.RawKernel(EMPTY, "empty"), (cupy.int32(1),)


def _synchronize() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def _warmed_kernel() -> tuple[object, tuple[object, ...]]:
    """The empty kernel and its argument, launched WARM_UP times and synchronized: compiled and loaded."""
    kernel, arg = _empty_kernel()
    for _ in range(WARM_UP):
        kernel((1,), (32,), arg)
    _synchronize()
    return kernel, arg


def best(launches: int) -> float:
    """Seconds for ``launches`` launches of one configuration."""
    kernel, arg = _warmed_kernel()
    start = time.perf_counter()
    for _ in range(launches):
        kernel((1,), (32,), arg)
    _synchronize()
    return time.perf_counter() - start


def distinct(launches: int) -> float:
    """Seconds for ``launches`` launches cycled through DISTINCT_CONFIGS dynamic shared memory sizes, first
    sights included: what autotuning does."""
    kernel, arg = _warmed_kernel()
    start = time.perf_counter()
    for i in range(launches):
        kernel((1,), (32,), arg, shared_mem=4 * (i % DISTINCT_CONFIGS))
    _synchronize()
    return time.perf_counter() - start


def threads(launches: int) -> float:
    """Seconds for ``launches`` launches shared by THREADS threads, each on a stream of its own (``launches`` is
    a multiple of THREADS: parse() rounds it)."""
    import cupy

    kernel, arg = _warmed_kernel()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(THREADS)]
    ready = threading.Barrier(THREADS + 1)

    def launcher(stream: object) -> None:
        with stream:  # type: ignore[attr-defined]
            ready.wait()
            for _ in range(launches // THREADS):
                kernel((1,), (32,), arg)

    workers = [threading.Thread(target=launcher, args=(s,)) for s in streams]
    for w in workers:
        w.start()
    ready.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    _synchronize()
    return time.perf_counter() - start


def torch_loop(launches: int) -> float:
    """Seconds for ``launches`` in-place adds on a one-element CUDA tensor (cudaLaunchKernel, then the driver)."""
    import torch

    x = torch.zeros(1, device="cuda")
    for _ in range(WARM_UP):
        x.add_(1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(launches):
        x.add_(1)
    torch.cuda.synchronize()
    return time.perf_counter() - start


CASES: dict[str, Callable[[int], float]] = {"best": best, "distinct": distinct, "threads": threads,
                                            "torch": torch_loop}
NEEDS = {"best": "cupy", "distinct": "cupy", "threads": "cupy", "torch": "torch"}
COLLECTORS = {"C collector": "c", "ctypes collector": "python"}


def timed(command: list[str], environ: dict[str, str]) -> float:
    done = subprocess.run(command, capture_output=True, text=True, env=environ, check=False)
    found = re.search(r"loop: ([0-9.]+) us/launch", done.stdout)
    if done.returncode != 0 or found is None:
        sys.exit(f"error: {' '.join(command[:6])}... failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return float(found.group(1))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="a loop to time (repeatable; default: all four)")
    parser.add_argument("--launches", type=int, default=200_000, help="launches per timed loop (default 200000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each loop; the least time counts (default 3)")
    parser.add_argument("--loop", choices=sorted(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.launches < THREADS or args.repeats < 1:
        parser.error(f"--launches must be >= {THREADS} and --repeats >= 1 (got {args.launches}, {args.repeats})")
    args.launches -= args.launches % THREADS  # the threads share them evenly
    return args


def cupti_floor(folder: str) -> dict[str, str] | None:
    """The environment of a process under CUPTI alone: the collector built with BSM_CUPTI_FLOOR subscribes and
    enables every callback it uses, and returns at once from each, so what a launch costs beyond this is the
    collector's own work. None where no C compiler or libcupti is found."""
    from bisect_smem.devices.collector import build, libcupti

    cc, found = build.compiler(), libcupti.find()
    if cc is None or found is None:
        return None
    library = os.path.join(folder, "floor.so")
    subprocess.run([cc, *build.FLAGS, "-DBSM_CUPTI_FLOOR", "-o", library, str(build.SOURCE_DIR / "collector.c"),
                    *build.LIBS], check=True)
    return {**os.environ, "CUDA_INJECTION64_PATH": library, "BISECT_SMEM_TRACE_DIR": folder,
            "BISECT_SMEM_CUPTI_LIBRARY": found.path}


def run_case(case: str, launches: int, repeats: int, floor: dict[str, str] | None) -> float:
    """Prints each collector's µs per launch in ``case``, and CUPTI's own floor (under ``floor``'s environment,
    where there is one); returns what the C collector adds."""
    me = [sys.executable, os.path.abspath(__file__), "--loop", case, "--launches", str(launches)]
    runs: dict[str, list[float]] = {"untraced": [], "CUPTI alone": [], **{name: [] for name in COLLECTORS}}
    for _ in range(repeats):
        runs["untraced"].append(timed(me, dict(os.environ)))
        if floor is not None:
            runs["CUPTI alone"].append(timed(me, floor))
        for name, choice in COLLECTORS.items():
            with tempfile.TemporaryDirectory() as out:
                runs[name].append(timed([sys.executable, "-m", "bisect_smem", "trace", "--no-measure", "--out",
                                         os.path.join(out, "t"), "--", *me],
                                        {**os.environ, "BISECT_SMEM_COLLECTOR": choice}))
    print(f"{case}:")
    for name, times in runs.items():
        if times:
            print(f"  {name + ':':18} {min(times):.3f} us/launch (runs: {', '.join(f'{t:.3f}' for t in times)})")
    added = min(runs["C collector"]) - min(runs["untraced"])
    print(f"  added by trace: {added:.3f} us per launch with the C collector (target <= {TARGET_US} us), "
          f"{min(runs['ctypes collector']) - min(runs['untraced']):.3f} us with the ctypes one")
    if runs["CUPTI alone"]:
        print(f"  of which CUPTI's callbacks alone: {min(runs['CUPTI alone']) - min(runs['untraced']):.3f} us; the "
              f"collector's own work: {min(runs['C collector']) - min(runs['CUPTI alone']):.3f} us")
    return added


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.loop:
        print(f"loop: {CASES[args.loop](args.launches) / args.launches * 1e6:.3f} us/launch")
        return 0
    over = []
    with tempfile.TemporaryDirectory(prefix="bisect-smem-floor-") as floor_dir:
        floor = cupti_floor(floor_dir)  # built once for every case
        for case in args.case or list(CASES):
            if importlib.util.find_spec(NEEDS[case]) is None:
                print(f"{case}: skipped: {NEEDS[case]} is not installed")
                continue
            if run_case(case, args.launches, args.repeats, floor) > TARGET_US:
                over.append(case)
    if over:
        print(f"over {TARGET_US} us per launch: {', '.join(over)}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
