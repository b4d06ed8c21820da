"""Values no device can have, refused where a report or baseline is read: an opt-in limit of -5, 0 or
2**70, a granularity of 0, a level "bogus", a cluster size "abc". The shape check (core/schema.py) has
made sure every field has its type; this says which values of that type can be true. Each refusal is a
SchemaError naming the field and the value, e.g. ``field devices[0].reported.driver.max_shared_memory_
per_block_optin_bytes must be in 1..16777216 (got -5)``.

The bounds are generous: they refuse what is impossible, not what is unusual.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from bisect_smem.core.bounds import MAX_COUNT, Bounds
from bisect_smem.core.errors import UsageError
from bisect_smem.core.levels import LEVELS, REFERENCE_THREADS, is_reference_split
from bisect_smem.core.profiles import parse_cc
from bisect_smem.core.quantities import OPTIN_CEILING, declared, find
from bisect_smem.core.records import Record, declared_records
from bisect_smem.core.schema import SchemaError

MAX_DRIVER_VERSION_CHARS = 64
# When a report can have been written: the metrics, the node labels' expiry (a week at most later) and the
# check's age are computed from it, and a time outside these years overflows or reads as never stale.
YEARS = (2000, 9000)


def _in(where: str, value: Any, bounds: Bounds) -> None:
    if value is None:
        return
    if type(value) is not int or not bounds[0] <= value <= bounds[1]:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise SchemaError(f"field {where} must be an integer in {bounds[0]}..{bounds[1]} (got {shown})")


def _fields(where: str, data: Any, table: Mapping[str, Bounds]) -> None:
    if isinstance(data, dict):
        for key, bounds in table.items():
            value = data.get(key)
            if isinstance(value, list):  # a list of integers: each within the bounds
                for i, each in enumerate(value):
                    _in(f"{where}.{key}[{i}]", each, bounds)
            else:
                _in(f"{where}.{key}", value, bounds)


def check_record(record: Record, value: Any, where: str) -> None:
    """Every item of one record's JSON value (at ``where``) against its declaration: the names it is held
    by, each bounded field, then the records nested in it."""
    for at, item, name in record.items(value, where):
        if name is not None and record.names is not None and not record.names.allows(name):
            raise SchemaError(f"field {where} has a key that is not {record.names.what}: {name[:40]!r}")
        _fields(at, item, record.bounds)
        for part in record.parts if isinstance(item, dict) else ():
            check_record(part, item.get(part.name), f"{at}.{part.name}")


def check_driver_version(where: str, version: Any) -> None:
    """A driver version is short text (``580.159.04``): a longer one is no version, and its digits would be
    read as integers when baselines are ordered by driver (Python refuses more than 4300 digits)."""
    if isinstance(version, str) and len(version) > MAX_DRIVER_VERSION_CHARS:
        raise SchemaError(f"field {where} must be at most {MAX_DRIVER_VERSION_CHARS} characters "
                          f"(got {len(version)}: {version[:20]!r}...)")


def check_level(where: str, level: Any) -> None:
    """A level must be one of LEVELS."""
    if level is not None and level not in LEVELS:
        raise SchemaError(f"field {where} must be one of {', '.join(LEVELS)} (got {level!r})")


def check_device(dev: dict[str, Any], where: str) -> None:
    """Every value of one device's JSON (shape-checked) that no device can have is a SchemaError."""
    _in(f"{where}.index", dev.get("index"), (0, MAX_COUNT))
    cc = dev.get("compute_capability")
    if cc is not None:
        try:
            parse_cc(cc)
        except UsageError:
            raise SchemaError(f"field {where}.compute_capability must be MAJOR.MINOR, like 9.0 (got {cc!r})") from None
    context = dev.get("context")
    if isinstance(context, dict):
        check_driver_version(f"{where}.context.nvml_driver_version", context.get("nvml_driver_version"))
    for source, view in (dev.get("reported") or {}).items():
        _fields(f"{where}.reported.{source}", view, {q.name: q.bounds for q in declared("reported")})
    if isinstance(dev.get("measured"), dict):
        check_measured(dev["measured"], f"{where}.measured")


def check_quantities(m: dict[str, Any], where: str) -> None:
    """Every declared measured quantity of ``m`` (a Measured's JSON form) against its declaration."""
    for q in declared("measured"):
        value = q.of(m)
        at = f"{where}.{q.name}" if q.name in m or value is None else f"{where}.quantities.{q.name}"
        _in(at, value, q.bounds)
        floor = find(f"measured.{q.at_least}") if q.at_least else None
        low = floor.of(m) if floor is not None else None
        if type(value) is int and type(low) is int and value < low:
            raise SchemaError(f"field {at} must be at least {floor.name if floor else ''} ({low}) (got {value})")


def check_reference_split(m: dict[str, Any], where: str) -> None:
    """The opt-in ceiling is the reference split's ceiling (one search gives both): a file where they differ,
    or where one is null, was edited or cut."""
    splits = m.get("static_splits")
    for split in splits if isinstance(splits, list) else ():
        if isinstance(split, dict) and is_reference_split(split.get("static_bytes"), split.get("threads")):
            optin, ceiling = OPTIN_CEILING.of(m), split.get("dynamic_ceiling_bytes")
            if optin != ceiling:
                raise SchemaError(f"field {where}.optin_dynamic_ceiling_bytes must be the ceiling of the reference "
                                  f"split, static_splits with 0 B static and {REFERENCE_THREADS} threads ({ceiling}) "
                                  f"(got {optin})")


def check_measured(m: dict[str, Any], where: str) -> None:
    """The measured part of a device's JSON: each declared quantity within its bounds and above the one it
    can never be below, the opt-in ceiling as its reference split says, then each declared record
    (core/records.py)."""
    check_quantities(m, where)
    check_reference_split(m, where)
    check_level(f"{where}.level", m.get("level"))
    for record in declared_records():
        check_record(record, m.get(record.name), f"{where}.{record.name}")


def check_report_device(dev: dict[str, Any], i: int) -> None:
    """Device ``i`` of a report's JSON; the refusal names the device by its index as well as the field."""
    try:
        check_device(dev, f"devices[{i}]")
    except SchemaError as exc:
        raise SchemaError(f"device {dev.get('index', i)}: {exc}") from None


def check_created(created: Any) -> None:
    """A report's ``created_utc`` must be an ISO 8601 time (without a zone: UTC) within ``YEARS``."""
    if not isinstance(created, str):
        return  # the shape check's
    try:
        year = dt.datetime.fromisoformat(created).year
    except ValueError:
        year = None
    if year is None or not YEARS[0] <= year <= YEARS[1]:
        shown = repr(created) if len(repr(created)) <= 40 else repr(created)[:37] + "..."
        raise SchemaError(f"field created_utc must be a time of the years {YEARS[0]} to {YEARS[1]}, "
                          f"like 2026-12-01T09:45:12+00:00 (got {shown})")


def check_report(data: Any, devices: bool = True) -> None:
    """A report's JSON (shape-checked): its time, its level and, with ``devices``, every device."""
    check_created(data.get("created_utc"))
    check_level("level", data.get("level"))
    if devices:
        for i, dev in enumerate(data.get("devices") or ()):
            check_report_device(dev, i)


