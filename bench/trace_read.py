"""How long ``trace --from`` takes to read and explain a large trace, and the most memory it holds: writes a
folder of LINES launch records (format 2) over PROCESSES process files, as a long serving run or an
autotuning sweep with many workers leaves, then runs ``bisect-smem trace --from`` on it in a fresh process,
REPEATS times, and prints the least wall time and the largest peak RSS. Target: one million launch records
in at most 10 s and 200 MB. No GPU needed.

Each process launches configurations of a pool of kernels (names of 30 to 3000 characters, as Triton's and
CUTLASS's are), with dynamic shared memory, a count line for every other configuration, a refusal with its
kernel's attributes now and then, and a few lines no collector writes. ``--distinct`` gives every record a
configuration of its own (nothing to merge: the worst case for memory).

    python bench/trace_read.py [--lines N] [--processes P] [--repeats R] [--distinct] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = 2000


def kernel_names(rng: random.Random) -> list[str]:
    """Mangled-looking names: mostly short, some of a CUTLASS kernel's few KiB."""
    names = []
    for i in range(KERNELS):
        length = rng.choice((30, 60, 120, 400, 3000)) if i % 10 == 0 else rng.choice((30, 60, 120))
        names.append(f"_Z{length}kernel_{i}_" + "T" * max(0, length - 12))
    return names


def _line(record: dict[str, object]) -> str:
    """A record as the C collector writes it: compact, in the order of its fields."""
    return json.dumps(record, separators=(",", ":"))


def write_folder(folder: Path, lines: int, processes: int, distinct: bool, seed: int = 1) -> int:
    """LINES launch lines over PROCESSES files in ``folder``; returns the bytes written."""
    rng = random.Random(seed)
    names = kernel_names(rng)
    per_process = lines // processes
    written = 0
    for p in range(processes):
        pid = 10000 + p
        out = [_line({"event": "process", "format": 2, "image": 1, "pid": pid, "ppid": 1, "collector": "c",
                      "cupti_library": "/usr/lib/libcupti.so.13", "cupti_found": "already loaded", "untraced": None,
                      "command": f"python serve.py --worker {p}"})]
        for i in range(per_process):
            kernel = (i * 7 + (p if distinct else 0)) % KERNELS
            dynamic = (i % 64) * 1024 if not distinct else (p * per_process + i) % (1 << 20)
            refused = i % 997 == 0
            # The fields in collector.c's order: the reader's fast path takes them as the collector writes them.
            record = {"event": "launch", "id": i + 1, "api": "cuLaunchKernel", "domain": "driver", "correlation": i,
                      "grid": [i % 1000 + 1, 1, 1], "block": [128 * (1 + i % 4), 1, 1], "cluster": [0, 0, 0],
                      "dynamic_bytes": dynamic, "static_bytes": 0, "result": 1 if refused else 0}
            if refused:
                record.update(max_dynamic_bytes=49152, max_threads=1024, registers=32)
            record.update(captured=False, handle=hex(0x7F0000000000 + kernel * 64), name=names[kernel])
            out.append(_line(record))
            if i % 2:
                out.append(_line({"event": "count", "id": i + 1, "count": 1 + i % 1000}))
        out += ["not json", '{"event":"launch","dynamic_bytes":-1}']
        text = "\n".join(out) + "\n"
        (folder / f"{pid}.jsonl").write_text(text)
        written += len(text)
    return written


def measure(folder: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one ``trace --from`` of ``folder``, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bisect_smem", "trace", "--from", str(folder), "--arch", "9.0",
                           "--json", os.devnull], env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"error: trace --from failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if usage.ru_maxrss <= before:
        print("note: this peak is no larger than an earlier child's; run with --repeats 1 for a sure figure")
    return seconds, usage.ru_utime + usage.ru_stime - cpu, usage.ru_maxrss / 1024  # ru_maxrss: KiB on Linux


def reference_ms() -> float:
    """How fast this machine runs Python now: the least ms of ``sum(range(10**6))`` (about 10 ms on an idle
    current x86 core), so that figures from a loaded or slow machine can be read for what they are."""
    return min(timeit.repeat("sum(range(10**6))", number=1, repeat=5)) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--distinct", action="store_true", help="every record a configuration of its own")
    parser.add_argument("--keep", metavar="DIR", help="write the folder here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        written = write_folder(folder, args.lines, args.processes, args.distinct)
        print(f"{args.lines} launch records in {args.processes} files, {written / 1e6:.0f} MB")
        runs = [measure(folder) for _ in range(args.repeats)]
    seconds, cpu, peak = min(s for s, _, _ in runs), min(c for _, c, _ in runs), max(m for _, _, m in runs)
    verdict = "met" if seconds <= 10 and peak <= 200 else "MISSED"
    print(f"trace --from: {seconds:.2f} s ({cpu:.2f} s of CPU), peak RSS {peak:.0f} MB (target 10 s and 200 MB: "
          f"{verdict}); this machine: sum(range(10**6)) in {reference_ms():.1f} ms, load {os.getloadavg()[0]:.1f}")
    return 0 if verdict == "met" else 1


if __name__ == "__main__":
    sys.exit(main())
