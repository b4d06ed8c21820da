"""Each record of a device's Measured declared once, as each quantity is (core/quantities.py): a record is a
part that holds many values (the static splits, the residency staircase, the march), not one number.

A declaration (``Record``) says its field of Measured, the dataclass of its items and how Measured holds
them (a tuple, one item, or items by name), the values each integer field can have, the records nested in
an item, and the comparable quantities an item gives: the prefix of their names and each one's value. The
read-back bounds (core/plausible.py), the JSON Schema's bounds (``schema_bounds``) and the quantities a
baseline compares (core/quantities.py's ``json_quantities``) are read from ``declared_records()``; no other
module lists a record's fields.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import field
from typing import Any, Protocol

from bisect_smem.core.bounds import BYTES, COUNT, MAX_SMS, MAX_WORDS, SM_ID, SOME_BYTES, THREADS, WORD, Bounds
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import NONPORTABLE_CLUSTER_SIZE, STATIC_SMEM_COMPILE_CAP_BYTES
from bisect_smem.core.integrity import GranuleSweep, Leftovers, MarchResult, SmMarch
from bisect_smem.core.levels import FULL_PREFIX, split_quantity_prefix
from bisect_smem.core.model import CarveoutPoint, Ceiling, ClusterMeasurement, ResidencyStep, StaticSplit

Item = dict[str, Any]  # one item in its JSON form
Value = str | Callable[[Item], Any]  # a field of the item, or what is computed from it


class Held(enum.StrEnum):
    """How Measured holds a record's items."""

    EACH = "each"  # a tuple of items
    ONE = "one"  # one item, or None where not measured
    BY_NAME = "by_name"  # a dict of items by name


@frozen
class Names:
    """The names a record held by name may use, and how a refusal says so (``a cluster size (1..16)``)."""

    pattern: re.Pattern[str]
    high: int
    what: str

    def allows(self, name: str) -> bool:
        """``name`` matches and is at most ``high``."""
        return bool(self.pattern.fullmatch(name)) and int(name) <= self.high


@frozen
class Record:
    """One record of Measured, declared once. ``bounds`` holds the values each integer field of an item can
    have (inclusive; for a list field, each of its integers); ``key`` names an item's comparable
    quantities (a function of the item, or the fixed prefix of a record held as ONE); ``compared`` gives
    each quantity's name after the prefix ("" is the prefix itself) and its value; ``more`` adds
    quantities computed from an item; ``parts`` are records nested in each item; ``adds`` says the values
    of several steps add up (the static splits) rather than one step filling it."""

    name: str
    item: type | None = None  # the dataclass of one item (None: a plain object)
    held: Held = Held.EACH
    bounds: Mapping[str, Bounds] = field(default_factory=dict)
    key: Callable[[Item], str] | str | None = None
    compared: Mapping[str, Value] = field(default_factory=dict)
    more: Callable[[Item], Iterator[tuple[str, Any]]] | None = None
    parts: tuple[Record, ...] = ()
    names: Names | None = None
    adds: bool = False

    def __post_init__(self) -> None:
        known = {f.name for f in dataclasses.fields(self.item)} if self.item is not None else None
        for name in (*self.bounds, *(v for v in self.compared.values() if isinstance(v, str))):
            if known is not None and name not in known:
                raise ValueError(f"record {self.name} names {name}, which {self.item.__name__} does not have")
        if (self.held is Held.ONE) != isinstance(self.key, str) and self.key is not None:
            raise ValueError(f"record {self.name}: a fixed key prefix is for a record held as one item")

    def filled(self, value: Any) -> Filled:
        """What a step measured of this record."""
        return Filled(self, value)

    def items(self, value: Any, where: str) -> Iterator[tuple[str, Any, str | None]]:
        """Each item of the record's JSON value with its path and its name (None unless held by name);
        a value of the wrong shape gives none (the shape check reports it)."""
        if self.held is Held.EACH:
            for i, item in enumerate(value if isinstance(value, list) else ()):
                yield f"{where}[{i}]", item, None
        elif self.held is Held.ONE:
            if isinstance(value, dict):
                yield where, value, None
        elif isinstance(value, dict):
            for name, item in value.items():
                yield f"{where}.{name}", item, name

    def quantities(self, value: Any) -> dict[str, Any]:
        """The comparable quantities of the record's JSON value (schema-checked), by name: a field the item's
        dataclass requires is indexed, one it defaults is read with ``get``."""
        if self.key is None:
            return {}
        if isinstance(self.key, str):
            item = value or None
            return {_joined(self.key, suffix): self._value(item, how) if item else None
                    for suffix, how in self.compared.items()}
        out: dict[str, Any] = {}
        for item in value or ():
            prefix = self.key(item)
            for suffix, how in self.compared.items():
                out[_joined(prefix, suffix)] = self._value(item, how)
            for suffix, computed in self.more(item) if self.more is not None else ():
                out[_joined(prefix, suffix)] = computed
        return out

    def _value(self, item: Item, how: Value) -> Any:
        if callable(how):
            return how(item)
        return item[how] if how in _required(self.item) else item.get(how)


