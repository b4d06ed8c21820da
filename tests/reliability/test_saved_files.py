"""Reports and baselines are read back one way (core/saved.py): replay, fit --target, --compare and
merge refuse the same wrongly typed file with the same line; --simulate KEY=VALUE pairs are split one way;
a compute capability is spelled and parsed one way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.core import saved
from bisect_smem.core.errors import UsageError
from bisect_smem.core.profiles import PROFILES, cc_text, parse_cc
from tests.paths import H200_REPORT


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def report_with_cc(tmp_path: Path, cc: object) -> Path:
    doc = json.loads(H200_REPORT.read_text())
    doc["devices"][0]["compute_capability"] = cc
    path = tmp_path / "typed.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_numeric_cc_is_refused_alike_by_replay_fit_and_merge(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = report_with_cc(tmp_path, 9.0)
    problem = "field devices[0].compute_capability must be a string (got 9.0)"
    for args, name in ((["--simulate", str(path)], f"--simulate {path}"),
                       (["fit", "1000", "--target", str(path)], f"--target {path}"),
                       (["merge", str(path)], str(path))):
        code, out, err = run(args, capsys)
        assert (code, out, err) == (2, "", f"error: {name}: {problem}\n"), args


def test_a_numeric_cc_in_a_baseline_is_refused_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "b"
    assert run(["--simulate", "h200", "--save-baseline", str(folder), "--quiet"], capsys)[0] == 0
    (path,) = folder.glob("*/*.json")
    doc = json.loads(path.read_text())
    doc["device"]["compute_capability"] = 9.0
    path.write_text(json.dumps(doc))
    problem = "field device.compute_capability must be a string (got 9.0)"
    for args, name in ((["--simulate", str(path)], f"--simulate {path}"),
                       (["fit", "1000", "--target", str(path)], f"--target {path}"),
                       (["fit", "1000", "--target", str(folder)], str(path)),
                       (["--simulate", "h200", "--compare", str(folder)], str(path))):
        code, _, err = run(args, capsys)  # --compare measures first, then reads the baselines
        assert (code, err) == (2, f"error: {name}: {problem}\n"), args


def test_a_malformed_cc_string_is_refused_alike_when_the_file_is_read(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = report_with_cc(tmp_path, "9")
    problem = "device 0: field devices[0].compute_capability must be MAJOR.MINOR, like 9.0 (got '9')"
    for args, name in ((["--simulate", str(path)], f"--simulate {path}"),
                       (["fit", "1000", "--target", str(path)], f"--target {path}"),
                       (["merge", str(path)], str(path))):
        code, _, err = run(args, capsys)
        assert (code, err) == (2, f"error: {name}: {problem}\n"), args


@pytest.mark.parametrize("spec", ["h200,seed=1,seed=2", f"{H200_REPORT},seed=1,seed=2"], ids=["profile", "replay"])
def test_a_repeated_key_is_refused_by_both_forms(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--simulate", spec], capsys)
    assert (code, out, err) == (2, "", f"error: bad --simulate value {spec!r}: seed is given twice\n")


@pytest.mark.parametrize(("suffix", "message"), [
    (",device=x", "device takes a whole number (got 'x')"),
    (",seed=x", "flaky takes a probability, seed a whole number"),
    (",hole=lots", "--simulate hole"),
    (",bitflip=1:2", "'bitflip=1:2' is not KEY=VALUE: a replayed report takes device=N and the faults "
                     "flaky, seed, hole, sticky, hang"),
], ids=["device", "seed", "hole", "validation-fault"])
def test_replay_values_are_checked_like_the_profiles(suffix: str, message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--simulate", f"{H200_REPORT}{suffix}"], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and message in err, err


def test_a_file_too_large_is_refused_before_it_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(saved, "MAX_FILE_BYTES", 1000)
    for args, name in ((["--simulate", str(H200_REPORT)], f"--simulate {H200_REPORT}"),
                       (["merge", str(H200_REPORT)], str(H200_REPORT))):
        code, _, err = run(args, capsys)
        assert code == 2 and err.startswith(f"error: {name}: not a readable ") and "(larger than 1000 B)" in err


def test_cc_text_and_parse_cc_are_inverse() -> None:
    for p in PROFILES:
        assert parse_cc(cc_text(p.compute_capability)) == p.compute_capability
        assert p.cc_string == cc_text(p.compute_capability)
    assert cc_text((10, 3)) == "10.3" and parse_cc("12.1") == (12, 1)


@pytest.mark.parametrize("text", ["9", "9.x", "", "9.0.1", "-9.0", " 9.0", 9.0, None])
def test_parse_cc_refuses_anything_but_major_dot_minor(text: object) -> None:
    with pytest.raises(UsageError) as info:
        parse_cc(text, "--arch")  # type: ignore[arg-type]
    assert str(info.value) == f"--arch must be MAJOR.MINOR, like 9.0 (got {text!r})"
