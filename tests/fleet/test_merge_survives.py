"""merge of a fleet keeps going past a bad host: a report it cannot read, or one that breaks a plausibility
rule, is a row of its own with its path and the reason, and the rest is merged; quantities an incomplete
report did not measure are "not measured", neither a deviation nor a vote."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from tests.fleet.test_compare_and_merge_inputs import h200_report, with_optin, write  # noqa: F401 - a fixture

# These tests read lines whole: a path, then what deviates or regressed.
pytestmark = pytest.mark.usefixtures("wide_terminal")

OPTIN = "measured.optin_dynamic_ceiling_bytes"


def merged(paths: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["merge", *paths])
    out, err = capsys.readouterr()
    return code, out, err


def bad_hosts(tmp_path: Path, h200_report: dict) -> dict[str, str]:  # noqa: F811
    """Three kinds of bad report, each with the reason merge gives for it."""
    implausible = copy.deepcopy(h200_report)
    implausible["devices"][0]["reported"]["driver"]["max_shared_memory_per_block_optin_bytes"] = -5
    (tmp_path / "truncated.json").write_text(json.dumps(h200_report)[:500])
    return {write(tmp_path / "implausible.json", implausible): "must be an integer in",
            str(tmp_path / "truncated.json"): "not a readable report",
            str(tmp_path / "absent.json"): "No such file or directory"}


def test_one_bad_host_is_a_row_and_the_rest_is_merged(h200_report: dict, tmp_path: Path,  # noqa: F811
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    good = [write(tmp_path / f"n{i}.json", h200_report) for i in range(3)]
    bad = bad_hosts(tmp_path, h200_report)
    code, out, err = merged([*good[:2], *bad, good[2]], capsys)
    assert code == 4 and err == ""
    assert " 3 " in out.splitlines()[2]  # the three good devices, in one group
    for path, why in bad.items():
        (line,) = [line for line in out.splitlines() if line.startswith(f"{path}: ")]
        assert line.startswith(f"{path}: not merged: ") and why in line, line
    # A deviation among the readable hosts still decides the exit.
    low = write(tmp_path / "low.json", with_optin(h200_report, 101376))
    code, out, _ = merged([*good, low, *bad], capsys)
    assert code == 1 and f"{low}:0: {OPTIN}: 101376 (majority: 232448)" in out


def test_a_bad_host_in_a_fleet_read_by_the_pool_is_a_row_too(h200_report: dict, tmp_path: Path,  # noqa: F811
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    paths = [write(tmp_path / f"n{i:02}.json", h200_report) for i in range(40)]  # past the pool's threshold
    (tmp_path / "n17.json").write_text("{")
    code, out, _ = merged(paths, capsys)
    assert code == 4 and " 39 " in out.splitlines()[2]
    assert [line for line in out.splitlines() if "not merged" in line] == \
        [line for line in out.splitlines() if line.startswith(f"{tmp_path / 'n17.json'}: not merged: ")] != []


def test_nothing_readable_is_bad_input(h200_report: dict, tmp_path: Path,  # noqa: F811
                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad = list(bad_hosts(tmp_path, h200_report))
    code, out, err = merged(bad, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {bad[0]}: ") and "(and 2 more file(s)" in err


def test_a_quantity_an_incomplete_report_lacks_is_not_measured(h200_report: dict, tmp_path: Path,  # noqa: F811
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    one = str(tmp_path / "incomplete.json")  # a run whose GPU faulted for good: what it measured, nulls for the rest
    assert main(["--simulate", "h200,sticky=100000", "--max-restarts", "1", "--quiet", "--json", one]) == 4
    lacking = [k for k, v in json.loads(Path(one).read_text())["devices"][0]["measured"].items() if v is None]
    good = write(tmp_path / "good.json", h200_report)
    capsys.readouterr()
    code, out, _ = merged([good, one], capsys)  # two reports: no tie between null and a value
    assert lacking and code == 4 and "tie" not in out and "(majority:" not in out, out
    (line,) = [line for line in out.splitlines() if line.startswith(f"{one}:0: not measured: ")]
    first = min(f"measured.{k}" for k in lacking)  # the quantities are named in order, the rest counted
    assert line.startswith(f"{one}:0: not measured: {first}, ") and line.endswith(" more"), line
    assert f"{OPTIN}: None" not in out and "232448" in out.splitlines()[2]
