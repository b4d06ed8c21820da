"""What a person reads stays true and on its line: names with terminal escapes, NUL or newlines are
printed escaped in every output, a ceiling at the search cap is not shown as measured, --help names every
--simulate key, a bit flip on an SM the device lacks is refused, and the simulated device's state folder
is its user's own."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import build_parser, main
from bisect_smem.app.render.markdown import inert
from bisect_smem.core.text import printable
from tests.conftest import run_main as run
from tests.paths import H200_REPORT

HOSTILE = "GPU\x1b[2J\x1b]0;owned\x07\x00\nfake line\u202e"



def raw_controls(text: str) -> list[str]:
    return [c for c in text if not c.isprintable() and c != "\n"]


@pytest.fixture
def hostile_report(tmp_path: Path) -> Path:
    doc = json.loads(H200_REPORT.read_text())
    doc["devices"][0]["name"] = HOSTILE
    doc["devices"][0]["context"]["nvml_driver_version"] = "580\x1b[31m"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("args", [[], ["--format", "markdown"], ["--verbose"]], ids=["text", "markdown", "verbose"])
def test_a_hostile_device_name_is_printed_escaped(args: list[str], hostile_report: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--simulate", str(hostile_report), *args], capsys)
    assert code == 0 and raw_controls(out) == []
    assert not any(line.startswith("fake line") for line in out.splitlines())
    assert (inert(HOSTILE) if "markdown" in args else printable(HOSTILE)) in out


def test_merge_prints_hostile_names_escaped(hostile_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["merge", str(hostile_report), str(H200_REPORT)], capsys)
    assert code in (0, 1) and raw_controls(out) == []
    assert not any(line.startswith("fake line") for line in out.splitlines())


def test_fit_prints_no_terminal_escapes(hostile_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["fit", "1000", "--target", str(hostile_report)], capsys)
    assert code == 0 and raw_controls(out) == [], out


def test_an_error_naming_a_hostile_path_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["merge", str(tmp_path / "a\nb\x1b[2J.json")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and raw_controls(err.strip()) == [], err


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    assert printable("H200") == "H200"
    assert printable("a\x1b[2Jb\x00\n\t\u202e") == "a\\x1b[2Jb\\x00\\x0a\\x09\\u202e"


def test_a_ceiling_at_the_search_cap_is_not_shown_as_measured(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--simulate", "h200,optin=2M,smem_per_sm=2049K"], capsys)
    assert "opt-in ceiling     at the 1024 KiB (1048576 B) search cap, not measured" in out
    assert "opt-in ceiling     1024 KiB" not in out


def test_help_names_every_simulate_key() -> None:
    text = " ".join(build_parser().format_help().split())
    for key in ("bitflip=SM:OFFSET", "holes=START-END", "leak=yes|no", "flaky=P", "fewer=N"):
        assert key in text, key


@pytest.mark.parametrize(("spec", "message"), [
    ("h200,bitflip=132:0", "bitflip SM 132 does not exist (the device has SMs 0..131)"),
    ("h200,bitflip=5:232448", "bitflip byte 232448 is beyond the shared memory a block gets (232448 B)"),
    ("h200,fewer=²", "fewer takes a whole number of blocks (got '²')"),
    ("h200,fewer=٣", "fewer takes a whole number of blocks (got '٣')"),
    ("h200,seed=" + "9" * 5000, "flaky takes a probability, seed a whole number"),
    ("h200,hole=" + "9" * 5000, "--simulate hole must be a byte count"),
    ("h200,flaky=٠.٥", "flaky takes a probability"),
    ("h200,flaky=nan", "flaky takes a probability"),
])
def test_simulate_values_the_device_cannot_have_are_refused(spec: str, message: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--simulate", spec], capsys)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1 and message in err, err


def test_a_planted_state_folder_is_refused_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / f"bisect-smem-sim-{os.getuid()}").symlink_to(elsewhere)
    out = tmp_path / "r.json"
    code = main(["--simulate", "h200,leak=yes", "--level", "full", "--json", str(out), "--quiet"])
    capsys.readouterr()
    rows = [v for v in json.loads(out.read_text())["devices"][0]["verdicts"] if v["quantity"] == "step leftovers"]
    assert code == 4 and rows and "not a folder of this user's alone" in rows[0]["note"]
    assert list(elsewhere.iterdir()) == []
