"""Text is made in one place (app/render) from the rows as data: every format is one module with
``render(report, options) -> str``, picked from one dict; a new format or subcommand is one registration;
nothing there reads a row's text back (no regex, no splitting of our own strings)."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import types

import pytest

from bisect_smem.app import render
from bisect_smem.app.cli import commands
from bisect_smem.app.cli import main as cli
from bisect_smem.app.render.rows import FOLDED_NAMES, REASON_GROUPS, RenderOptions
from bisect_smem.core.model import Report
from bisect_smem.core.schema import build
from bisect_smem.core.text import dash
from tests.paths import PACKAGE

RENDER = PACKAGE / "app" / "render"
# The check line reads two prefixes the status fields write (a regression in a device's reason, no GPU
# in the run's error): the status fields have no field of their own for either.
SPLIT_EXEMPT = {("check.py", "removeprefix"), ("check.py", "startswith")}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    out = tmp_path_factory.mktemp("render") / "r.json"
    assert cli.main(["--simulate", "h200", "--simulate", "h200,fewer=1", "--level", "full", "--quiet",
                     "--json", str(out)]) == 1
    return build(json.loads(out.read_text()), Report, str(out))


def test_each_format_renders_the_same_report(report: Report) -> None:
    assert set(render.FORMATS) == {"text", "markdown", "json"}
    texts = {name: render.renderer(name)(report, RenderOptions()) for name in render.FORMATS}
    assert all(t.endswith("\n") for t in texts.values())
    assert json.loads(texts["json"]) == report.to_dict()
    assert texts["markdown"].startswith("# bisect-smem ") and "device 1: " in texts["text"]
    verbose = render.renderer("text")(report, RenderOptions(verbose=True))
    assert "residency staircase (" in texts["text"] and "residency staircase (" not in verbose
    assert sum(line.startswith("blocks/SM from ") for line in verbose.splitlines()) == sum(len(d.measured.residency) for d in report.devices if d.measured)


def test_the_renderers_read_no_text_back() -> None:
    for path in sorted(RENDER.glob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert "re" not in imported, path.name
        splits = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Attribute) and (path.name, node.func.attr) not in SPLIT_EXEMPT
                  and node.func.attr in ("split", "partition", "rsplit", "removeprefix", "startswith", "endswith")
                  and not (node.func.attr == "split" and not node.args)]  # split(): runs of whitespace, not a field
        assert splits == [], (path.name, splits)


def test_the_short_names_are_the_names_the_rows_carry(report: Report) -> None:
    rows = [v for dev in report.devices for v in dev.verdicts]
    folded = [v for v in rows if v.family in FOLDED_NAMES and v.parameters.threads is not None]
    assert folded
    for v in folded:
        short = f"{FOLDED_NAMES[v.family](v.parameters)}, {v.parameters.threads} threads"
        assert short == v.quantity.replace("opt-in dynamic ceiling", "opt-in ceiling")
    grouped = [v for v in rows if v.family in REASON_GROUPS]
    assert grouped
    for v in grouped:
        name, part = REASON_GROUPS[v.family]
        assert v.quantity == f"{name} {part(v.parameters)}"


def test_a_format_is_one_registration(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    count = types.ModuleType("bisect_smem.app.render.count")
    count.render = lambda r, o: f"{len(r.devices)} devices\n"
    monkeypatch.setitem(sys.modules, count.__name__, count)
    monkeypatch.setattr(render, "FORMATS", (*render.FORMATS, "count"))
    assert cli.main(["--simulate", "h200", "--simulate", "t4", "--format", "count", "--quiet"]) == 0
    assert capsys.readouterr().out == "2 devices\n"


def test_a_subcommand_is_one_registration(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def add_parser(sub: argparse._SubParsersAction) -> None:
        sub.add_parser("hello").add_argument("name")

    hello = types.SimpleNamespace(add_parser=add_parser, run=lambda args: (f"hello {args.name}\n", 1))
    monkeypatch.setitem(commands.SUBCOMMANDS, "hello", "say hello")
    monkeypatch.setitem(commands.OVERRIDES, "hello", hello)
    assert cli.main(["hello", "world"]) == 1
    assert capsys.readouterr().out == "hello world\n"


def test_only_the_subcommand_and_words_that_may_be_it_are_loaded() -> None:
    assert commands.named_in(["schema", "trace"]) == ["schema"]
    assert commands.named_in(["trace", "--", "bisect-smem", "fit"]) == ["trace"]
    # "check" may be --json's value: both load, and the subcommand is the word after it
    assert commands.named_in(["--json", "check", "fit", "--dynamic", "1K"]) == ["check", "fit"]
    script = ("import contextlib, io, sys; from bisect_smem.app.cli.main import main\n"
              "with contextlib.redirect_stdout(io.StringIO()): main(['schema', 'trace'])\n"
              "print(sorted(m for m in sys.modules if m.startswith('bisect_smem.app.cli.') and 'trace' in m))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout == "[]\n", done.stdout


def test_dash() -> None:
    assert (dash(None), dash(0), dash("x")) == ("-", "0", "x")
