"""The benchmark: the full default run against the floor of starting CUDA at all.

    python bench/bench.py [--repeat N] [--out bench.json]

floor:  a fresh Python that imports CuPy, creates the CUDA context and loads one precompiled module.
runs:   `python -m bisect_smem` as a fresh process, cold (empty kernel caches) and warm, N times each;
        `--backend all` warm (CuPy and numba kernel caches filled); with more than one visible GPU,
        `--device 0` against every device; and, warm, `--level quick` (target: 1.2x the floor) and
        `--level full` (target: 2x the standard run), with what full validated.
Also: per-probe latency (one launch + sync, and a batch of four launches + one sync), probes and
rounds per ceiling against the bound, time per measurement, and the time of `--help`. Each target
is printed as met or missed and written to the JSON. Needs a GPU; without one it says so and exits 3.
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


LATENCY_BYTES = 200_000


def latency_session() -> tuple[object, object]:
    """One device opened in this process, its opt-in probe raised to LATENCY_BYTES: both latencies use it."""
    from bisect_smem.devices.backends.cupy_backend import CupySession
    from bisect_smem.devices.probes import ProbeKernel

    session = CupySession(0, (0,))
    kernel = ProbeKernel(0, True)
    session.set_max_dynamic(kernel, LATENCY_BYTES)
    return session, kernel


def probe_latency(session: object, kernel: object, samples: int = 300) -> dict[str, float]:
    """Launch + verify + synchronize of one probe at 200 KB."""
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        assert session.launch(kernel, LATENCY_BYTES, 128).ok
        times.append(time.perf_counter() - start)
    times.sort()
    return {"median_us": round(statistics.median(times) * 1e6, 1),
            "p95_us": round(times[int(0.95 * len(times)) - 1] * 1e6, 1)}


def batch_latency(session: object, kernel: object, samples: int = 300, width: int = 4) -> dict[str, float]:
    """``width`` probes at 200 KB launched together and read with one synchronisation."""
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        assert all(o.ok for o in session.launch_batch([Launch(kernel, LATENCY_BYTES, 128)] * width))
        times.append(time.perf_counter() - start)
    return {"width": width, "median_us": round(statistics.median(times) * 1e6, 1)}


def backend_all_runs(python: str, work: Path, warm_env: dict[str, str], repeat: int) -> tuple[dict, set[int]]:
    """``--backend all`` with warm CuPy and numba caches (one run fills them first)."""
    run = [python, "-m", "bisect_smem", "--quiet", "--backend", "all", "--json", str(Path(work, "all.json"))]
    env = {**warm_env, "NUMBA_CACHE_DIR": str(Path(work, "numba-cache"))}
    first, code = timed(run, env)
    samples, codes = [], {code}
    for _ in range(repeat):
        seconds, code = timed(run, env)
        samples.append(seconds)
        codes.add(code)
    return {"first_run_s": round(first, 4), **summary(samples)}, codes


def device_scaling_runs(python: str, work: Path, warm_env: dict[str, str], repeat: int,
                        devices: int) -> tuple[dict | None, set[int]]:
    """Device 0 alone against every visible device, warm; None with a single device."""
    if devices < 2:
        return None, set()
    report = str(Path(work, "scaling.json"))
    one_cmd = [python, "-m", "bisect_smem", "--quiet", "--device", "0", "--json", report]
    all_cmd = [python, "-m", "bisect_smem", "--quiet", "--json", report]
    ones, alls, codes = [], [], set()
    for _ in range(repeat):
        for samples, command in ((ones, one_cmd), (alls, all_cmd)):
            seconds, code = timed(command, warm_env)
            samples.append(seconds)
            codes.add(code)
    one, every = summary(ones), summary(alls)
    return {"devices": devices, "one_device": one, "all_devices": every,
            "all_over_one": round(every["median_s"] / one["median_s"], 3)}, codes


def speed_targets(results: dict) -> list[tuple[str, str, str, bool]]:
    """Each speed target: (what, measured, goal, met)."""
    floor, warm, cold = (results[k]["median_s"] for k in ("floor", "warm_run", "cold_run"))
    every = results["backend_all"]["median_s"]
    targets = [
        ("warm run / floor", f"{warm / floor:.3f}x ({warm} s / {floor} s)", "<= 1.3x", warm <= 1.3 * floor),
        ("cold run - floor", f"{cold - floor:.3f} s ({cold} s - {floor} s)", "<= 0.6 s", cold - floor <= 0.6),
        ("--backend all / CuPy only, warm", f"{every / warm:.3f}x ({every} s / {warm} s)", "<= 1.6x",
         every <= 1.6 * warm),
    ]
    scaling = results.get("device_scaling")
    if scaling is not None:
        ratio = scaling["all_over_one"]
        targets.append((f"{scaling['devices']} GPUs / one GPU", f"{ratio}x ({scaling['all_devices']['median_s']} s "
                        f"/ {scaling['one_device']['median_s']} s)", "<= 1.15x", ratio <= 1.15))
    return targets


def _validation_summary(dev: dict) -> dict[str, object]:
    """What --level full found: SMs covered and failed, sizes swept and failed, and leftovers."""
    m = dev["measured"]
    march, sweep, left = m.get("march") or {}, m.get("granule_sweep") or {}, m.get("leftovers") or {}
    timings = m["timings_s"]
    return {"sms_covered": len(march.get("sms_seen", ())), "sms_failed": len(march.get("failures", ())),
            "sizes_swept": sweep.get("sizes_tested"), "sizes_failed": len(sweep.get("failing_bytes", ())),
            "cross_process_words_visible": left.get("across_processes_words_matching"),
            "within_process_words_visible": left.get("within_process_words_matching"),
            "seconds": {k: timings.get(k) for k in ("sm_march", "granule_sweep", "leftovers")}}


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
        colds, codes, cold_opens = [], set(), []
        cold_report = Path(work, "cold.json")
        cold_run = [*run[:-1], str(cold_report)]
        for i in range(args.repeat):
            seconds, code = timed(cold_run, {**env, "CUPY_CACHE_DIR": str(Path(work, f"cold-{i}"))})
            colds.append(seconds)
            codes.add(code)
            cold_opens.append(json.loads(cold_report.read_text())["devices"][0]["measured"]["timings_s"]["open"])
        timed(run, warm_env)
        warms = []
        for _ in range(args.repeat):
            seconds, code = timed(run, warm_env)
            warms.append(seconds)
            codes.add(code)
        levels = {}
        for level in ("quick", "full"):
            level_run = [*run[:-2], "--level", level, "--json", str(Path(work, f"{level}.json"))]
            levels[level] = [timed(level_run, warm_env)[0] for _ in range(args.repeat)]
        full_data = json.loads(Path(work, "full.json").read_text())
        results["backend_all"], all_codes = backend_all_runs(python, Path(work), warm_env, args.repeat)
        results["device_scaling"], scaling_codes = device_scaling_runs(python, Path(work), warm_env, args.repeat,
                                                                       backend.device_count())
        codes |= all_codes | scaling_codes
        helps = [timed([python, "-m", "bisect_smem", "--help"], env)[0] for _ in range(args.repeat)]
        data = json.loads(report.read_text())
    floor, warm, cold = summary(floors), summary(warms), summary(colds)
    latency = latency_session()
    quick, full = summary(levels["quick"]), summary(levels["full"])
    dev = data["devices"][0]
    m = dev["measured"]
    searches = m["searches"]
    results.update(
        floor=floor, warm_run=warm, cold_run=cold, help=summary(helps), exit_codes=sorted(codes),
        warm_over_floor=round(warm["median_s"] / floor["median_s"], 3),
        cold_minus_floor_s=round(cold["median_s"] - floor["median_s"], 3),
        probe_latency=probe_latency(*latency), batch_latency=batch_latency(*latency),
        probes_per_ceiling={"max": max(s["probes"] for s in searches.values()),
                            "bound": max(s["probe_bound"] for s in searches.values()),
                            "ceil_log2_cap": math.ceil(math.log2(1 << 20)), "ceilings": len(searches),
                            "max_rounds": max((s.get("rounds") or 0) for s in searches.values())},
        time_per_measurement_s=m["timings_s"], total_probes=sum(m["probes"].values()),
        open_s={"cold_median": round(statistics.median(cold_opens), 4), "warm": m["timings_s"].get("open")},
        device=dev["name"], driver=dev["context"].get("nvml_driver_version"),
        quick_run=quick, full_run=full, quick_over_floor=round(quick["median_s"] / floor["median_s"], 3),
        full_over_standard=round(full["median_s"] / warm["median_s"], 3),
        full_validation=_validation_summary(full_data["devices"][0]),
    )
    targets = [
        *speed_targets(results),
        ("--level quick / floor", f"{results['quick_over_floor']}x ({quick['median_s']} s / {floor['median_s']} s)",
         "<= 1.2x", results["quick_over_floor"] <= 1.2),
        ("--level full / standard", f"{results['full_over_standard']}x ({full['median_s']} s / {warm['median_s']} s)",
         "<= 2x", results["full_over_standard"] <= 2.0),
        ("probes per ceiling", f"{results['probes_per_ceiling']['max']}",
         f"<= {results['probes_per_ceiling']['bound']}",
         results["probes_per_ceiling"]["max"] <= results["probes_per_ceiling"]["bound"]),
        ("--help", f"{results['help']['median_s']} s", "< 0.5 s", results["help"]["median_s"] < 0.5),
    ]
    results["targets"] = [{"what": w, "measured": v, "target": t, "met": ok} for w, v, t, ok in targets]
    rows = [("floor (import CuPy, context, one module)", floor["median_s"], floor["min_s"], floor["max_s"]),
            ("full run, warm kernel cache", warm["median_s"], warm["min_s"], warm["max_s"]),
            ("full run, cold kernel cache", cold["median_s"], cold["min_s"], cold["max_s"]),
            ("--level quick, warm", quick["median_s"], quick["min_s"], quick["max_s"]),
            ("--level full, warm", full["median_s"], full["min_s"], full["max_s"]),
            ("--backend all, warm kernel caches", *(results["backend_all"][k] for k in ("median_s", "min_s", "max_s"))),
            ("--help", results["help"]["median_s"], results["help"]["min_s"], results["help"]["max_s"])]
    if results["device_scaling"] is not None:
        for key, label in (("one_device", "--device 0, warm"), ("all_devices", "every device, warm")):
            rows.append((label, *(results["device_scaling"][key][k] for k in ("median_s", "min_s", "max_s"))))
    print(tabulate(rows, headers=("process", "median s", "min s", "max s")))
    print()
    print(tabulate([(w, v, t, "met" if ok else "MISSED") for w, v, t, ok in targets],
                   headers=("target", "measured", "goal", "")))
    print()
    lat = results["probe_latency"]
    batch = results["batch_latency"]
    print(f"probe latency: median {lat['median_us']} us, p95 {lat['p95_us']} us; {batch['width']} probes, one sync: "
          f"median {batch['median_us']} us; {results['total_probes']} probes in the run; at most "
          f"{results['probes_per_ceiling']['max_rounds']} rounds per ceiling")
    if results["device_scaling"] is None:
        print("one GPU visible: the multi-GPU target was not measured")
    print(f"--backend all: first run (fills the numba cache) {results['backend_all']['first_run_s']} s")
    print(f"device open (context, compile, load, attributes): cold median {results['open_s']['cold_median']} s, "
          f"warm {results['open_s']['warm']} s")
    print("time per measurement (s): " + ", ".join(f"{k} {v:.3f}" for k, v in m["timings_s"].items()))
    print("--level full: " + ", ".join(f"{k} {v}" for k, v in results["full_validation"].items()))
    Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0 if all(ok for *_, ok in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
