"""Many hosts' reports in one table: per GPU model, driver and backend, the measured values and who deviates.

A device deviates when any of its quantities differs from the majority of its group (same GPU model,
same driver version, same backend: --backend all measures a GPU once per backend, and numba measures no
carveout); a quantity whose most common values are equally common is a tie: reported, with no majority
and nobody blamed. Devices are labelled by the report's path as given and the device index
(``reports/node-a.json:0``, and the backend where the report lists the index more than once:
``all.json:0 (numba)``), so files of the same name in different folders stay apart; the same file
given twice (by any path or hard link) is refused. As --compare does, a group whose devices were measured
at different levels is compared on the quantities of the lowest of them.

Reports are read one at a time and reduced to their quantities, each distinct set stored once, so
memory stays flat however many reports are merged; with more than a few files they are read by a
pool of processes, in chunks. Only what merge compares is read and shape-checked (core/schema.py with
the unread fields skipped), straight from the parsed JSON (core/quantities.py, the same lines as for a
DeviceReport), and a device whose compared content is, byte for byte, that of a device read before it
in the chunk is checked and reduced once. orjson parses when installed; the standard parser wherever
orjson could read differently (NaN, integers beyond 64 bits) or finds an error, so the result is the same;
values no device can have are refused as everywhere a report is read (core/plausible.py).
"""

from __future__ import annotations

import gc
import os
import pickle
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import field
from pathlib import Path
from typing import Any

from bisect_smem.core import plausible
from bisect_smem.core.errors import BaselineError, UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.levels import DEFAULT_LEVEL, level_rank
from bisect_smem.core.model import REPORT_SCHEMA, DeviceReport, Report
from bisect_smem.core.quantities import at_level, json_quantities
from bisect_smem.core.saved import read_bytes, read_json, schema_of
from bisect_smem.core.schema import SchemaError, check

try:  # the optional extra "fast": the same values, parsed several times faster
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised by monkeypatching _orjson away
    _orjson = None

MISSING = "missing"  # how a quantity one device lacks is shown beside the others' values
# What merge never reads, so neither checks: half of a report is verdicts, and run-to-run figures vary.
_MEASURED_UNREAD = frozenset({"searches", "probes", "timings_s", "registers_at_ceiling"})
DEVICE_UNREAD = frozenset({"verdicts", "events", *(f"measured.{name}" for name in _MEASURED_UNREAD)})
UNREAD = frozenset({"host_context", *(f"devices.{name}" for name in DEVICE_UNREAD)})
# The report without the devices' quantities, which are checked once per distinct content (_device_items).
_FRAME = UNREAD | {"devices.reported", "devices.measured"}
_POOL_FROM_FILES = 32
_CHUNK_FILES = 16  # reports per task of the pool: few round trips, and the pickle shares repeated values
_SCALARS = (int, str, type(None))
_EXACT_FLOAT = 2.0 ** 63  # orjson parses an integer beyond 64 bits as a float at least this large


class _Inexact(Exception):
    """A value orjson may have parsed differently from the standard parser (an integer beyond 64 bits)."""


