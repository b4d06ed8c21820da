"""Each quantity declared once, as prometheus_client declares a metric, and a device report as flat, named
quantities: what baselines and fleet merges compare exactly.

A declaration (``Quantity``) says a quantity's name (its key in the report's JSON), its unit, the values a
device can have (the one plausibility rule every reader, the schema and fit apply), the lowest level that
measures it, whether a baseline compares it, and its Prometheus help and NFD label where it is exported.
The baseline comparison, the read-back bounds (core/plausible.py), the JSON Schema's bounds, the
Prometheus families and the NFD labels are read from ``declared()``; no other module lists the names.
The records of many values (the staircase, the march) are declared the same way, in core/records.py.

Times, probe counts and other figures that vary from run to run are left out on purpose. The quantities
are read from the device's JSON form, so a DeviceReport (through ``to_jsonable``) and a report file
parsed by ``merge`` go through the same lines and cannot disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bisect_smem.core.attributes import SOURCE_KEYS
from bisect_smem.core.bounds import BYTES, MAX_SMS, OPTIN_BYTES, SOME_BYTES, Bounds
from bisect_smem.core.frozen import frozen
from bisect_smem.core.jsonable import to_jsonable
from bisect_smem.core.levels import FULL_PREFIX, LEVELS, REFERENCE_SPLIT_PREFIX, level_rank
from bisect_smem.core.model import DeviceReport, Measured
from bisect_smem.core.records import Filled, declared_records

MEASURED_FIELDS = frozenset(f.name for f in dataclasses.fields(Measured))  # a quantity without one is in .quantities


@frozen
class Quantity:
    """One quantity of a device, declared once: ``name`` is its key under ``measured`` (or under each
    source of ``reported``) in the report's JSON, ``bounds`` the values a device can have (inclusive),
    ``help`` its Prometheus HELP (None: not exported), ``nfd`` its node label (the node's minimum)."""

    name: str
    unit: str
    bounds: Bounds
    part: str = "measured"  # "measured" or "reported"
    level: str = "standard"  # the lowest level that measures it
    compared: bool = True  # a baseline compares it, to the byte
    help: str | None = None
    nfd: str | None = None
    at_least: str | None = None  # a measured quantity it can never be below (the opt-in above the default)

    def __post_init__(self) -> None:
        if self.part not in ("measured", "reported"):
            raise ValueError(f"part must be measured or reported (got {self.part!r})")
        if not self.bounds[0] <= self.bounds[1]:
            raise ValueError(f"bounds of {self.name} are empty: {self.bounds}")
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)} (got {self.level!r})")

    @property
    def key(self) -> str:
        """Its name among the comparable quantities (``measured.optin_dynamic_ceiling_bytes``)."""
        return f"{self.part}.{self.name}"

    def of(self, measured: Measured | dict[str, Any] | None) -> Any:
        """Its value in a Measured or its JSON form (None where not measured): a field of Measured, or else an
        entry of its ``quantities``, where a quantity declared without a field of its own lives."""
        if measured is None:
            return None
        if isinstance(measured, Measured):
            return getattr(measured, self.name) if self.name in MEASURED_FIELDS else measured.quantities.get(self.name)
        if self.name in MEASURED_FIELDS:
            return measured.get(self.name)
        more = measured.get("quantities")
        return more.get(self.name) if isinstance(more, dict) else None

    def filled(self, value: int | None) -> Filled:
        """What a step measured of this quantity (None: not measured)."""
        return Filled(self, value)


_DECLARED: dict[str, Quantity] = {}


def declare(q: Quantity) -> Quantity:
    """Register ``q``; a second declaration of the same name is a ValueError."""
    if q.key in _DECLARED:
        raise ValueError(f"quantity {q.key} is declared twice")
    _DECLARED[q.key] = q
    return q


@contextmanager
def declared_for_now(q: Quantity) -> Iterator[Quantity]:
    """``q`` declared inside the block only (a test's own quantity)."""
    declare(q)
    try:
        yield q
    finally:
        del _DECLARED[q.key]


def declared(part: str | None = None) -> tuple[Quantity, ...]:
    """Every declared quantity (of ``part``), in the order declared."""
    return tuple(q for q in _DECLARED.values() if part is None or q.part == part)


def find(key: str) -> Quantity | None:
    """The declaration of ``measured.NAME`` or ``reported.NAME`` (or None)."""
    return _DECLARED.get(key)


def _reported(name: str, bounds: Bounds) -> Quantity:
    return declare(Quantity(name, "bytes" if name.endswith("_bytes") else "count", bounds, "reported", "quick"))


