"""Every line of text a command prints fits the terminal's width (COLUMNS), or 100 columns where there is
none: the measured report (with its headline's reasons and a comparison with a baseline), profiles, merge
(long paths and deviations), check and export nfd. Prometheus's exposition is a machine format whose lines
cannot wrap; fit and trace are tested with their renderers."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.outputs.terminal import text_width
from bisect_smem.app.render.width import DEFAULT_WIDTH, NARROWEST, column_widths, table, wrapped
from tests.paths import H200_FULL, H200_REPORT


def _fleet(folder: Path) -> list[str]:
    """Reports under a long folder name, one of them deviating, one not read, one without a device."""
    folder = folder / ("a-rack-with-a-long-name-" * 3) / "node-reports"
    folder.mkdir(parents=True)
    doc = json.loads(H200_REPORT.read_text())
    low = copy.deepcopy(doc)
    low["devices"][0]["measured"]["optin_dynamic_ceiling_bytes"] = 101376
    low["devices"][0]["name"] = "NVIDIA H200 with a model name long enough to wrap in its column"
    paths = []
    for name, content in (("n0", doc), ("n1", doc), ("n2-deviates", low), ("n2-deviates-again", low)):
        (folder / f"{name}.json").write_text(json.dumps(content))
        paths.append(str(folder / f"{name}.json"))
    (folder / "garbled.json").write_text("{")
    (folder / "empty.json").write_text(json.dumps({**doc, "devices": [], "result": "no_gpu", "exit_code": 3,
                                                   "error": "no usable GPU: " + "the driver said no " * 8}))
    return [*paths, str(folder / "garbled.json"), str(folder / "empty.json")]


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "measure": lambda _: ["--simulate", "h200,optin=204800", "--level", "quick", "--inline", "--quiet"],
    "measure-verbose": lambda _: ["--simulate", "a100", "--simulate", "h200", "--inline", "--quiet", "--verbose"],
    "profiles": lambda _: ["profiles"],
    "merge": lambda tmp: ["merge", *_fleet(tmp)],
    "check": lambda _: ["check", str(H200_FULL)],
    "export-nfd": lambda _: ["export", "nfd", str(H200_REPORT)],
}


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "no-terminal"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_line_fits(command: str, columns: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    main(COMMANDS[command](tmp_path))
    out = capsys.readouterr().out
    width = int(columns) if columns else DEFAULT_WIDTH
    assert out.strip(), "nothing printed"
    assert max(len(line) for line in out.splitlines()) <= width, "\n".join(row for row in out.splitlines() if len(row) > width)


def test_a_comparison_with_a_baseline_fits(h200_baseline: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--simulate", "h200,optin=204800", "--compare", str(h200_baseline), "--inline", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "regress" in out.lower() and max(len(line) for line in out.splitlines()) <= 80, out


def test_the_width_comes_from_columns_else_a_terminal_else_100(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "132")
    assert text_width() == 132
    monkeypatch.setenv("COLUMNS", "20")
    assert text_width() == NARROWEST  # no layout narrower than its narrowest
    for unusable in ("", "wide", "0"):
        monkeypatch.setenv("COLUMNS", unusable)
        assert text_width() == DEFAULT_WIDTH  # pytest's capture is no terminal


def test_a_table_wraps_its_widest_column_first_and_breaks_words_last() -> None:
    rows = [("sm_90", "h100, h200, gh200, hopper", "0, 8, 16, 32, 64, 100, 132, 164, 196, 228")]
    headers = ("profile", "aliases", "carveouts KiB")
    assert column_widths(rows, headers, 200) == [7, 25, 41]  # room for all: nothing wraps
    first, *rest = column_widths(rows, headers, 60)  # the widest gives way first, to the next widest, then both
    assert first == 7 and sorted(rest) == [24, 25]
    narrow = column_widths(rows, headers, 30)
    assert narrow[0] == 7 and sum(narrow) + 4 <= 30  # down to the longest words, then within them
    text = table(rows, headers, 40)
    assert max(len(line) for line in text.splitlines()) <= 40 and "hopper" in text and "228" in text


def test_a_long_line_wraps_at_spaces_with_its_indentation() -> None:
    line = "  NVIDIA H200: " + " ".join(f"word{i}" for i in range(30))
    out = wrapped(line, 60).splitlines()
    assert len(out) > 1 and max(map(len, out)) <= 60
    assert out[0].startswith("  NVIDIA") and all(row.startswith("    word") for row in out[1:])
    assert " ".join(row.strip() for row in out) == line.strip()