def _checked(path: Path, data: Any, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``data`` after the shape check of the fields not in ``skip``."""
    schema_of(data, (REPORT_SCHEMA,), str(path))
    try:
        check(data, Report, skip=skip)
        plausible.check_report(data, devices=False)
    except SchemaError as exc:
        raise SchemaError(f"{path}: {exc}") from None
    return data


DeviceRow = tuple[str, str, str, str, str | None, tuple[tuple[str, Any], ...], str | None, str]


@frozen
class Unmeasured:
    """A report that lists no device: a node that found no GPU, or stopped before it measured one."""

    path: str  # as given
    no_gpu: bool  # the report says no GPU was usable (result no_gpu, exit code 3)
    why: str  # the report's error, else its result


@frozen
class Unreadable:
    """A report merge could not read, or one that breaks a rule every reader applies: a row of its own, so
    that one bad host never stops the merge of the rest of the fleet."""

    path: str  # as given
    why: str  # the reader's one line, without the path


Row = DeviceRow | Unmeasured | Unreadable


def rows_or_unreadable(path: str, interned: dict[Any, Any] | None = None) -> list[Row]:
    """``device_rows`` of one report, or one ``Unreadable`` saying why it could not be read."""
    try:
        return list(device_rows(path, interned))
    except (BaselineError, UsageError) as exc:
        text = str(exc)
        return [Unreadable(path, text[len(path) + 2:] if text.startswith(f"{path}: ") else text)]


def device_rows(path: str, interned: dict[Any, Any] | None = None) -> list[DeviceRow | Unmeasured]:
    """(label, host, model, driver, error, quantities, level, backend) per device of one report: what merge
    keeps (the level None where the device was not measured); for a report without devices, one ``Unmeasured``
    saying why. Equal quantity tuples are one object through ``interned``, so a pickle of many rows holds
    each once."""
    interned = {} if interned is None else interned
    if _orjson is not None:
        try:
            return _rows_of(path, _orjson.loads(read_bytes(Path(path), (REPORT_SCHEMA,))), interned, exact=False)
        except (_orjson.JSONDecodeError, BaselineError, _Inexact):
            pass  # the standard parser decides: it reads NaN, UTF-16 and integers beyond 64 bits, and words errors
    return _rows_of(path, read_json(Path(path), (REPORT_SCHEMA,)), interned, exact=True)


def _rows_of(path: str, data: Any, table: dict[Any, Any], exact: bool) -> list[DeviceRow | Unmeasured]:
    data = _checked(Path(path), data, skip=_FRAME)
    if not data["devices"]:
        no_gpu = data.get("result") == "no_gpu" or data.get("exit_code") == 3
        why = data.get("error") or (f"result {data['result']}" if data.get("result") else "the report lists no device")
        return [Unmeasured(path, no_gpu, str(why))]
    rows: list[DeviceRow | Unmeasured] = []
    # --backend all lists a GPU once per backend under one index: there the label names the backend.
    listed = Counter(dev["index"] for dev in data["devices"])
    for i, dev in enumerate(data["devices"]):
        try:
            items = _device_items(path, i, dev, table, exact)
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            raise BaselineError(f"{path}: not a readable bisect_smem report ({exc})") from None
        driver = _hashable(dev.get("context", {}).get("nvml_driver_version"), exact)
        measured = dev.get("measured")
        level = measured.get("level", DEFAULT_LEVEL) if isinstance(measured, dict) else None
        backend = str(dev.get("backend", "unknown"))
        label = f"{path}:{dev['index']}" + (f" ({backend})" if listed[dev["index"]] > 1 else "")
        rows.append((label, data["host"], dev.get("name") or "unknown", str(driver or "unknown-driver"),
                     dev.get("error"), items, level, backend))
    return rows


def _device_items(path: str, i: int, dev: dict[str, Any], table: dict[Any, Any],
                  exact: bool) -> tuple[tuple[str, Any], ...]:
    """The device's quantities, checked and reduced once per distinct ``reported`` and read ``measured``
    content in ``table``: the fleet's devices mostly hold the same. The key is their serialised form,
    which tells 1 from 1.0 and true where Python's ``==`` does not (orjson's text for what orjson parsed;
    a pickle, five times faster than JSON text, for what may hold NaN or integers beyond 64 bits)."""
    measured = dev.get("measured")
    if isinstance(measured, dict):
        measured = {k: v for k, v in measured.items() if k not in _MEASURED_UNREAD}
    read = [dev.get("reported"), measured]
    key = pickle.dumps(read, protocol=5) if exact else _orjson.dumps(read)
    found = table.get(key)
    if found is None:
        try:
            check(dev, DeviceReport, where=f"devices[{i}]", skip=DEVICE_UNREAD)
            plausible.check_report_device(dev, i)
        except SchemaError as exc:
            raise SchemaError(f"{path}: {exc}") from None
        found = table[key] = _intern(tuple((name, value if type(value) in _SCALARS else _hashable(value, exact))
                                           for name, value in json_quantities(dev).items()), table)
    return found


def _intern(items: tuple[tuple[str, Any], ...], table: dict[Any, Any]) -> tuple[tuple[str, Any], ...]:
    """The one object in ``table`` equal to ``items``; a new one shares its (name, value) pairs with the
    tuples before it, so devices that differ in one value cost one pair, in memory and in a pickle."""
    found = table.get(items)
    if found is None:
        found = tuple(table.setdefault(pair, pair) for pair in items)
        table[found] = found
    return found


def _chunk_rows(paths: list[str]) -> list[Row]:
    """``rows_or_unreadable`` of several reports, sharing one table of interned quantities."""
    interned: dict[Any, Any] = {}
    return [row for path in paths for row in rows_or_unreadable(path, interned)]


def _hashable(value: Any, exact: bool = True) -> Any:
    """``value`` as a hashable key; with ``exact`` False, _Inexact for a float orjson may have made."""
    if type(value) in _SCALARS:
        return value
    if type(value) is float:
        if not exact and not abs(value) < _EXACT_FLOAT:
            raise _Inexact(value)
        return value
    if isinstance(value, list):
        return tuple(_hashable(v, exact) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v, exact)) for k, v in value.items()))
    if isinstance(value, bool):
        return ("bool", value)  # True == 1 to Python; not to a report
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "bool":
        return value[1]
    return list(map(_plain, value)) if isinstance(value, tuple) else value


@frozen
class Member:
    """One device of the fleet: its label, host, error and the level it was measured at (None: not measured)."""
    label: str  # "<report path as given>:<device index>"
    host: str
    error: str | None
    level: str | None = None


@frozen
class Deviation:
    """A quantity where a device differs from its group's majority (``MISSING`` where the device lacks it)."""

    name: str
    value: Any
    majority: Any


