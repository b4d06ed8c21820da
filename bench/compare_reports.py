"""Two reports of the same GPU, quantity for quantity and row for row: what a change of the code must not
change. Timings, probe counts, the creation time and the tool's version are left out; every measured
quantity, reported attribute and verdict row (its family, parameters, kind, verdict, measured, reported)
is compared.

    python bench/compare_reports.py BEFORE.json AFTER.json

Prints the differences and their count; exit 0 when there are none, 1 otherwise.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

IGNORED = {"timings_s", "probes", "elapsed_s", "created_utc", "tool_version", "note", "notes", "rounds",
           "probe_bound", "events", "seconds"}


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a JSON value with its path, the ignored keys left out."""
    if isinstance(value, dict):
        for key in sorted(value):
            if key not in IGNORED:
                yield from flatten(value[key], f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from flatten(item, f"{path}[{i}]")
    else:
        yield path, value


def rows(device: dict) -> dict[str, tuple]:
    """Each verdict row by its quantity, with what it concluded."""
    return {f"{r['family']} {r['quantity']}": (r["kind"], r["verdict"], r["measured"], r["reported"],
                                                r.get("measured_items"), r.get("reported_items"))
            for r in device["verdicts"]}


def differences(before: dict, after: dict) -> list[str]:
    """What differs between the two reports, one line each."""
    out = []
    if len(before["devices"]) != len(after["devices"]):
        return [f"devices: {len(before['devices'])} before, {len(after['devices'])} after"]
    for b, a in zip(before["devices"], after["devices"], strict=True):
        quantities = [dict(flatten(d["measured"] or {})) for d in (b, a)]
        for key in sorted(set(quantities[0]) | set(quantities[1])):
            if quantities[0].get(key, "missing") != quantities[1].get(key, "missing"):
                out.append(f"device {b['index']} {key}: {quantities[0].get(key, 'missing')!r} -> "
                           f"{quantities[1].get(key, 'missing')!r}")
        rb, ra = rows(b), rows(a)
        for key in sorted(set(rb) | set(ra)):
            if rb.get(key) != ra.get(key):
                out.append(f"device {b['index']} row {key}: {rb.get(key)} -> {ra.get(key)}")
    for key in ("exit_code", "result", "level", "backend"):
        if before.get(key) != after.get(key):
            out.append(f"{key}: {before.get(key)!r} -> {after.get(key)!r}")
    return out


def main() -> int:
    """Compare the two reports named on the command line."""
    before, after = (json.loads(open(path).read()) for path in sys.argv[1:3])
    found = differences(before, after)
    quantities = sum(1 for d in after["devices"] for _ in flatten(d["measured"] or {}))
    verdicts = sum(len(d["verdicts"]) for d in after["devices"])
    for line in found:
        print(line)
    print(f"{quantities} quantities, {verdicts} verdict rows: {len(found)} differ")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
