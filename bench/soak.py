"""Soak: run the full measurement N times in one process and count the distinct results.

    python bench/soak.py [--runs 200] [--out soak.json]

Each run opens the device afresh (new kernels, fresh attribute state) and measures everything the
default run measures; the comparable quantities (no times, no probe counts) must be identical.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from bisect_smem.app.run.requests import build_request
    from bisect_smem.app.run.runner import run
    from bisect_smem.core.quantities import quantities

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--out", default="soak.json")
    parser.add_argument("--backend", default="cupy")
    args = parser.parse_args()
    distinct: dict[str, int] = {}
    errors = 0
    start = time.perf_counter()
    for i in range(args.runs):
        (dev,) = run(build_request(args.backend, devices=(0,), isolate=False))
        errors += dev.error is not None
        key = json.dumps(quantities(dev), sort_keys=True)
        distinct[key] = distinct.get(key, 0) + 1
        if (i + 1) % 25 == 0:
            print(f"{i + 1} runs, {len(distinct)} distinct results, {time.perf_counter() - start:.1f} s", flush=True)
    elapsed = time.perf_counter() - start
    summary = {"runs": args.runs, "distinct_results": len(distinct), "runs_with_errors": errors,
               "wall_s": round(elapsed, 2), "per_run_s": round(elapsed / args.runs, 3),
               "counts": sorted(distinct.values(), reverse=True)}
    if len(distinct) > 1:
        variants = [json.loads(k) for k in distinct]
        summary["differing_quantities"] = sorted({n for v in variants for n in v if v[n] != variants[0].get(n)})
    print(json.dumps(summary, indent=2))
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if len(distinct) == 1 and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