for _name, _bounds in (
        ("max_shared_memory_per_block_bytes", SOME_BYTES), ("max_shared_memory_per_block_optin_bytes", SOME_BYTES),
        ("max_shared_memory_per_multiprocessor_bytes", SOME_BYTES), ("reserved_shared_memory_per_block_bytes", BYTES),
        ("max_oversized_shared_memory_per_block_bytes", (0, 1 << 48)), ("multiprocessor_count", (1, MAX_SMS)),
        ("max_threads_per_multiprocessor", (1, 1 << 16)), ("max_blocks_per_multiprocessor", (1, 1 << 16)),
        ("compute_capability_major", (1, 99)), ("compute_capability_minor", (0, 99)), ("cluster_launch", (0, 1))):
    _reported(_name, _bounds)

# Declared in the order the exports list them.
OPTIN_CEILING = declare(Quantity(
    "optin_dynamic_ceiling_bytes", "bytes", OPTIN_BYTES, level="quick", nfd="smem.optin-bytes",
    at_least="default_dynamic_ceiling_bytes",
    help="Largest dynamic shared memory per block that launched and verified after opt-in (0 B static, 128 threads)."))
DEFAULT_CEILING = declare(Quantity(
    "default_dynamic_ceiling_bytes", "bytes", BYTES, level="quick", nfd="smem.default-bytes",
    help="Largest dynamic shared memory per block that launched and verified without opt-in."))
ATTRIBUTE_CEILING = declare(Quantity(
    "attribute_accept_ceiling_bytes", "bytes", BYTES, level="quick",
    help="Largest value cudaFuncSetAttribute(MaxDynamicSharedMemorySize) accepted."))
PER_SM = declare(Quantity(
    "smem_per_sm_bytes", "bytes", SOME_BYTES, nfd="smem.per-sm-bytes",
    help="Shared memory per SM, from the residency staircase."))
RESERVED = declare(Quantity(
    "reserved_bytes", "bytes", BYTES, level="quick",
    help="Shared memory the system reserves per block, read from the PTX registers."))
GRANULARITY = declare(Quantity(
    "allocation_granularity_bytes", "bytes", SOME_BYTES, level="quick",
    help="Unit in which shared memory is allocated to a block."))
# What cuOccupancyAvailableDynamicSMemPerBlock says on the never-raised function: a verdict row checks it,
# a baseline leaves it to that row.
DEFAULT_API = declare(Quantity("default_api_available_dynamic_bytes", "bytes", BYTES, level="quick", compared=False))

def quantity_level(name: str) -> str:
    """The lowest level that measures the quantity ``name`` (a key of quantities.quantities)."""
    quantity = find(name)
    if quantity is not None:
        return quantity.level
    if name.startswith("reported.") or name.startswith(REFERENCE_SPLIT_PREFIX):
        return "quick"
    if name.startswith(FULL_PREFIX):
        return "full"
    return "standard"


def at_level(values: dict[str, Any], level: str) -> dict[str, Any]:
    """The quantities a run at ``level`` measures: a missing one of these is still a difference."""
    rank = level_rank(level)
    return {name: value for name, value in values.items() if level_rank(quantity_level(name)) <= rank}


def quantities(dev: DeviceReport) -> dict[str, Any]:
    """Every comparable quantity of one device, by a stable name."""
    return json_quantities(to_jsonable(dev))


def json_quantities(dev: dict[str, Any]) -> dict[str, Any]:
    """``quantities`` of a device in its report's JSON form (schema-checked): each source's attributes, each
    declared quantity, then each declared record's quantities (``Record.quantities``)."""
    q: dict[str, Any] = {}
    for source, view in sorted(dev.get("reported", {}).items()):
        if view is None:
            continue  # a source that was never read
        # A source's known attributes are its fields, null or not; what else a file holds is read too.
        for key in sorted({*SOURCE_KEYS.get(source, ()), *view}):
            q[f"reported.{source}.{key}"] = view.get(key)
    m = dev.get("measured")
    if m is None:
        return q
    for quantity in declared("measured"):
        if quantity.compared:
            q[quantity.key] = quantity.of(m)
    for record in declared_records():
        q.update(record.quantities(m.get(record.name)))
    return q


@frozen
class Regression:
    """One quantity against its baseline: the same on both sides, to the byte, or a regression. A
    quantity only one side has is a difference too, never a silent pass (``in_baseline``, ``measured_now``
    say which side has it)."""

    name: str
    baseline: Any = None
    now: Any = None
    in_baseline: bool = True
    measured_now: bool = True

    @property
    def fails(self) -> bool:
        """The quantity is missing on a side or differs."""
        return not (self.in_baseline and self.measured_now) or self.baseline != self.now

    @classmethod
    def between(cls, name: str, current: dict[str, Any], baseline: dict[str, Any]) -> Regression:
        """Quantity ``name`` of this run against the baseline's."""
        return cls(name, baseline.get(name), current.get(name), name in baseline, name in current)


def compare_quantities(current: dict[str, Any], baseline: dict[str, Any]) -> list[Regression]:
    """Every quantity named on either side against the other side: what only one side has is compared too."""
    return [Regression.between(name, current, baseline) for name in sorted(set(current) | set(baseline))]
