"""Verdict rows are data: every row names its family and parameters, its note is its notes joined, and
what a row's name says (threads, static bytes, dynamic bytes, cluster size, percent) its parameters hold."""

from __future__ import annotations

import json
import re

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.core.model import Report
from bisect_smem.core.profiles import PROFILES
from bisect_smem.core.rows import Family, Note, NoteKind, Verdict, join_notes
from bisect_smem.core.schema import build
from tests.paths import H200_REPORT

RUNS = [*(["--simulate", p.key] for p in PROFILES), ["--simulate", str(H200_REPORT)], ["--simulate", "h200,fewer=2"],
        ["--simulate", "h200,bitflip=5:1000"], ["--simulate", "a100,flaky=0.3"],
        ["--simulate", "h200,sticky=200000", "--inline"]]


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[Verdict]:
    """Every row of every profile at level full, of the replayed H200, and of a few faulty devices, as
    read back from their JSON reports."""
    found: list[Verdict] = []
    folder = tmp_path_factory.mktemp("rows")
    for n, args in enumerate(RUNS):
        out = folder / f"{n}.json"
        assert cli.main([*args, "--level", "full", "--quiet", "--json", str(out)]) in (0, 1, 4)
        report = build(json.loads(out.read_text()), Report, str(out))
        found += [v for dev in report.devices for v in dev.verdicts]
    return found


def test_every_row_has_a_family_and_its_note_is_its_notes(rows: list[Verdict]) -> None:
    assert rows and not [v.quantity for v in rows if v.family is Family.OTHER]
    assert all(v.note == join_notes(v.notes) for v in rows)
    # Not here: cross-checks (test_numba.py), sources that disagree and a cc the table lacks (test_published_table_and_host.py).
    missing = set(Family) - {v.family for v in rows}
    assert missing == {Family.OTHER, Family.CROSS_CHECK, Family.SOURCES, Family.NOT_PUBLISHED}


@pytest.mark.parametrize(("pattern", "field"), [
    (r", (\d+) threads$", "threads"), (r", (\d+) B static", "static_bytes"), (r"from (\d+) B dynamic", "dynamic_bytes"),
    (r" at (\d+) B", "dynamic_bytes"), (r"clusters of (\d+) ", "cluster_size"), (r"carveout (-?\d+)(?:\.\.|%)", "percent"),
    (r"carveout -?\d+\.\.(\d+)%", "last_percent"),
])
def test_what_a_name_says_its_parameters_hold(rows: list[Verdict], pattern: str, field: str) -> None:
    named = [(v, int(m.group(1))) for v in rows if (m := re.search(pattern, v.quantity))]
    assert named, pattern
    assert [v.quantity for v, value in named if getattr(v.parameters, field) != value] == []


def test_probe_counts_are_data_beside_their_note(rows: list[Verdict]) -> None:
    searched = [v for v in rows if any(n.kind is NoteKind.PROBES for n in v.notes)]
    assert searched and all(f"{v.probes} probes (bound {v.probe_bound})" in v.note for v in searched)


def test_a_row_whose_note_is_not_its_notes_is_refused() -> None:
    with pytest.raises(ValueError, match="a row's note is its notes joined"):
        Verdict("q", 1, "s", 1, "match", "something else", notes=(Note("a"),))
