"""--help as a person at an 80-column terminal reads it: each subcommand on one line beside its name, the
tool's description and exit codes within the width, and --level's help naming the default the parser uses."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from bisect_smem.app.cli.commands import SUBCOMMANDS
from bisect_smem.app.cli.main import build_parser
from tests.paths import ROOT

COLUMNS = 80


def _help() -> str:
    done = subprocess.run([sys.executable, "-m", "bisect_smem", "--help"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "COLUMNS": str(COLUMNS)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_subcommand_is_one_line_beside_its_name() -> None:
    lines = _help().splitlines()
    for name, line in SUBCOMMANDS.items():
        row = next(i for i, text in enumerate(lines) if re.match(rf"^    {name} +\S", text))
        assert lines[row].split(None, 1)[1] == line, name
        # the next row is the next subcommand or the end of the list, never the rest of this one's help
        assert not re.match(r"^ {20,}\S", lines[row + 1]), lines[row + 1]


def test_the_tool_help_fits_80_columns() -> None:
    text = _help()
    assert [line for line in text.splitlines() if len(line) > COLUMNS] == []
    assert "exit codes:" in text and "128+N" in text


def test_level_names_the_default_the_parser_uses() -> None:
    action = next(a for a in build_parser()._actions if "--level" in a.option_strings)
    default = build_parser().parse_args([]).level
    assert action.help.startswith(f"how much to measure (default {default}):")
    assert action.help.count(f"(default {default})") == 1 and not re.search(r"quick[^;]*\(default\b", action.help)
