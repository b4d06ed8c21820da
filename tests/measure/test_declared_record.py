"""Each record of Measured is declared once (core/records.py), as each quantity is: the values every reader
accepts, the bounds the published schema states and the quantities a baseline compares are all read from
that one declaration. A declaration replaced in the test alone moves all of them; every declared bound
reaches the schema and the read-back check."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.app.outputs.schemas import report_schema
from bisect_smem.core.errors import BaselineError
from bisect_smem.core.quantities import json_quantities
from bisect_smem.core.records import (
    RESIDENCY,
    Held,
    Record,
    declare_record,
    declared_records,
    replaced_for_now,
    schema_bounds,
)
from bisect_smem.core.saved import load_report
from tests.paths import H200_FULL


def _with_parts(records: tuple[Record, ...], path: str = "measured") -> Iterator[tuple[str, Record]]:
    """Every declared record and the records nested in it, each with its path under the device."""
    for record in records:
        yield f"{path}.{record.name}", record
        yield from _with_parts(record.parts, f"{path}.{record.name}[]")


BOUNDED = [(path, record, name) for path, record in _with_parts(declared_records()) for name in record.bounds]


def _integers(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every integer a property's schema admits: itself, its anyOf branches, an array's items."""
    if schema.get("type") == "integer":
        yield schema
    for branch in (*schema.get("anyOf", ()), *schema.get("prefixItems", ())):
        yield from _integers(branch)
    if isinstance(schema.get("items"), dict):
        yield from _integers(schema["items"])


@pytest.mark.parametrize(("path", "record", "name"), BOUNDED, ids=[f"{p}.{n}" for p, _r, n in BOUNDED])
def test_each_declared_bound_is_in_the_schema(path: str, record: Record, name: str) -> None:
    if record.item is None:
        assert f"{record.name}.{name}" not in schema_bounds()  # a plain object has no $defs entry to bound
        return
    prop = report_schema()["$defs"][record.item.__name__]["properties"][name]
    integers = list(_integers(prop))
    assert integers, f"{path}.{name} admits no integer"
    assert {(s["minimum"], s["maximum"]) for s in integers} == {record.bounds[name]}, f"{path}.{name}"


def _targets(path: str, record: Record, device: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of the record at ``path`` in a device's JSON; an empty list gets one item of its required
    fields (nothing failed the march), each at its lower bound."""
    parent, _, name = path.rpartition(".")
    found: list[dict[str, Any]] = []
    for container in _containers(device, parent):
        value = container.get(name)
        if record.held is Held.ONE:
            found.append(value)
        elif record.held is Held.BY_NAME:
            found.extend(value.values())
        else:
            if not value:
                required = [f.name for f in dataclasses.fields(record.item)
                            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
                value.append({f: record.bounds[f][0] for f in required})
            found.append(value[-1])  # the last: the first static split is the reference split, held to opt-in
    return found


def _containers(device: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The objects that hold the record at ``path`` + ``.name``: the measured part, or each item above."""
    nodes: list[Any] = [device]
    for step in path.split("."):
        key = step.removesuffix("[]")
        nodes = [n[key] for n in nodes]
        if step.endswith("[]"):
            nodes = [item for n in nodes for item in (n if isinstance(n, list) else [n])]
    return nodes


@pytest.mark.parametrize(("path", "record", "name"), BOUNDED, ids=[f"{p}.{n}" for p, _r, n in BOUNDED])
@pytest.mark.parametrize("side", ["below", "above"])
def test_each_declared_bound_is_the_read_back_rule(path: str, record: Record, name: str, side: str,
                                                   tmp_path: Path) -> None:
    low, high = record.bounds[name]
    wrong = low - 1 if side == "below" else high + 1
    report = json.loads(H200_FULL.read_text())
    item = _targets(path, record, report["devices"][0])[0]
    if isinstance(item.get(name), list):  # a list of integers: its first one wrong, its length kept
        item[name] = [wrong, *item[name][1:]]
    else:
        item[name] = wrong
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(report))
    with pytest.raises(BaselineError, match=rf"\.{re.escape(name)}(\[0\])? must be an integer in "
                                            rf"{low}\.\.{high} \(got {wrong}\)"):
        load_report(bad)


def test_a_replaced_declaration_moves_its_keys_and_its_bounds(tmp_path: Path) -> None:
    device = json.loads(H200_FULL.read_text())["devices"][0]
    assert any(k.startswith("measured.residency.") for k in json_quantities(device))
    steps = device["measured"]["residency"]
    staircase = dataclasses.replace(RESIDENCY, bounds={**RESIDENCY.bounds, "threads": (1, 64)},
                                    key=lambda r: f"measured.staircase.threads={r['threads']}.from={r['dynamic_bytes']}")
    first_wide = next(i for i, r in enumerate(steps) if r["threads"] > 64)
    with replaced_for_now(staircase):
        keys = json_quantities(device)
        assert not any(k.startswith("measured.residency.") for k in keys)
        last = steps[-1]
        assert keys[f"measured.staircase.threads={last['threads']}.from={last['dynamic_bytes']}.blocks_per_sm_max"] \
            == last["blocks_per_sm_max"]
        with pytest.raises(BaselineError, match=rf"measured\.residency\[{first_wide}\]\.threads must be an integer in "
                                                rf"1\.\.64 \(got {steps[first_wide]['threads']}\)"):
            load_report(H200_FULL)
    assert any(k.startswith("measured.residency.") for k in json_quantities(device))
    load_report(H200_FULL)  # the declaration is back


def test_each_record_gives_its_quantities_for_each_item() -> None:
    device = json.loads(H200_FULL.read_text())["devices"][0]
    measured, keys = device["measured"], json_quantities(device)
    for record in declared_records():
        if record.key is None:
            continue
        mine = record.quantities(measured.get(record.name))
        assert mine and all(keys[k] == v for k, v in mine.items()), record.name
        items = 1 if record.held is Held.ONE else len(measured[record.name])
        per_item = len(record.compared) + (sum(1 for _ in record.more(measured[record.name][0])) if record.more else 0)
        assert len(mine) == items * per_item, record.name


def test_a_record_is_declared_once() -> None:
    with pytest.raises(ValueError, match="record residency is declared twice"):
        declare_record(Record("residency"))