class Declared(Protocol):
    """A declaration a step's value fills: a core.quantities.Quantity or a Record, by its field's name."""

    @property
    def name(self) -> str:
        """Its field of Measured (or its key under ``quantities``)."""
        ...


@frozen
class Filled:
    """A value a step hands over: the declared quantity or record it fills, and the value."""

    what: Declared
    value: Any


def _joined(prefix: str, suffix: str) -> str:
    return f"{prefix}.{suffix}" if suffix else prefix


@functools.cache
def _required(cls: type | None) -> frozenset[str]:
    """The fields of dataclass ``cls`` without a default."""
    if cls is None:
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(cls)
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


_DECLARED: dict[str, Record] = {}


def declare_record(record: Record) -> Record:
    """Register ``record``; a second declaration of the same field is a ValueError."""
    if record.name in _DECLARED:
        raise ValueError(f"record {record.name} is declared twice")
    _DECLARED[record.name] = record
    return record


@contextmanager
def replaced_for_now(record: Record) -> Iterator[Record]:
    """``record`` declared instead of the record of the same field inside the block only (a test's own)."""
    original = _DECLARED[record.name]
    _DECLARED[record.name] = record
    try:
        yield record
    finally:
        _DECLARED[record.name] = original


def declared_records() -> tuple[Record, ...]:
    """Every declared record, in the order declared (the order its quantities and checks come in)."""
    return tuple(_DECLARED.values())


def _every(record: Record) -> Iterator[Record]:
    yield record
    for part in record.parts:
        yield from _every(part)


def schema_bounds() -> dict[str, dict[str, int]]:
    """The JSON Schema keywords of every bounded field of a declared record's dataclass, by
    ``Class.field``: a report's schema states the values every reader accepts."""
    return {f"{r.item.__name__}.{name}": {"minimum": low, "maximum": high}
            for top in declared_records() for r in _every(top) if r.item is not None
            for name, (low, high) in r.bounds.items()}


def _active_clusters(cluster: Item) -> Iterator[tuple[str, Any]]:
    """Co-resident clusters of each size, measured and as the API predicts, in order of size."""
    for size, counts in sorted(cluster.get("active_clusters", {}).items(), key=lambda kv: int(kv[0])):
        yield f"active_clusters.size={size}", counts.get("measured")
        yield f"active_clusters.size={size}.api", counts.get("api")


# Declared in the order their quantities are listed and their values checked.
STATIC_SPLITS = declare_record(Record(
    "static_splits", StaticSplit, adds=True,
    bounds={"static_bytes": (0, STATIC_SMEM_COMPILE_CAP_BYTES), "threads": THREADS, "dynamic_ceiling_bytes": BYTES,
            "probes": COUNT, "static_footprint_bytes": BYTES, "api_available_dynamic_bytes": BYTES},
    key=lambda s: split_quantity_prefix(s["static_bytes"], s["threads"]),
    compared={"dynamic_ceiling_bytes": "dynamic_ceiling_bytes", "static_footprint_bytes": "static_footprint_bytes"}))
RESIDENCY = declare_record(Record(
    "residency", ResidencyStep,
    bounds={"dynamic_bytes": BYTES, "threads": THREADS, "blocks_per_sm_min": COUNT, "blocks_per_sm_max": COUNT,
            "api_blocks_per_sm": COUNT, "formula_blocks_per_sm": COUNT},
    key=lambda r: f"measured.residency.threads={r['threads']}.blocks={r['blocks_per_sm_min']}",
    compared={"from_dynamic_bytes": "dynamic_bytes", "blocks_per_sm_max": "blocks_per_sm_max",
              "api_blocks_per_sm": "api_blocks_per_sm"}))
