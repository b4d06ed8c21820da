"""`merge` of a fleet: 1000 reports of 8 devices each, timed and with its peak memory.

    python bench/bench_merge.py [--reports 1000] [--devices 8] [--deviating 3]

The reports are a simulated H200 report (measured once, here) copied per host and device, with
``--deviating`` devices given a smaller opt-in ceiling. `bisect-smem merge` then runs as a fresh
process; the peak resident memory of it and its children together is sampled from /proc. Prints the
wall time, the peak, whether each met its target (3 s, 300 MB) and whether merge named exactly the
planted devices: with orjson (the extra ``fast``) when it is installed, and with the standard parser.
Exit 1 when merge's answer is wrong; a missed target is printed, not failed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bisect_smem.core.levels import is_reference_split  # noqa: E402 (the checkout's, after the path above)

TARGET_S, TARGET_MB = 3.0, 300
# merge as `python -m bisect_smem merge`, with orjson importable or not (its pool's workers inherit that)
MERGE = "import sys; {block}from bisect_smem.app.cli.main import main; sys.exit(main(['merge', *sys.argv[1:]]))"


def template() -> dict:
    """One simulated H200 report, measured in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "h200.json"
        subprocess.run([sys.executable, "-m", "bisect_smem", "--simulate", "h200", "--quiet", "--json", str(out)],
                       check=False, stdout=subprocess.DEVNULL, cwd=ROOT, env=_env())
        return json.loads(out.read_text())


def write_fleet(folder: Path, base: dict, reports: int, devices: int, deviating: int) -> list[str]:
    """``reports`` files of ``devices`` devices; the labels of the planted deviating devices."""
    dev0 = base["devices"][0]
    planted = {(r * 7919) % reports for r in range(deviating)}
    labels = []
    for r in range(reports):
        doc = dict(base, host=f"node-{r:04d}", devices=[])
        for i in range(devices):
            dev = dict(dev0, index=i, context=dict(dev0["context"], nvml_uuid=f"GPU-{r:04d}-{i}"),
                       elapsed_s=round(10 + (r * 8 + i) % 97 / 10, 1))
            if r in planted and i == devices - 1:
                dev["measured"] = copy.deepcopy(dev0["measured"])
                # The opt-in ceiling is the reference split's (one search gives both): plant it in both.
                dev["measured"]["optin_dynamic_ceiling_bytes"] -= 1024
                for split in dev["measured"]["static_splits"]:
                    if is_reference_split(split["static_bytes"], split["threads"]):
                        split["dynamic_ceiling_bytes"] -= 1024
                labels.append(f"{folder / f'node-{r:04d}.json'}:{i}")
            doc["devices"].append(dev)
        (folder / f"node-{r:04d}.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return sorted(labels)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and every descendant, in KiB."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        todo.extend(int(c) for c in children)
    return total


def timed_merge(paths: list[str], orjson: bool = True) -> tuple[float, int, int, str]:
    """Wall seconds, peak KiB, exit code and stdout of one `bisect-smem merge` process."""
    code = MERGE.format(block="" if orjson else "sys.modules['orjson'] = None; ")
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *paths], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kib(proc.pid))
        time.sleep(0.01)
    out, err = proc.communicate()
    return time.perf_counter() - start, peak, proc.returncode, out + err


def _orjson_installed() -> bool:
    try:
        import orjson  # noqa: F401
    except ImportError:
        return False
    return True


def _verdict(value: float, target: float) -> str:
    return "met" if value < target else "MISSED"


def main() -> int:
    """Generate the fleet, merge it with each parser, print the figures; exit 1 when merge is wrong."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--deviating", type=int, default=3)
    args = parser.parse_args()
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        planted = write_fleet(folder, template(), args.reports, args.devices, args.deviating)
        paths = sorted(str(p) for p in folder.glob("*.json"))
        size_mb = sum(os.path.getsize(p) for p in paths) / 1e6
        print(f"merge of {args.reports} reports x {args.devices} devices ({size_mb:.0f} MB of JSON) "
              f"on {os.cpu_count()} CPUs; targets {TARGET_S:g} s and {TARGET_MB} MB")
        for orjson in ([True, False] if _orjson_installed() else [False]):
            seconds, peak_kib, code, out = timed_merge(paths, orjson)
            named = sorted({line.split(": measured.", 1)[0] for line in out.splitlines()
                            if line.startswith(str(folder)) and ": measured." in line})
            right = code == (1 if planted else 0) and named == planted
            wrong += not right
            print(f"  {'orjson' if orjson else 'json (standard library)':24} {seconds:6.2f} s "
                  f"({_verdict(seconds, TARGET_S)}), peak {peak_kib / 1024:4.0f} MB "
                  f"({_verdict(peak_kib / 1024, TARGET_MB)}), exit {code}; planted {len(planted)} deviating "
                  f"devices, merge named {len(named)}: {'the same' if named == planted else 'DIFFERENT'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
