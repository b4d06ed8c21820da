"""The merged fleet as text: per GPU model, driver and backend, the majority's values of the summary quantities and
who deviates from them, then every deviation and tie on its own line."""

from __future__ import annotations

import math
from typing import Any

from bisect_smem.analysis.merge import Fleet, Group
from bisect_smem.app.render.width import DEFAULT_WIDTH, table, wrapped
from bisect_smem.core.jsonable import dumps, to_jsonable
from bisect_smem.core.text import dash, printable

MERGE_SCHEMA = "bisect_smem/merge/v1"  # the schema id of what ``merge --json`` writes
HEADERS = ("GPU model", "driver", "backend", "devices", "default B", "opt-in B", "smem/SM B",
           "deviating from the majority")

# The quantities the merged table shows per group; every other one appears only where a device deviates.
SUMMARY = ("measured.default_dynamic_ceiling_bytes", "measured.optin_dynamic_ceiling_bytes",
           "measured.smem_per_sm_bytes")


def deviations(group: Group) -> dict[str, list[str]]:
    """Per deviating device (by label), its error and each quantity that differs from the majority."""
    errors = {m.label: m.error for m in group.members if m.error}
    return {label: [*([f"error: {errors[label]}"] if label in errors else []),
                    *(f"{d.name}: {d.value!r} (majority: {d.majority!r})" for d in found)]
            for label, found in group.deviations.items()}


NAMED = 3  # quantities named on a "not measured" line; the rest are counted


def _some(names: tuple[str, ...]) -> str:
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return ", ".join(names[:NAMED]) + more


def merge(merged: Fleet, width: int = DEFAULT_WIDTH) -> str:
    """The merged fleet in at most ``width`` columns: one row per GPU model, driver and backend with the
    devices that deviate (``tie`` where the most common values are equally common), then every deviation
    and tie on its own line, and each report that lists no device."""
    rows, lines = [], []
    for g in merged.groups:
        per_device = deviations(g)
        deviating = "; ".join(f"{label} ({len(d)} differ: {d[0]})" for label, d in per_device.items()) or "none"
        summary = ("tie" if name in g.ties else dash(g.majority.get(name)) for name in SUMMARY)
        # Names and paths come from files: escaped, so that they change nothing on the screen but themselves.
        model, driver, backend = printable(g.model), printable(g.driver), printable(g.backend)
        rows.append((model, driver, backend, str(len(g.members)), *summary, printable(deviating)))
        group = f"{model} (driver {driver}, backend {backend})"  # the group, in the lines below
        if g.levels:
            counts = ", ".join(f"{n} {level}" for level, n in g.levels.items())
            lines.append(f"{group}: compared at level {g.level}, the lowest of its devices ({counts})")
        lines += [printable(f"{label}: {line}") for label, found in per_device.items() for line in found]
        lines += [f"{group}: {quantity}: a tie between {', '.join(map(repr, values))}; "
                  f"no majority, nobody blamed" for quantity, values in g.ties.items()]
        lines += [printable(f"{label}: not measured: {_some(names)}") for label, names in g.not_measured.items()]
    lines += [printable(f"{u.path}: no device measured: {u.why}") for u in merged.unmeasured]
    lines += [printable(f"{u.path}: not merged: {u.why}") for u in merged.unreadable]
    return "\n".join([table(rows, HEADERS, width), *(wrapped(line, width) for line in lines)]) + "\n"


def merge_json(merged: Fleet, exit_code: int) -> str:
    """The JSON document of ``merge --json``: every group with its members, majority, deviations, ties and
    quantities not measured, each report that lists no device or could not be read, and the exit code."""
    return dumps(_finite({"schema": MERGE_SCHEMA, "exit_code": exit_code, **to_jsonable(merged)}))


def _finite(value: Any) -> Any:
    """``value`` with each NaN or infinity (a report's vendor field may hold one) as its text, which JSON can
    carry (``NaN`` is no JSON, and strict parsers refuse it)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value
