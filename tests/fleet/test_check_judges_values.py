"""``check`` judges the numbers, not only the verdict rows: a report whose values, compared again by the rules a
run and a replay of the same file use, give a failing row its stored rows lack (a value edited after the rows
were made) is UNKNOWN, exit 2, naming the quantity. Checked against the replay itself: every single-field edit
of the committed H200 report that its replay does not pass is never read ``smem ok``."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.app.cli.check import check
from tests.paths import H200_REPORT

BASE = json.loads(H200_REPORT.read_text())
Path_ = tuple[str | int, ...]


def edited(path: Path_, value: int, tmp_path: Path) -> Path:
    doc = copy.deepcopy(BASE)
    target = doc["devices"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(doc))
    return out


def replayed(path: Path) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return cli.main(["--simulate", str(path), "--level", "quick", "--quiet"])


# The examples: each replays as MISMATCH, and each read "smem ok" before.
EXAMPLES = {
    "reserved 0": (("measured", "reserved_bytes"), 0, "reserved shared memory per block"),
    "default ceiling 3": (("measured", "default_dynamic_ceiling_bytes"), 3, "default dynamic ceiling"),
    "granularity 3": (("measured", "allocation_granularity_bytes"), 3, "granularity"),
    "the driver's opt-in 3": (("reported", "driver", "max_shared_memory_per_block_optin_bytes"), 3,
                              "max_shared_memory_per_block_optin"),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_edited_value_is_unknown_as_its_replay_fails(name: str, tmp_path: Path) -> None:
    path, value, quantity = EXAMPLES[name]
    report = edited(path, value, tmp_path)
    line = check(report, None)
    assert line.code == 2 and line.text.startswith(f"smem UNKNOWN: inconsistent report: {quantity}"), line
    assert len(line.text.encode()) <= 80
    assert replayed(report) != 0


def test_the_unedited_report_is_still_ok() -> None:
    assert check(H200_REPORT, None).code == 0


def _scalars(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, int]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _scalars(value, (*path, key))
    elif isinstance(node, int) and not isinstance(node, bool):
        yield path, node


def _single_field_edits() -> list[tuple[Path_, int]]:
    """Every integer of the device's reported sources, measured scalars and static splits, set to 0 and to 3:
    the edits a hand or a broken writer makes. A split's static bytes and threads name which split it is,
    not a value of it: an edit of those is a split the run never planned, left out here."""
    dev = BASE["devices"][0]
    leaves = [(("reported", *p), v) for p, v in _scalars(dev["reported"])]
    measured = {k: v for k, v in dev["measured"].items() if not isinstance(v, (list, dict))}
    leaves += [(("measured", *p), v) for p, v in _scalars(measured)]
    for i, split in enumerate(dev["measured"]["static_splits"]):
        values = {k: v for k, v in split.items() if k not in ("static_bytes", "threads")}
        leaves += [(("measured", "static_splits", i, *p), v) for p, v in _scalars(values)]
    return [(p, new) for p, v in leaves for new in (0, 3) if new != v]


def test_no_edit_that_its_replay_fails_reads_ok(tmp_path: Path) -> None:
    edits = _single_field_edits()
    wrongly_ok = []
    for path, value in edits:
        report = edited(path, value, tmp_path)
        if check(report, None).code == 0 and replayed(report) != 0:
            wrongly_ok.append((path, value))
    assert len(edits) > 100 and wrongly_ok == []
