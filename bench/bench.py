"""The benchmark: the default run against the floor of starting CUDA at all, side by side.

    python bench/bench.py [--repeat N] [--out bench.json]

floor:  a fresh Python that imports CuPy, creates the CUDA context and builds and loads one module.
runs:   `python -m bisect_smem --device 0` as a fresh process. Each of N rounds runs, one after another, the floor,
        the default run warm (kernel caches filled), `--level quick` warm, the default run cold (empty
        kernel caches) and `--level full` warm, so that the ratios compare runs made side by side; then
        `--backend all` warm (CuPy and numba kernel caches filled) and, with more than one visible GPU,
        `--device 0` against every device.
Also: where a warm run's time goes (from the timeline its processes write: parent start, worker start,
context, first probe, probing, report, exit), per-probe latency (one launch + sync, and four launches +
one sync), probes and rounds per ceiling against the bound, time per measurement, and the commands that measure
nothing (`--help` among them) against a bare Python start (bench/startup.py). Each
target is printed as met or MISSED and written to the JSON; exit 1 when one is missed. Needs a GPU;
without one it says so and exits 3.
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
sys.path.insert(0, str(ROOT / "bench"))

import startup  # noqa: E402 - bench/startup.py, beside this script
import timeline  # noqa: E402 - bench/timeline.py, beside this script

FLOOR = """
import cupy
from bisect_smem.devices.kernel_abi import NVRTC_OPTIONS, PROBE_FILE, probe_name, read_kernel
cupy.cuda.Device(0).use()
module = cupy.RawModule(code=read_kernel(PROBE_FILE), options=NVRTC_OPTIONS, name_expressions=[probe_name(0, True)])
module.get_function(probe_name(0, True))
cupy.cuda.runtime.deviceSynchronize()
"""
TOOL = [sys.executable, "-m", "bisect_smem", "--quiet", "--device", "0"]  # one device, as the floor has
EVERY_DEVICE = [sys.executable, "-m", "bisect_smem", "--quiet"]
LATENCY_BYTES = 200_000
FAILURES: list[dict[str, object]] = []  # every timed run of the tool that did not exit 0, with its last words


def timed(command: list[str], env: dict[str, str], parts: list[dict[str, float]] | None = None,
          slowest: list[dict[str, float]] | None = None) -> tuple[float, int]:
    """Seconds and exit code of one fresh process; with ``parts``, append where its time went, and with
    ``slowest``, the points of the worker that finished last."""
    handle, name = tempfile.mkstemp(prefix="bisect-smem-timeline-")
    os.close(handle)
    trace = Path(name)
    env = {**env, "BISECT_SMEM_TIMELINE": str(trace)} if parts is not None or slowest is not None else env
    launched = time.monotonic()
    proc = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ended = time.monotonic()
    if parts is not None:
        parts.append(timeline.parts(timeline.read_points(trace, launched, ended)))
    if slowest is not None:
        slowest.append(timeline.slowest_worker(trace, launched))
    if proc.returncode not in (0, None) and "-c" not in command:
        FAILURES.append({"command": " ".join(command[1:]), "exit": proc.returncode,
                         "stderr": proc.stderr.strip().splitlines()[-3:]})
    trace.unlink(missing_ok=True)
    return ended - launched, proc.returncode


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(samples), 4), "min_s": round(min(samples), 4),
            "max_s": round(max(samples), 4), "n": len(samples)}


def latency_session() -> tuple[object, object]:
    """One device opened in this process, its opt-in probe raised to LATENCY_BYTES: both latencies use it."""
    from bisect_smem.devices.backends.cupy.backend import CupySession
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
    from bisect_smem.devices.probes import Launch

    times = []
    for _ in range(samples):
        start = time.perf_counter()
        assert all(o.ok for o in session.launch_batch([Launch(kernel, LATENCY_BYTES, 128)] * width))
        times.append(time.perf_counter() - start)
    return {"width": width, "median_us": round(statistics.median(times) * 1e6, 1)}


def side_by_side(work: Path, env: dict[str, str], repeat: int) -> dict[str, object]:
    """N rounds of floor, warm, quick, cold and full runs, one after another; warm and quick with their
    timelines. The warm cache is filled first (and the floor's module built once)."""
    warm_env = {**env, "CUPY_CACHE_DIR": str(work / "warm-cache")}
    timed([sys.executable, "-c", FLOOR], warm_env)
    timed([*TOOL, "--level", "full", "--json", str(work / "fill.json")], warm_env)
    runs: dict[str, list[float]] = {k: [] for k in ("floor", "warm", "quick", "cold", "full")}
    parts: dict[str, list[dict[str, float]]] = {"warm": [], "quick": [], "cold": []}
    codes: set[int] = set()
    cold_opens = []
    for i in range(repeat):
        commands = {
            "floor": ([sys.executable, "-c", FLOOR], warm_env, None),
            "warm": ([*TOOL, "--json", str(work / "report.json")], warm_env, parts["warm"]),
            "quick": ([*TOOL, "--level", "quick", "--json", str(work / "quick.json")], warm_env, parts["quick"]),
            "cold": ([*TOOL, "--json", str(work / "cold.json")], {**env, "CUPY_CACHE_DIR": str(work / f"cold-{i}")},
                     parts["cold"]),
            "full": ([*TOOL, "--level", "full", "--json", str(work / "full.json")], warm_env, None),
        }
        for name, (command, run_env, trace) in commands.items():
            seconds, code = timed(command, run_env, trace)
            runs[name].append(seconds)
            if name != "floor":
                codes.add(code)
        cold_opens.append(json.loads((work / "cold.json").read_text())["devices"][0]["measured"]["timings_s"]["open"])
    return {"runs": {k: summary(v) for k, v in runs.items()}, "codes": codes, "cold_opens": cold_opens,
            "parts": {k: timeline.medians(v) for k, v in parts.items()}}


def backend_all_runs(work: Path, env: dict[str, str], repeat: int) -> tuple[dict, set[int]]:
    """``--backend all`` with warm CuPy and numba caches (one run fills them first)."""
    run = [*TOOL, "--backend", "all", "--json", str(work / "all.json")]
    env = {**env, "CUPY_CACHE_DIR": str(work / "warm-cache"), "NUMBA_CACHE_DIR": str(work / "numba-cache")}
    first, code = timed(run, env)
    samples, codes, slowest = [], {code}, []
    for _ in range(repeat):
        seconds, code = timed(run, env, slowest=slowest)
        samples.append(seconds)
        codes.add(code)
    verdicts = [v["verdict"] for d in json.loads((work / "all.json").read_text())["devices"] for v in d["verdicts"]
                if v.get("family") == "cross_check"]
    return {"first_run_s": round(first, 4), **summary(samples), "slowest_worker_s": timeline.point_medians(slowest),
            "cross_check_rows": len(verdicts),
            "cross_check_not_matching": sum(v != "match" for v in verdicts)}, codes


def device_scaling_runs(work: Path, env: dict[str, str], repeat: int, devices: int) -> tuple[dict | None, set[int]]:
    """Device 0 alone against every visible device, warm; None with a single device."""
    if devices < 2:
        return None, set()
    env = {**env, "CUPY_CACHE_DIR": str(work / "warm-cache")}
    report = str(work / "scaling.json")
    ones, alls, codes = [], [], set()
    for _ in range(repeat):
        for samples, command in ((ones, [*TOOL, "--json", report]), (alls, [*EVERY_DEVICE, "--json", report])):
            seconds, code = timed(command, env)
            samples.append(seconds)
            codes.add(code)
    one, every = summary(ones), summary(alls)
    return {"devices": devices, "one_device": one, "all_devices": every,
            "all_over_one": round(every["median_s"] / one["median_s"], 3)}, codes


def speed_targets(results: dict) -> list[tuple[str, str, str, bool]]:
    """Each target: (what, measured, goal, met)."""
    runs = results["runs"]
    floor, warm, cold, quick, full = (runs[k]["median_s"] for k in ("floor", "warm", "cold", "quick", "full"))
    every = results["backend_all"]["median_s"]
    probes = results["probes_per_ceiling"]
    targets = [
        ("warm run / floor", f"{warm / floor:.3f}x ({warm} s / {floor} s)", "<= 1.25x", warm <= 1.25 * floor),
        ("--level quick / floor", f"{quick / floor:.3f}x ({quick} s / {floor} s)", "<= 1.1x", quick <= 1.1 * floor),
        ("cold run - floor", f"{cold - floor:.3f} s ({cold} s - {floor} s)", "<= 0.4 s", cold - floor <= 0.4),
        ("--backend all / CuPy only, warm", f"{every / warm:.3f}x ({every} s / {warm} s)", "<= 1.3x",
         every <= 1.3 * warm),
        ("--level full / standard", f"{full / warm:.3f}x ({full} s / {warm} s)", "<= 2x", full <= 2 * warm),
        ("probes per ceiling", f"{probes['max']}", f"<= {probes['bound']}", probes["max"] <= probes["bound"]),
        ("--backend all: cupy = numba rows", f"{results['backend_all']['cross_check_not_matching']} of "
         f"{results['backend_all']['cross_check_rows']} not match", "0 (and > 0 rows)",
         results["backend_all"]["cross_check_not_matching"] == 0 < results["backend_all"]["cross_check_rows"]),
        ("--help", f"{results['startup']['--help']['median_s']} s", "< 0.5 s",
         results["startup"]["--help"]["median_s"] < 0.5),
        *startup.targets(results["startup"]),
    ]
    scaling = results.get("device_scaling")
    if scaling is not None:
        ratio = scaling["all_over_one"]
        targets.append((f"{scaling['devices']} GPUs / one GPU", f"{ratio}x ({scaling['all_devices']['median_s']} s "
                        f"/ {scaling['one_device']['median_s']} s)", "<= 1.1x", ratio <= 1.1))
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


def measure(repeat: int, devices: int) -> dict:
    """Every timed run, and what the last warm and full reports say."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        together = side_by_side(work, env, repeat)
        results: dict = {"runs": together["runs"], "parts_s": together["parts"]}
        results["backend_all"], all_codes = backend_all_runs(work, env, repeat)
        results["device_scaling"], scaling_codes = device_scaling_runs(work, env, repeat, devices)
        results["startup"] = startup.measure(max(repeat, 5))
        results["exit_codes"] = sorted(together["codes"] | all_codes | scaling_codes)
        results["failures"] = FAILURES
        warm = json.loads((work / "report.json").read_text())["devices"][0]
        full = json.loads((work / "full.json").read_text())["devices"][0]
    m = warm["measured"]
    searches = m["searches"]
    results.update(
        probes_per_ceiling={"max": max(s["probes"] for s in searches.values()),
                            "bound": max(s["probe_bound"] for s in searches.values()),
                            "ceil_log2_cap": math.ceil(math.log2(1 << 20)), "ceilings": len(searches),
                            "max_rounds": max((s.get("rounds") or 0) for s in searches.values())},
        time_per_measurement_s=m["timings_s"], total_probes=sum(m["probes"].values()),
        open_s={"cold_median": round(statistics.median(together["cold_opens"]), 4), "warm": m["timings_s"].get("open")},
        device=warm["name"], driver=warm["context"].get("nvml_driver_version"),
        full_validation=_validation_summary(full))
    return results


def show(results: dict, targets: list[tuple[str, str, str, bool]]) -> None:
    runs = results["runs"]
    labels = {"floor": "floor (import CuPy, context, one module)", "warm": "default run, warm kernel cache",
              "cold": "default run, cold kernel cache", "quick": "--level quick, warm", "full": "--level full, warm"}
    rows = [(label, *(runs[k][s] for s in ("median_s", "min_s", "max_s"))) for k, label in labels.items()]
    rows.append(("--backend all, warm kernel caches", *(results["backend_all"][k] for k in ("median_s", "min_s",
                                                                                              "max_s"))))
    rows.extend((f"{label} (a fresh process)", *(r[k] for k in ("median_s", "min_s", "max_s")))
                for label, r in results["startup"].items())
    if results["device_scaling"] is not None:
        for key, label in (("one_device", "--device 0, warm"), ("all_devices", "every device, warm")):
            rows.append((label, *(results["device_scaling"][key][k] for k in ("median_s", "min_s", "max_s"))))
    print(tabulate(rows, headers=("process", "median s", "min s", "max s")))
    print()
    print(tabulate([(w, v, t, "met" if ok else "MISSED") for w, v, t, ok in targets],
                   headers=("target", "measured", "goal", "")))
    print()
    parts = results["parts_s"]
    print(tabulate([(name, parts["warm"].get(name), parts["quick"].get(name), parts["cold"].get(name))
                    for name, _, _ in timeline.PARTS],
                   headers=("where a run's time goes (median s)", "warm", "quick", "cold")))
    print("(beside each other: the worker's context creation and its imports, which 'worker start to device open' "
          "includes, and the parent's start)")
    print()
    lat, batch = results["probe_latency"], results["batch_latency"]
    print(f"probe latency: median {lat['median_us']} us, p95 {lat['p95_us']} us; {batch['width']} probes, one sync: "
          f"median {batch['median_us']} us; {results['total_probes']} probes in the run; at most "
          f"{results['probes_per_ceiling']['max_rounds']} rounds per ceiling")
    if results["device_scaling"] is None:
        print("one GPU visible: the multi-GPU target was not measured")
    print(f"--backend all: first run (fills the numba cache) {results['backend_all']['first_run_s']} s; its slowest "
          "worker, s after the launch (median): " + ", ".join(f"{k} {v}" for k, v in
                                                              results["backend_all"]["slowest_worker_s"].items()))
    print(f"device open (context, compile, load, attributes): cold median {results['open_s']['cold_median']} s, "
          f"warm {results['open_s']['warm']} s")
    print("time per measurement (s): " + ", ".join(f"{k} {v:.3f}" for k, v in results["time_per_measurement_s"].items()))
    print("--level full: " + ", ".join(f"{k} {v}" for k, v in results["full_validation"].items()))
    print(f"exit codes seen: {results['exit_codes']}")
    for failure in results["failures"]:
        print(f"  exit {failure['exit']}: {failure['command']}: {' / '.join(failure['stderr'])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default="bench.json")
    args = parser.parse_args()
    from bisect_smem.devices.backends.cupy.backend import CupyBackend

    backend = CupyBackend()
    if not backend.is_available():
        print(f"error: the benchmark needs a GPU: {backend.unavailable_reason()}", file=sys.stderr)
        return 3
    results = measure(args.repeat, backend.device_count())
    latency = latency_session()
    results.update(probe_latency=probe_latency(*latency), batch_latency=batch_latency(*latency))
    targets = speed_targets(results)
    results["targets"] = [{"what": w, "measured": v, "target": t, "met": ok} for w, v, t, ok in targets]
    show(results, targets)
    Path(args.out).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0 if all(ok for *_, ok in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
