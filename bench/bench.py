"""The benchmark: the full default run against the floor of starting CUDA at all.

    python bench/bench.py [--repeat N] [--out bench.json]

floor:  a fresh Python that imports CuPy, creates the CUDA context and loads one precompiled module.
runs:   `python -m bisect_smem` as a fresh process, cold (empty kernel cache) and warm, N times each.
Also: per-probe latency, probes per ceiling against ceil(log2(cap)), time per measurement, and the
time of `--help`. Needs a GPU; without one it says so and exits 3.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOOR = """
import cupy
from bisect_smem.devices.kernel_abi import NVRTC_OPTIONS, PROBE_FILE, probe_name, read_kernel
cupy.cuda.Device(0).use()
module = cupy.RawModule(code=read_kernel(PROBE_FILE), options=NVRTC_OPTIONS, name_expressions=[probe_name(0, True)])
module.get_function(probe_name(0, True))
cupy.cuda.runtime.deviceSynchronize()
"""


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return time.perf_counter() - start, proc.returncode


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(samples), 4), "min_s": round(min(samples), 4),
            "max_s": round(max(samples), 4), "n": len(samples)}


def probe_latency(samples: int = 300) -> dict[str, float]:
    """Launch + verify + synchronize of one probe at 200 KB, in this process."""
    from bisect_smem.devices.backends.cupy_backend import CupySession
    from bisect_smem.devices.probes import ProbeKernel

    session = CupySession(0, (0,))
    kernel = ProbeKernel(0, True)
    session.set_max_dynamic(kernel, 200_000)
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        assert session.launch(kernel, 200_000, 128).ok
        times.append(time.perf_counter() - start)
    times.sort()
    return {"median_us": round(statistics.median(times) * 1e6, 1),
            "p95_us": round(times[int(0.95 * len(times)) - 1] * 1e6, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default="bench.json")
    args = parser.parse_args()
    from bisect_smem.devices.backends.cupy_backend import CupyBackend

    backend = CupyBackend()
    if not backend.is_available():
        print(f"error: the benchmark needs a GPU: {backend.unavailable_reason()}", file=sys.stderr)
        return 3
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    python = sys.executable
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as work:
        warm_cache = Path(work, "warm-cache")
        warm_env = {**env, "CUPY_CACHE_DIR": str(warm_cache)}
        timed([python, "-c", FLOOR], warm_env)  # fills the cache for the floor's module
        floors = [timed([python, "-c", FLOOR], warm_env)[0] for _ in range(args.repeat)]
        report = Path(work, "report.json")
        run = [python, "-m", "bisect_smem", "--quiet", "--json", str(report)]
        colds, codes = [], set()
        for i in range(args.repeat):
            seconds, code = timed(run, {**env, "CUPY_CACHE_DIR": str(Path(work, f"cold-{i}"))})
            colds.append(seconds)
            codes.add(code)
        timed(run, warm_env)
        warms = []
        for _ in range(args.repeat):
            seconds, code = timed(run, warm_env)
            warms.append(seconds)
            codes.add(code)
        helps = [timed([python, "-m", "bisect_smem", "--help"], env)[0] for _ in range(args.repeat)]
        data = json.loads(report.read_text())
    floor, warm, cold = summary(floors), summary(warms), summary(colds)
    dev = data["devices"][0]
    m = dev["measured"]
    searches = m["searches"]
    results.update(
        floor=floor, warm_run=warm, cold_run=cold, help=summary(helps), exit_codes=sorted(codes),
        warm_over_floor=round(warm["median_s"] / floor["median_s"], 3),
        cold_minus_floor_s=round(cold["median_s"] - floor["median_s"], 3),
        probe_latency=probe_latency(),
        probes_per_ceiling={"max": max(s["probes"] for s in searches.values()),
                            "bound": max(s["probe_bound"] for s in searches.values()),
                            "ceil_log2_cap": math.ceil(math.log2(1 << 20)), "ceilings": len(searches)},
        time_per_measurement_s=m["timings_s"], total_probes=sum(m["probes"].values()),
        device=dev["name"], driver=dev["context"].get("nvml_driver_version"),
    )
    targets = [
        ("warm run / floor", f"{results['warm_over_floor']}x", "<= 1.5x", results["warm_over_floor"] <= 1.5),
        ("cold run - floor", f"{results['cold_minus_floor_s']} s", "<= 1.5 s", results["cold_minus_floor_s"] <= 1.5),
        ("probes per ceiling", f"{results['probes_per_ceiling']['max']}",
         f"<= {results['probes_per_ceiling']['bound']}",
         results["probes_per_ceiling"]["max"] <= results["probes_per_ceiling"]["bound"]),
        ("--help", f"{results['help']['median_s']} s", "< 0.5 s", results["help"]["median_s"] < 0.5),
    ]
    results["targets"] = [{"what": w, "measured": v, "target": t, "met": ok} for w, v, t, ok in targets]
    rows = [("floor (import CuPy, context, one module)", floor["median_s"], floor["min_s"], floor["max_s"]),
            ("full run, warm kernel cache", warm["median_s"], warm["min_s"], warm["max_s"]),
            ("full run, cold kernel cache", cold["median_s"], cold["min_s"], cold["max_s"]),
            ("--help", results["help"]["median_s"], results["help"]["min_s"], results["help"]["max_s"])]
    print(tabulate(rows, headers=("process", "median s", "min s", "max s")))
    print()
    print(tabulate([(w, v, t, "met" if ok else "MISSED") for w, v, t, ok in targets],
                   headers=("target", "measured", "goal", "")))
    print()
    lat = results["probe_latency"]
    print(f"probe latency: median {lat['median_us']} us, p95 {lat['p95_us']} us; "
          f"{results['total_probes']} probes in the run")
    print("time per measurement (s): " + ", ".join(f"{k} {v:.3f}" for k, v in m["timings_s"].items()))
    Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0 if all(ok for *_, ok in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
