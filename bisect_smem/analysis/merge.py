"""Many hosts' reports in one table: per GPU model and driver, the measured values and who deviates.

A device deviates when any of its quantities differs from the majority of its group (same GPU model,
same driver version). Devices are named by report file and index, which is also how a scheduler's
per-node output files are named.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisect_smem.analysis.baseline import driver_version
from bisect_smem.core.errors import BaselineError
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.quantities import quantities

SUMMARY = ("measured.default_dynamic_ceiling_bytes", "measured.optin_dynamic_ceiling_bytes",
           "measured.smem_per_sm_bytes")


def load_report(path: Path) -> Report:
    try:
        return Report.from_dict(json.loads(Path(path).read_text()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise BaselineError(f"{path}: not a readable bisect_smem report ({exc})") from None


@dataclass(frozen=True)
class Member:
    label: str  # "<report stem>:<device index>"
    host: str
    device: DeviceReport


@dataclass(frozen=True)
class Group:
    model: str
    driver: str
    members: tuple[Member, ...]
    majority: dict[str, Any]
    deviations: dict[str, list[str]]  # member label -> "quantity: value (majority: value)"


def group_reports(paths: list[Path]) -> list[Group]:
    members: dict[tuple[str, str], list[Member]] = defaultdict(list)
    for path in paths:
        report = load_report(path)
        for dev in report.devices:
            members[(dev.name or "unknown", driver_version(dev))].append(
                Member(f"{Path(path).stem}:{dev.index}", report.host, dev))
    groups = []
    for (model, driver), group in sorted(members.items()):
        values = {m.label: quantities(m.device) for m in group}
        names = sorted({n for q in values.values() for n in q})
        majority = {}
        for name in names:
            counts = Counter(json.dumps(q.get(name), sort_keys=True) for q in values.values())
            majority[name] = json.loads(counts.most_common(1)[0][0])
        deviations: dict[str, list[str]] = {}
        for label, q in values.items():
            diffs = [f"{n}: {q.get(n)!r} (majority: {majority[n]!r})" for n in names if q.get(n) != majority[n]]
            errors = [f"error: {m.device.error}" for m in group if m.label == label and m.device.error]
            if diffs or errors:
                deviations[label] = errors + diffs
        groups.append(Group(model, driver, tuple(group), majority, deviations))
    return groups


def render(groups: list[Group]) -> str:
    from tabulate import tabulate

    rows = []
    for g in groups:
        deviating = "; ".join(f"{label} ({len(d)} differ: {d[0]})" for label, d in g.deviations.items()) or "none"
        rows.append((g.model, g.driver, len(g.members), *(_fmt(g.majority.get(n)) for n in SUMMARY), deviating))
    return tabulate(rows, headers=("GPU model", "driver", "devices", "default B", "opt-in B", "smem/SM B",
                                   "deviating from the majority"), disable_numparse=True)


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)
