"""Options a hostile or careless user gives: each is refused in one line and exit 2 before anything is
measured, or does what it says."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest

from bisect_smem.core.errors import UsageError
from bisect_smem.core.sizes import parse_size
from tests.conftest import one_error
from tests.conftest import run_main as run
from tests.processes import CMD, ENV


@pytest.mark.parametrize(("text", "plain"), [
    ("1.0", "1"), ("227.0K", "227K"), ("0.5K", "512"), ("0.0", "0"), ("1.00MiB", "1MiB"), ("0.25M", "262144"),
])
def test_a_needless_decimal_point_is_refused_with_the_plain_spelling(text: str, plain: str) -> None:
    with pytest.raises(UsageError, match=f"without a decimal point: {plain} "):
        parse_size(text)


@pytest.mark.parametrize(("text", "expected"), [("1.5KiB", 1536), ("2.25M", 2359296), ("227K", 232448)])
def test_a_part_of_a_unit_is_still_a_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_fit_refuses_a_size_with_a_point_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["fit", "227.0K", "--no-local"], capsys)
    assert (code, out) == (2, "") and "227K" in one_error(err)


@pytest.mark.parametrize("args", [
    ["--simulate", "h200", "--json", "a.json", "--json", "b.json"],
    ["--simulate", "h200", "--level", "standard", "--plot", "a.svg", "--plot", "b.svg"],
    ["--simulate", "h200", "--save-baseline", "a", "--save-baseline", "b"],
    ["--simulate", "h200", "--compare", "a", "--compare", "b"],
    ["--simulate", "h200", "--prom", "a.prom", "--prom", "b.prom"],
    ["--simulate", "h200", "--nfd", "a", "--nfd", "b"],
    ["fit", "1K", "--no-local", "--json", "a.json", "--json", "b.json"],
    ["export", "prom", "r.json", "--output", "a", "--output", "b"],
], ids=["json", "plot", "save-baseline", "compare", "prom", "nfd", "fit-json", "export-output"])
def test_an_output_given_twice_is_refused(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(args, capsys)
    assert (code, out) == (2, "") and "was given twice" in one_error(err)
    assert list(tmp_path.iterdir()) == []


def test_an_option_given_once_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    assert run(["--simulate", "h200", "--level", "quick", "--json", str(report)], capsys)[0] == 0
    assert json.loads(report.read_text())["devices"]


@pytest.mark.parametrize("args", [
    ["--json", "-", "--prom", "/dev/stdout"],
    ["--json", "-", "--nfd", "/dev/stdout"],
    ["--format", "json", "--prom", "/dev/stdout"],
    ["--format", "json", "--json", "/dev/stdout"],
], ids=["json-prom", "json-nfd", "format-prom", "format-json-twice"])
def test_json_on_stdout_takes_no_second_output_there(args: list[str], tmp_path: Path) -> None:
    done = subprocess.run([*CMD, "--simulate", "h200", "--level", "quick", *args], capture_output=True, text=True,
                          env=ENV, timeout=120, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stdout[:300]
    assert "is stdout, which" in one_error(done.stderr)


def test_json_on_stdout_and_metrics_to_dev_null_is_allowed(tmp_path: Path) -> None:
    done = subprocess.run([*CMD, "--simulate", "h200", "--level", "quick", "--json", "-", "--prom", os.devnull],
                          capture_output=True, text=True, env=ENV, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["devices"], done.stderr


@pytest.mark.parametrize("option", ["--json", "--prom", "--nfd"])
@pytest.mark.parametrize("tail", ["/", "/.", "/.."])
def test_an_output_path_naming_a_folder_is_refused(option: str, tail: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    target = f"{tmp_path}/new{tail}"
    code, out, err = run(["--simulate", "h200", "--level", "quick", option, target], capsys)
    assert (code, out) == (2, "") and "names a folder, not a file" in one_error(err)
    assert list(tmp_path.iterdir()) == []


def test_fit_json_naming_a_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["fit", "1K", "--no-local", "--json", f"{tmp_path}/out/"], capsys)
    assert code == 2 and "names a folder" in one_error(err) and list(tmp_path.iterdir()) == []


def _seconds_options() -> list[tuple[str, str]]:
    """Every option of every parser that takes seconds, with its help."""
    from bisect_smem.app.cli.argtypes import positive_float
    from bisect_smem.app.cli.main import build_parser

    found, todo = [], [build_parser()]
    while todo:
        parser = todo.pop()
        for action in parser._actions:
            todo.extend(getattr(action, "choices", None).values() if isinstance(action, argparse._SubParsersAction)
                        else [])
            if action.type is positive_float:
                found.append((f"{parser.prog} {action.option_strings[0]}", action.help or ""))
    return found


def test_every_option_in_seconds_states_its_week_limit_in_help() -> None:
    options = _seconds_options()
    assert {name.split()[-1] for name, _ in options} >= {"--max-age", "--nfd-expiry", "--probe-timeout",
                                                         "--device-timeout"}
    assert [name for name, text in options if "604800 s, a week" not in text] == []


@pytest.mark.parametrize("args", [["check", "r.json", "--max-age", "604801"],
                                  ["--simulate", "h200", "--nfd", "x", "--nfd-expiry", "604801"]])
def test_a_limit_beyond_a_week_is_refused_saying_so(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(args, capsys)
    assert code == 2 and "at most 604800 s, a week (got 604801)" in one_error(err)


LONG = "d" * 4000


@pytest.mark.parametrize("args", [
    ["--simulate", "h200", "--json", f"/no/{LONG}/x.json"],
    ["--simulate", "h200", "--compare", f"/x/{LONG}"],
    ["--simulate", "h200", "--save-baseline", f"/etc/passwd/{LONG}"],
    ["--simulate", "h200", "--json", LONG, "--json", "b"],
    ["--level", LONG],
], ids=["json", "compare", "save-baseline", "twice", "argparse"])
def test_an_error_quoting_a_huge_value_is_cut_keeping_its_ends(args: list[str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(args, capsys)
    line = one_error(err)
    assert code == 2 and len(line) <= 400, len(line)
    assert "4000 characters" in line or "(4003 characters)" in line or "characters)" in line


def test_a_word_under_the_limit_is_whole() -> None:
    from bisect_smem.app.outputs.stderr import bounded

    path = "/tmp/" + "p" * 100 + "/r.json"
    assert bounded(f"cannot write {path}: full") == f"cannot write {path}: full"
    cut = bounded(f"cannot write /{'q' * 300}/r.json: full")
    assert cut.startswith("cannot write /qqq") and cut.endswith("q/r.json (308 characters): full")
