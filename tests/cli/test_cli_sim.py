"""The whole pipeline on simulated devices, through the real entry point: what a person reads."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.core.model import Report
from bisect_smem.core.profiles import PROFILES, ArchProfile
from bisect_smem.core.schema import build


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def aligned16(n: int) -> int:
    return -(-n // 16) * 16


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.key}-{p.example_parts.split(',')[0]}")
def test_simulated_run_measures_the_published_numbers(profile: ArchProfile, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    code, stdout, stderr = run_main(["--simulate", profile.key, "--json", str(out), "--quiet"], capsys)
    assert code == 0, stdout + stderr
    data = json.loads(out.read_text())
    assert data["schema"] == "bisect_smem/report/v1"
    (dev,) = data["devices"]
    assert dev["compute_capability"] == profile.cc_string
    assert dev["error"] is None
    m = dev["measured"]
    assert m["default_dynamic_ceiling_bytes"] == 48 * 1024
    assert m["optin_dynamic_ceiling_bytes"] == profile.max_smem_per_block_optin_bytes
    assert m["attribute_accept_ceiling_bytes"] == profile.max_smem_per_block_optin_bytes
    assert len(m["static_splits"]) == 15
    for split in m["static_splits"]:
        assert split["dynamic_ceiling_bytes"] == profile.max_smem_per_block_optin_bytes - aligned16(split["static_bytes"])
    if profile.compute_capability >= (8, 0):
        assert m["reserved_bytes"] == (profile.reserved_smem_per_block_bytes or 1024)
        assert m["allocation_granularity_bytes"] == 128
    else:
        assert m["reserved_bytes"] is None and m["allocation_granularity_bytes"] is None
    assert all(s["probes"] <= s["probe_bound"] == 26 for s in m["searches"].values()), m["searches"]
    assert {v["verdict"] for v in dev["verdicts"]} <= {"match", "info"}


def test_json_round_trip_is_lossless(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert run_main(["--simulate", "h200", "--simulate", "rtx-pro-6000", "--json", str(out)], capsys)[0] == 0
    data = json.loads(out.read_text())
    assert build(data, Report, "r.json").to_dict() == data
    assert [d["index"] for d in data["devices"]] == [0, 1]


def test_json_to_stdout_is_only_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_main(["--simulate", "a100", "--json", "-"], capsys)
    assert code == 0
    assert json.loads(stdout)["devices"][0]["measured"]["optin_dynamic_ceiling_bytes"] == 166912


def test_table_reads_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_main(["--simulate", "rtx-pro-6000", "--verbose"], capsys)
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0] == "device 0: Simulated sm_120 (RTX PRO 6000 Blackwell, RTX 50xx) | cc 12.0 | UUID SIM-sm_120-0"
    assert lines[1] == "driver simulated | virtualization none | MIG disabled | backend sim"
    head = next(i for i, line in enumerate(lines)
                if line.split() == ["quantity", "reported", "source", "measured", "verdict", "note"])
    rows = {line.split("  ")[0]: line.split() for line in lines[head + 2:]}
    assert rows["opt-in attribute accepts up to"][5:9] == ["101376", "driver", "101376", "match"]
    start = next(i for i, line in enumerate(lines) if line.startswith("opt-in dynamic ceiling, 1 B"))
    note_at = lines[head].index("note")  # the note wraps in its own column
    assert "1 B static occupies 16 B" in " ".join(line[note_at:].strip() for line in lines[start:start + 4])
    assert max(len(line) for line in lines) <= 100
    assert re.fullmatch(r"\d+ match, 1 info; \d+ probes, \d+\.\d\d s", lines[-1]), lines[-1]
    assert "MISMATCH" not in stdout and "ERROR" not in stdout


def test_profiles_lists_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_main(["profiles"], capsys)
    assert code == 0
    for p in PROFILES:
        key = p.key if p.confirmed else f"{p.key}*"  # an unconfirmed row is marked, and its mark explained below
        assert any(line.split()[:2] == [key, p.cc_string] for line in stdout.splitlines()), p.key
    assert ("* unconfirmed" in stdout) == (not all(p.confirmed for p in PROFILES))


@pytest.mark.parametrize("args, fragment", [
    (["--simulate", "k80"], "unknown profile 'k80'; valid: sm_70, 7.0, v100"),
    (["--simulate", "h200", "--device", "3"], "device 3 does not exist; valid: 0..0"),
    (["--simulate", "h200", "--device", "-1"], "must be >= 0 (got -1)"),
    (["--simulate", "h200", "--device", "one"], "expected a whole number (got 'one')"),
    (["--backend", "opencl"], "unknown backend 'opencl'; valid: cupy, numba, sim, all"),
    (["--backend", "sim"], "the sim backend needs --simulate PROFILE"),
    (["--simulate", "h200", "--json", "/nonexistent-folder/r.json"], "folder /nonexistent-folder does not exist"),
    (["--simulate", "h200", "--confirm", "0"], "--confirm: must be in 1..32 (got 0)"),
    (["--simulate", "h200", "--confirm", "-1"], "--confirm: must be in 1..32 (got -1)"),
    (["--simulate", "h200", "--confirm", "1000000"], "--confirm: must be in 1..32 (got 1000000)"),
    (["--simulate", "h200", "--confirm", "²"], "--confirm: expected a whole number (got '²')"),
    (["--simulate", "h200", "--confirm", "1" * 5000], "--confirm: expected a whole number (got '1111"),
    (["--simulate", "h200", "--device", "٣"], "--device: expected a whole number (got '٣')"),
    (["--simulate", "h200", "--max-restarts", "1000"], "--max-restarts: must be in 0..100 (got 1000)"),
    (["--simulate", "h200", "--probe-timeout", "inf"], "--probe-timeout: expected a number of seconds (got 'inf')"),
    (["--simulate", "h200", "--probe-timeout", "1e9"], "--probe-timeout: expected a number of seconds"),
    (["--bogus"], "unrecognized arguments: --bogus (see bisect-smem --help)"),
    # A subcommand's unknown argument points at that subcommand's help, where its options are.
    (["fit", "100", "--bogus"], "unrecognized arguments: --bogus (see bisect-smem fit --help)"),
    (["merge", "r.json", "--bogus"], "unrecognized arguments: --bogus (see bisect-smem merge --help)"),
    (["export", "prom", "r.json", "extra"], "unrecognized arguments: extra (see bisect-smem export --help)"),
    (["profiles", "x"], "unrecognized arguments: x (see bisect-smem profiles --help)"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, stderr = run_main(args, capsys)
    assert code == 2
    assert stdout == ""
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith("error: ") and fragment in stderr, stderr


def test_json_into_a_folder_path_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = run_main(["--simulate", "h200", "--json", str(tmp_path)], capsys)
    assert code == 2 and "is a folder, not a file" in stderr


def test_json_into_an_unwritable_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Root may write anywhere, so the permission answer is simulated where it is asked.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == tmp_path else real_access(p, mode))
    code, _, stderr = run_main(["--simulate", "h200", "--json", str(tmp_path / "r.json")], capsys)
    assert code == 2 and f"folder {tmp_path} is not writable" in stderr


def test_no_gpu_is_one_line_and_exit_3(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    from bisect_smem.devices.backends import libcuda

    def no_driver(name: str, *args: object, **kwargs: object) -> None:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(libcuda, "_instance", None)
    monkeypatch.setattr(ctypes, "CDLL", no_driver)
    code, stdout, stderr = run_main([], capsys)
    assert code == 3
    assert stdout == ""
    assert stderr.strip().splitlines() == [
        "error: no usable GPU: no NVIDIA driver found (libcuda.so.1 could not be loaded); "
        "try --simulate h200 to run on a simulated device"]


def test_a_failed_write_keeps_the_old_report(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    out = tmp_path / "r.json"
    out.write_text('{"old": true}\n')

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    code, _, stderr = run_main(["--simulate", "h200", "--json", str(out)], capsys)
    assert code == 2 and "No space left on device" in stderr
    assert out.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_main(["--help"], capsys)
    assert code == 0
    for code_, meaning in (("0", "no limit or source disagrees"), ("1", "a mismatch or regression"),
                           ("2", "bad usage or bad input"), ("3", "no usable GPU or backend"),
                           ("4", "a measurement could not be completed"), ("128+N", "ended by signal N")):
        assert re.search(rf"^  {re.escape(code_)} +{meaning}", stdout, re.MULTILINE), code_
