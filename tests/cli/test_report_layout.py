"""What a person reads first: the headline, a compact table within 100 columns, Markdown, one line per device."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from bisect_smem import __version__
from bisect_smem.app.cli.main import main
from bisect_smem.app.render.rows import HEADLINE_LINES, WIDTH
from bisect_smem.core.profiles import PROFILES, ArchProfile
from tests.paths import H200_REPORT


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([*args, "--quiet"])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.key)
def test_the_default_output_of_every_profile_fits_in_100_columns(profile: ArchProfile,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout = run(["--simulate", profile.key], capsys)
    lines = stdout.splitlines()
    assert code == 0
    assert max(len(line) for line in lines) <= WIDTH, max(lines, key=len)
    assert len(lines) <= 45


def test_the_headline_comes_before_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    _, stdout = run(["--simulate", "h200"], capsys)
    lines = stdout.splitlines()
    table = next(i for i, line in enumerate(lines) if line.split()[:2] == ["quantity", "reported"])
    labels = [line[:21].strip() for line in lines[2:table]]
    assert table - 2 <= HEADLINE_LINES
    assert labels[:8] == ["default ceiling", "opt-in ceiling", "per-SM capacity", "reserved per block",
                          "granularity", "static data", "largest cluster", "verdict"]
    assert "227 KiB (232448 B)" in lines[3] and "228 KiB (233472 B)" in lines[4] and "1 KiB (1024 B)" in lines[5]
    assert "1 B static costs 16 B" in lines[7] and "16 blocks (8 portable)" in lines[8]


def test_verbose_shows_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    _, stdout = run(["--simulate", str(H200_REPORT), "--verbose", "--json", str(out)], capsys)
    quantities = [v["quantity"] for v in json.loads(out.read_text())["devices"][0]["verdicts"]]
    lines = stdout.splitlines()
    for quantity in quantities:  # a long quantity wraps in its column: its first line starts the row
        first = textwrap.wrap(quantity, 30)[0]
        assert any(line.startswith(first + " ") or line == first for line in lines), quantity
    assert max(len(line) for line in lines) <= 100
    _, compact = run(["--simulate", str(H200_REPORT)], capsys)
    assert len(compact.splitlines()) < len(lines) - len(quantities) // 2


def test_agreeing_families_fold_into_summary_rows(capsys: pytest.CaptureFixture[str]) -> None:
    _, stdout = run(["--simulate", "h200"], capsys)
    for family in ("residency staircase (", "carveout sweep (", "thread block clusters (", "published table ("):
        assert sum(line.startswith(family) for line in stdout.splitlines()) == 1, family
    assert "blocks/SM from" not in stdout
    assert [line.split("  ")[0] for line in stdout.splitlines() if line.startswith("opt-in ceiling, 1 B")] == \
        ["opt-in ceiling, 1 B static"]


def _github_table(lines: list[str]) -> list[list[str]]:
    rows = [[cell.strip() for cell in line.replace("\\|", "").strip("|").split("|")] for line in lines]
    assert len({len(r) for r in rows}) == 1, "every row has the same number of cells"
    assert all(set(cell) <= set("-:") and cell for cell in rows[1]), "the second line is the separator"
    return rows


def test_markdown_is_a_github_table_headed_by_context(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout = run(["--simulate", str(H200_REPORT), "--format", "markdown"], capsys)
    lines = stdout.splitlines()
    assert code == 0 and lines[0] == f"# bisect-smem {__version__}"
    assert any(line.startswith("## device 0: NVIDIA H200 | cc 9.0") for line in lines)
    driver = json.loads(H200_REPORT.read_text())["devices"][0]["context"]["nvml_driver_version"]
    assert any(line.startswith(f"driver {driver}") and "backend sim" in line for line in lines)
    assert any(line.startswith("- **verdict**: differs") for line in lines)
    table = [line for line in lines if line.startswith("|")]
    rows = _github_table(table)
    assert rows[0] == ["quantity", "reported", "source", "measured", "verdict", "note"]
    assert any(r[0] == "blocks/SM at carveout 28%" and r[4] == "differs" for r in rows)


def test_format_json_is_json_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    _, by_format = run(["--simulate", "h200", "--format", "json"], capsys)
    _, by_json = run(["--simulate", "h200", "--json", "-"], capsys)
    volatile = ("created_utc", "elapsed_s", "timings_s")

    def stable(text: str) -> str:
        data = json.loads(text)
        for key in volatile:
            data.pop(key, None)
        for dev in data["devices"]:
            dev.pop("elapsed_s"), dev["measured"].pop("timings_s")
        return json.dumps(data, sort_keys=True)

    assert stable(by_format) == stable(by_json)


def test_markdown_and_json_on_stdout_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--simulate", "h200", "--format", "markdown", "--json", "-"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --json - prints JSON on stdout")


def test_several_devices_end_with_one_line_each_and_an_overall_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout = run(["--simulate", "h200", "--simulate", str(H200_REPORT), "--simulate", "h200,optin=200K"],
                       capsys)
    tail = stdout.splitlines()[-4:]
    assert code == 1
    assert tail[0].startswith("device 0: match") and tail[1].startswith("device 1: differs")
    assert tail[2].startswith("device 2: MISMATCH") and tail[3] == "overall: MISMATCH"


def test_the_plot_has_a_carveout_panel_from_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    png, out = tmp_path / "h200.png", tmp_path / "r.json"
    code, _ = run(["--simulate", str(H200_REPORT), "--plot", str(png), "--json", str(out)], capsys)
    (series,) = json.loads(Image.open(png).text["Description"])
    points = json.loads(out.read_text())["devices"][0]["measured"]["carveout"]
    assert code == 0
    assert series["carveout_percent"] == [p["percent"] for p in points]
    assert series["carveout_measured"] == [p["blocks_per_sm"] for p in points]
    assert series["carveout_api"] == [p["api_blocks_per_sm"] for p in points]
    assert any(m > a for m, a in zip(series["carveout_measured"], series["carveout_api"], strict=True))