CARVEOUT = declare_record(Record(
    "carveout", CarveoutPoint,
    bounds={"percent": (-1, 100), "blocks_per_sm": COUNT, "api_blocks_per_sm": COUNT, "carveout_bytes": BYTES,
            "carveout_range_bytes": BYTES},
    key=lambda c: f"measured.carveout.percent={c['percent']}",
    compared={"blocks_per_sm": "blocks_per_sm", "api_blocks_per_sm": "api_blocks_per_sm",
              "carveout_range_bytes": "carveout_range_bytes"}))
ACTIVE_CLUSTERS = Record(
    "active_clusters", held=Held.BY_NAME, bounds={"measured": COUNT, "api": COUNT},
    names=Names(re.compile(r"[1-9][0-9]?"), NONPORTABLE_CLUSTER_SIZE,
                f"a cluster size (1..{NONPORTABLE_CLUSTER_SIZE})"))
CLUSTERS = declare_record(Record(
    "clusters", ClusterMeasurement,
    bounds={"dynamic_bytes": BYTES, "max_cluster_size_portable": (0, NONPORTABLE_CLUSTER_SIZE),
            "max_cluster_size_nonportable": (0, NONPORTABLE_CLUSTER_SIZE), "api_max_cluster_size": COUNT},
    key=lambda c: f"measured.cluster.dynamic={c['dynamic_bytes']}",
    compared={name: name for name in ("max_cluster_size_portable", "max_cluster_size_nonportable",
                                      "api_max_cluster_size", "dsm_verified")},
    more=_active_clusters, parts=(ACTIVE_CLUSTERS,)))
# Merge leaves the searches unread; a baseline compares the ceilings they found, not how.
SEARCHES = declare_record(Record(
    "searches", Ceiling, held=Held.BY_NAME,
    bounds={"ceiling_bytes": BYTES, "probes": COUNT, "probe_bound": COUNT, "rounds": COUNT,
            "api_available_dynamic_bytes": BYTES}))
MARCH_FAILURES = Record(
    "failures", SmMarch,
    bounds={"sm_id": SM_ID, "bytes_tested": BYTES, "reads_checked": (0, MAX_WORDS), "bad_reads": (0, MAX_WORDS),
            "first_bad_byte": BYTES, "expected_word": WORD, "read_word": WORD, "pattern": (0, 36), "element": (0, 3)})
# Counts of words and launches vary from run to run: the validation compares which SMs ran and failed,
# which sizes failed, and what was visible.
MARCH = declare_record(Record(
    "march", MarchResult, held=Held.ONE,
    bounds={"dynamic_bytes": BYTES, "threads": THREADS, "sm_count": (1, MAX_SMS), "launches": COUNT,
            "sms_seen": SM_ID},
    key=f"{FULL_PREFIX}march",
    compared={"sms_covered": lambda m: len(m.get("sms_seen", ())),
              "failed_sms": lambda m: [f["sm_id"] for f in m.get("failures", ())]},
    parts=(MARCH_FAILURES,)))
GRANULE_SWEEP = declare_record(Record(
    "granule_sweep", GranuleSweep, held=Held.ONE,
    bounds={"granule_bytes": SOME_BYTES, "ceiling_bytes": BYTES, "sizes_tested": COUNT, "failing_bytes": BYTES},
    key=f"{FULL_PREFIX}granule_sweep",
    compared={"failing_bytes": lambda s: list(s.get("failing_bytes", ())),
              "over_ceiling_failed": lambda s: s.get("over_ceiling_failed")}))
LEFTOVERS = declare_record(Record(
    "leftovers", Leftovers, held=Held.ONE,
    bounds={"dynamic_bytes": BYTES, "writer_sms": (0, MAX_SMS), "reader_sms": (0, MAX_SMS),
            **{f"{w}_words_{k}": (0, MAX_WORDS) for w in ("within_process", "across_processes")
               for k in ("read", "matching")}},
    key=f"{FULL_PREFIX}leftovers",
    compared={"across_processes_visible": lambda left: left["across_processes_words_matching"] > 0,
              "within_process_visible": lambda left: left["within_process_words_matching"] > 0}))
# Parts of Measured that steps fill but that hold no bounded values and give no quantities of their own.
CLUSTERS_SKIPPED = declare_record(Record("clusters_skipped"))
REGISTERS = declare_record(Record("registers_at_ceiling"))
