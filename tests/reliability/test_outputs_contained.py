"""Outputs land where they were asked for, whole: a name as long as the file system allows is written
(the temporary file beside it does not make it too long), and a link planted in a baseline folder does
not lead --save-baseline --force to replace a file outside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.core.atomic import replace_atomically
from tests.conftest import one_error
from tests.conftest import run_main as run


@pytest.mark.parametrize("name", ["r" * 250 + ".json", "r" * 255, "é" * 127 + "x", "é" * 120 + ".json"],
                         ids=["250-ascii", "255-ascii", "255-bytes-utf8", "245-bytes-utf8"])
def test_a_name_as_long_as_allowed_is_replaced_atomically(name: str, tmp_path: Path) -> None:
    assert len(os.fsencode(name)) <= 255
    target = tmp_path / name
    replace_atomically(target, b"one")
    replace_atomically(target, b"two")
    assert target.read_bytes() == b"two" and [p.name for p in tmp_path.iterdir()] == [name]


def test_a_report_with_a_255_byte_name_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / ("r" * 250 + ".json")
    assert run(["--simulate", "h200", "--level", "quick", "--json", str(report)], capsys)[0] == 0
    assert json.loads(report.read_text())["devices"]


def test_a_name_too_long_is_refused_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--simulate", "h200", "--json", str(tmp_path / ("r" * 256))], capsys)
    assert (code, out) == (2, "") and "too long" in one_error(err)


def _planted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """A saved baseline, then a link in its place to a file outside the folder."""
    folder, outside = tmp_path / "baselines", tmp_path / "precious.txt"
    assert main(["--simulate", "h200", "--level", "quick", "--save-baseline", str(folder), "--quiet"]) == 0
    capsys.readouterr()
    [saved] = list(folder.rglob("*.json"))
    outside.write_text("keep me")
    saved.unlink()
    saved.symlink_to(outside)
    return saved, outside


def test_save_baseline_force_does_not_follow_a_planted_link(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    saved, outside = _planted(tmp_path, capsys)
    code, _, err = run(["--simulate", "h200", "--level", "quick", "--save-baseline", str(tmp_path / "baselines"),
                        "--force", "--quiet"], capsys)
    assert code == 2 and "outside" in one_error(err) and outside.read_text() == "keep me"
    assert saved.is_symlink()


def test_a_planted_model_folder_link_is_refused_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved, _ = _planted(tmp_path, capsys)
    model, elsewhere = saved.parent, tmp_path / "elsewhere"
    elsewhere.mkdir()
    saved.unlink()
    model.rmdir()
    model.symlink_to(elsewhere, target_is_directory=True)
    code, _, err = run(["--simulate", "h200", "--level", "quick", "--save-baseline", str(tmp_path / "baselines"),
                        "--force", "--quiet"], capsys)
    assert code == 2 and "outside" in one_error(err) and list(elsewhere.iterdir()) == []


def test_a_link_inside_the_folder_is_still_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "baselines"
    assert main(["--simulate", "h200", "--level", "quick", "--save-baseline", str(folder), "--quiet"]) == 0
    [saved] = list(folder.rglob("*.json"))
    kept = saved.parent / "kept.json"
    saved.rename(kept)
    saved.symlink_to(kept.name)
    capsys.readouterr()
    assert run(["--simulate", "h200", "--level", "quick", "--save-baseline", str(folder), "--force", "--quiet"],
               capsys)[0] == 0
    assert json.loads(kept.read_text())["device"]
