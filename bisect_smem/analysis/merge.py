"""Many hosts' reports in one table: per GPU model and driver, the measured values and who deviates.

A device deviates when any of its quantities differs from the majority of its group (same GPU model,
same driver version); a quantity whose most common values are equally common is a tie: reported, with
no majority and nobody blamed. Devices are labelled by the report's path as given and the device index
(``reports/node-a.json:0``), so files of the same name in different folders stay apart; the same file
given twice is refused.

Reports are read one at a time and reduced to their quantities, each distinct value stored once, so
memory stays flat however many reports are merged; with more than a few files they are read by a
pool of processes.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bisect_smem.analysis.baseline import driver_version, read_json
from bisect_smem.core.errors import BaselineError
from bisect_smem.core.model import REPORT_SCHEMA, DeviceReport, Report
from bisect_smem.core.quantities import quantities
from bisect_smem.core.schema import SchemaError, check

SUMMARY = ("measured.default_dynamic_ceiling_bytes", "measured.optin_dynamic_ceiling_bytes",
           "measured.smem_per_sm_bytes")
MISSING = "missing"  # how a quantity one device lacks is shown beside the others' values
_POOL_FROM_FILES = 32
_SCALARS = (int, str, float, type(None))


def load_report(path: Path) -> Report:
    """Read one report; unreadable, foreign or wrongly typed is a BaselineError naming the file."""
    data = _checked(path)
    try:
        return Report.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(f"{path}: not a readable bisect_smem report ({exc})") from None


def _checked(path: Path, compared_only: bool = False) -> dict[str, Any]:
    """The report's JSON after the shape check; ``compared_only`` drops the verdicts first (merge
    compares quantities, never verdicts, and they are half of a report)."""
    data = read_json(path, "bisect_smem report")
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise BaselineError(f"{path}: not a readable bisect_smem report (schema: {found!r})")
    if compared_only and isinstance(data.get("devices"), list):
        data["devices"] = [{**d, "verdicts": []} if isinstance(d, dict) else d for d in data["devices"]]
    try:
        check(data, Report)
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None
    return data


DeviceRow = tuple[str, str, str, str, str | None, tuple[tuple[str, Any], ...]]


def device_rows(path: str) -> list[DeviceRow]:
    """(label, host, model, driver, error, quantities) per device of one report: what merge keeps."""
    data = _checked(Path(path), compared_only=True)
    rows = []
    for raw in data["devices"]:
        try:
            dev = DeviceReport.from_dict(raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise BaselineError(f"{path}: not a readable bisect_smem report ({exc})") from None
        items = tuple((name, _hashable(value)) for name, value in quantities(dev).items())
        rows.append((f"{path}:{dev.index}", data["host"], dev.name or "unknown", driver_version(dev), dev.error,
                     items))
    return rows


def _hashable(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, bool):
        return ("bool", value)  # True == 1 to Python; not to a report
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "bool":
        return value[1]
    return list(map(_plain, value)) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Member:
    """One device of the fleet: its label, host and error."""
    label: str  # "<report path as given>:<device index>"
    host: str
    error: str | None


@dataclass(frozen=True)
class Group:
    """The devices of one GPU model and driver, their majority values, deviations and ties."""
    model: str
    driver: str
    members: tuple[Member, ...]
    majority: dict[str, Any]
    deviations: dict[str, list[str]]  # member label -> "quantity: value (majority: value)"
    ties: dict[str, list[Any]] = field(default_factory=dict)  # quantity -> the equally common values


def refuse_duplicates(paths: list[str]) -> None:
    """The same file given twice (by any path) would count its devices twice."""
    seen: dict[Path, str] = {}
    for path in paths:
        key = Path(path).resolve()
        if key in seen:
            raise BaselineError(f"{path} is the same file as {seen[key]}; give each report once")
        seen[key] = path


def _rows(paths: list[str]) -> Iterator[DeviceRow]:
    if len(paths) < _POOL_FROM_FILES or (os.cpu_count() or 1) < 2:
        for path in paths:
            yield from device_rows(path)
        return
    with ProcessPoolExecutor(max_workers=min(os.cpu_count() or 1, 8)) as pool:
        for rows in pool.map(device_rows, paths, chunksize=8):
            yield from rows


class _Collector:
    """One group's members and their quantities, each distinct value stored once for all devices."""

    def __init__(self, interned: dict[Any, Any]) -> None:
        self.members: list[Member] = []
        self.values: list[dict[str, Any]] = []
        self.interned = interned

    def add(self, member: Member, items: tuple[tuple[str, Any], ...]) -> None:
        intern = self.interned.setdefault
        self.members.append(member)
        self.values.append({intern(name, name): intern(value, value) for name, value in items})

    def group(self, model: str, driver: str) -> Group:
        names = sorted({n for q in self.values for n in q})
        majority: dict[str, Any] = {}
        ties: dict[str, list[Any]] = {}
        for name in names:
            counts = Counter(q.get(name, MISSING) for q in self.values).most_common()
            if len(counts) > 1 and counts[0][1] == counts[1][1]:
                ties[name] = [_plain(v) for v, n in counts if n == counts[0][1]]
            else:
                majority[name] = counts[0][0]
        deviations: dict[str, list[str]] = {}
        for member, q in zip(self.members, self.values, strict=True):
            diffs = [f"{n}: {_plain(q.get(n, MISSING))!r} (majority: {_plain(v)!r})"
                     for n, v in majority.items() if q.get(n, MISSING) != v]
            errors = [f"error: {member.error}"] if member.error else []
            if diffs or errors:
                deviations[member.label] = errors + diffs
        return Group(model, driver, tuple(self.members), {n: _plain(v) for n, v in majority.items()},
                     deviations, ties)


def group_reports(paths: list[Path] | list[str]) -> list[Group]:
    """Every device of every report, grouped by GPU model and driver, against its group's majority."""
    texts = [str(p) for p in paths]
    refuse_duplicates(texts)
    interned: dict[Any, Any] = {}
    collectors: dict[tuple[str, str], _Collector] = defaultdict(lambda: _Collector(interned))
    for label, host, model, driver, error, items in _rows(texts):
        collectors[(model, driver)].add(Member(label, host, error), items)
    return [c.group(model, driver) for (model, driver), c in sorted(collectors.items())]


def render(groups: list[Group]) -> str:
    """The merged table: one row per GPU model and driver, with the devices that deviate."""
    from tabulate import tabulate

    rows = []
    for g in groups:
        deviating = "; ".join(f"{label} ({len(d)} differ: {d[0]})" for label, d in g.deviations.items()) or "none"
        rows.append((g.model, g.driver, len(g.members), *(_fmt(g.majority.get(n), n in g.ties) for n in SUMMARY),
                     deviating))
    return tabulate(rows, headers=("GPU model", "driver", "devices", "default B", "opt-in B", "smem/SM B",
                                   "deviating from the majority"), disable_numparse=True)


def _fmt(value: Any, tie: bool = False) -> str:
    if tie:
        return "tie"
    return "-" if value is None else str(value)