@frozen
class Group:
    """The devices of one GPU model, driver and backend, their majority values, deviations and ties."""
    model: str
    driver: str
    members: tuple[Member, ...]
    majority: dict[str, Any]
    deviations: dict[str, tuple[Deviation, ...]]  # by member label: those with an error or a deviation
    ties: dict[str, list[Any]] = field(default_factory=dict)  # quantity -> the equally common values
    level: str = DEFAULT_LEVEL  # the lowest level its measured devices reached: what is compared
    backend: str = "unknown"  # what measured them: backends measure different quantities (numba no carveout)
    # by member label: the quantities its report holds as null (its run did not measure them), as --compare
    # says "not measured": neither a deviation nor a vote
    not_measured: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def levels(self) -> dict[str, int]:
        """How many of its devices were measured at each level, where they differ (else empty)."""
        counts = Counter(m.level for m in self.members if m.level is not None)
        return dict(sorted(counts.items())) if len(counts) > 1 else {}


def refuse_duplicates(paths: list[str]) -> None:
    """The same file given twice (by any path or hard link: by device and inode) would count its devices
    twice. A path that cannot be looked at is left to the reader, which says why."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise BaselineError(f"{path} is the same file as {seen[key]}; give each report once")
        seen[key] = path


def _rows(paths: list[str], table: dict[Any, Any]) -> Iterator[Row]:
    """Every device's row, its quantities the one object in ``table`` equal to them (and each report
    without devices, and each that could not be read)."""
    if len(paths) < _POOL_FROM_FILES or (os.cpu_count() or 1) < 2:
        for path in paths:
            yield from rows_or_unreadable(path, table)
        return
    chunks = [paths[i:i + _CHUNK_FILES] for i in range(0, len(paths), _CHUNK_FILES)]
    # A parsed report is a tree (no cycles to collect), yet its tens of thousands of containers would set
    # off the cycle collector many times a report: a fifth of the parsing time.
    with ProcessPoolExecutor(max_workers=min(os.cpu_count() or 1, 8), initializer=gc.disable) as pool:
        for rows in pool.map(_chunk_rows, chunks):
            # equal quantities arrive as one object per chunk (interned there): look each up once
            canonical: dict[int, tuple[tuple[str, Any], ...]] = {}
            for row in rows:
                if isinstance(row, (Unmeasured, Unreadable)):
                    yield row
                    continue
                items = canonical.get(id(row[5]))
                if items is None:
                    items = canonical[id(row[5])] = _intern(row[5], table)
                yield (*row[:5], items, *row[6:])


def _unmeasured(quantities: dict[str, Any], name: str, incomplete: bool) -> bool:
    """A measured quantity the device's run did not measure: held as null, or, on a device whose run
    stopped with an error, absent (a reported one that is null is what the driver said, and is compared;
    a row a complete run lacks is a difference)."""
    if not name.startswith("measured."):
        return False
    return quantities[name] is None if name in quantities else incomplete


class _Collector:
    """One group's members, each holding one of the fleet's distinct quantity tuples: the majorities and
    deviations are worked out once per distinct tuple, weighted by how many devices hold it."""

    def __init__(self) -> None:
        self.members: list[Member] = []
        self.held: list[tuple[tuple[str, Any], ...]] = []  # interned: equal tuples are one object

    def add(self, member: Member, items: tuple[tuple[str, Any], ...]) -> None:
        self.members.append(member)
        self.held.append(items)

    def group(self, model: str, driver: str, backend: str) -> Group:
        weights = Counter(map(id, self.held))
        stopped = {id(items) for m, items in zip(self.members, self.held, strict=True) if m.error}
        # As --compare does, devices measured at different levels are compared on the lower one.
        level = min((m.level for m in self.members if m.level is not None), key=level_rank, default=DEFAULT_LEVEL)
        distinct: dict[int, dict[str, Any]] = {}  # in order of first holder
        for items in self.held:
            if id(items) not in distinct:
                distinct[id(items)] = at_level(dict(items), level)
        names = sorted({n for q in distinct.values() for n in q})
        majority: dict[str, Any] = {}
        ties: dict[str, list[Any]] = {}
        for name in names:
            counts: Counter[Any] = Counter()
            for key, q in distinct.items():
                if not _unmeasured(q, name, key in stopped):
                    counts[q.get(name, MISSING)] += weights[key]
            ranked = counts.most_common()
            if not ranked:
                continue  # measured by none of the group
            if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
                ties[name] = [_plain(v) for v, n in ranked if n == ranked[0][1]]
            else:
                majority[name] = ranked[0][0]
        diffs = {key: tuple(Deviation(n, _plain(q.get(n, MISSING)), _plain(v)) for n, v in majority.items()
                            if q.get(n, MISSING) != v and not _unmeasured(q, n, key in stopped))
                 for key, q in distinct.items()}
        lacking = {key: tuple(n for n in names if _unmeasured(q, n, key in stopped)) for key, q in distinct.items()}
        deviations: dict[str, tuple[Deviation, ...]] = {}
        not_measured: dict[str, tuple[str, ...]] = {}
        for member, items in zip(self.members, self.held, strict=True):
            if diffs[id(items)] or member.error:
                deviations[member.label] = diffs[id(items)]
            if lacking[id(items)]:
                not_measured[member.label] = lacking[id(items)]
        return Group(model, driver, tuple(self.members), {n: _plain(v) for n, v in majority.items()},
                     deviations, ties, level, backend, not_measured)


@frozen
class Fleet:
    """The merged reports: the groups of their devices, and the reports that list no device."""

    groups: list[Group]
    unmeasured: tuple[Unmeasured, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()  # reports that could not be read: rows of their own


def group_reports(paths: list[Path] | list[str]) -> Fleet:
    """Every device of every report, grouped by GPU model, driver and backend (a GPU that --backend all
    measured is in one group per backend, as each backend measures its own quantities), against its
    group's majority."""
    texts = [str(p) for p in paths]
    refuse_duplicates(texts)
    collectors: dict[tuple[str, str, str], _Collector] = defaultdict(_Collector)
    unmeasured: list[Unmeasured] = []
    unreadable: list[Unreadable] = []
    for row in _rows(texts, {}):
        if isinstance(row, Unmeasured):
            unmeasured.append(row)
            continue
        if isinstance(row, Unreadable):
            unreadable.append(row)
            continue
        label, host, model, driver, error, items, level, backend = row
        collectors[(model, driver, backend)].add(Member(label, host, error, level), items)
    return Fleet([c.group(*key) for key, c in sorted(collectors.items())], tuple(unmeasured), tuple(unreadable))
