"""`bisect-smem check` as node-problem-detector runs a custom plugin: a fresh process under a 5 s timeout,
at most 80 bytes of stdout on one line, and exit 0 (ok), 1 (a problem) or 2 (unknown)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from bisect_smem.app.cli.check import DEFAULT_REPORT, REPORT_ENV
from tests.paths import H200_REPORT, ROOT

NPD_CONFIG = ROOT / "examples" / "kubernetes" / "npd-bisect-smem.json"


def check(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The check in its own process, as an agent runs it: exit code and stdout (at most 80 bytes, one line)."""
    done = subprocess.run([sys.executable, "-m", "bisect_smem", "check", *args], capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=ROOT)
    assert len(done.stdout) <= 81 and done.stdout.endswith(b"\n") and done.stdout.count(b"\n") == 1, done.stdout
    assert len(done.stdout.rstrip(b"\n")) <= 80
    return done.returncode, done.stdout.decode().rstrip("\n")


def _report(tmp_path: Path, name: str, *args: str) -> Path:
    path = tmp_path / name
    cli.main([*args, "--json", str(path), "--quiet"])
    return path


def _dated(path: Path, seconds_from_now: int) -> Path:
    """The real H200 report, written to ``path`` as if created ``seconds_from_now`` from now (negative: ago)."""
    report = json.loads(H200_REPORT.read_text())
    report["created_utc"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() + seconds_from_now))
    path.write_text(json.dumps(report))
    return path


def test_a_healthy_report_is_ok(tmp_path: Path) -> None:
    path = _report(tmp_path, "ok.json", "--simulate", "h200", "--simulate", "h200")
    assert check(str(path)) == (0, "smem ok: 2 GPUs, opt-in 232448 B")


def test_the_real_h200_report_is_ok() -> None:
    assert check(str(H200_REPORT)) == (0, "smem ok: 1 GPU, opt-in 232448 B")


def test_a_mismatch_is_exit_1_naming_the_device_and_the_bytes(tmp_path: Path) -> None:
    path = _report(tmp_path, "mm.json", "--simulate", "h200", "--simulate", "h200,optin=204800")
    assert check(str(path)) == (1, "smem MISMATCH SIM-sm_90-1 opt-in 204800 B, reported 232448")


def test_many_mismatches_still_fit_80_bytes(tmp_path: Path) -> None:
    path = _report(tmp_path, "fewer.json", "--simulate", "h200,fewer=1", "--simulate", "h200,fewer=2")
    code, line = check(str(path))
    assert code == 1 and line.startswith("smem MISMATCH SIM-sm_90-0 blocks/SM at 0 B 31") and line.endswith(" (+1 GPUs)")


def test_an_incomplete_report_is_unknown(tmp_path: Path) -> None:
    path = _report(tmp_path, "inc.json", "--simulate", "h200,sticky=200000", "--max-restarts", "0")
    code, line = check(str(path))
    assert code == 2 and line.startswith("smem INCOMPLETE SIM-sm_90-0: ")


def test_a_stale_report_is_unknown(tmp_path: Path) -> None:
    path = _dated(tmp_path / "old.json", -7200)
    code, line = check(str(path), "--max-age", "3600")
    assert code == 2 and line.startswith("smem STALE: report 7") and line.endswith(" s old (max 3600 s)")
    assert check(str(path), "--max-age", "9000")[0] == 0


def test_a_missing_report_is_unknown_with_a_long_path_cut_to_80_bytes(tmp_path: Path) -> None:
    path = tmp_path / ("a-very-long-folder-name-" * 6) / "report.json"
    code, line = check(str(path))
    assert code == 2 and line.startswith("smem UNKNOWN: no report at ") and line.endswith("...")


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b'{"schema": "bisect_smem/fit/v1"}',
                                     b'{"schema": "bisect_smem/report/v1", "devices": 3}'],
                         ids=["not-json", "not-utf8", "foreign", "bad-field"])
def test_an_unreadable_report_is_unknown(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    code, line = check(str(path))
    assert code == 2 and line.startswith("smem UNKNOWN: ")


def test_a_report_of_a_run_without_gpu_is_unknown(tmp_path: Path) -> None:
    report = json.loads(H200_REPORT.read_text())
    report.update(devices=[], result="no_gpu", exit_code=3, error="no usable GPU: no NVIDIA driver found")
    path = tmp_path / "nogpu.json"
    path.write_text(json.dumps(report))
    assert check(str(path)) == (2, "smem NO GPU: no NVIDIA driver found")


def test_the_report_comes_from_the_environment_when_not_given(tmp_path: Path) -> None:
    path = _report(tmp_path, "env.json", "--simulate", "h200,optin=204800")
    assert check(env={REPORT_ENV: str(path)})[0] == 1


def test_bad_usage_is_exit_2_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", "--max-age", "-1", str(H200_REPORT)]) == 2
    assert capsys.readouterr().err.startswith("error: argument --max-age: must be > 0")


def test_the_node_problem_detector_plugin_reads_the_check_of_the_default_report() -> None:
    # NPD's container has no Python: its plugin reads the line `check` wrote beside the report on the host
    # (tests/fleet/test_kubernetes_manifests.py runs it); the DaemonSet writes the report where check looks.
    config = json.loads(NPD_CONFIG.read_text())
    assert config["plugin"] == "custom" and config["pluginConfig"]["max_output_length"] == 80
    assert config["pluginConfig"]["timeout"] == "5s"
    (rule,) = config["rules"]
    assert rule["condition"] == config["conditions"][0]["type"] and rule["type"] == "permanent"
    assert rule["path"].endswith("/bisect-smem-check.sh") and "args" not in rule
    daemonset = (ROOT / "examples" / "kubernetes" / "daemonset.yaml").read_text()
    assert f"value: {DEFAULT_REPORT}\n" in daemonset and f"value: {Path(DEFAULT_REPORT).parent}/check\n" in daemonset


def test_a_gpu_measured_by_two_backends_is_one_gpu(tmp_path: Path) -> None:
    data = json.loads(H200_REPORT.read_text())  # as --backend all writes it: the device once per backend
    data["backend"] = "all"
    data["devices"].append({**data["devices"][0], "backend": "numba"})
    path = tmp_path / "all.json"
    path.write_text(json.dumps(data))
    assert check(str(path)) == (0, "smem ok: 1 GPU, opt-in 232448 B")


def test_a_report_dated_ahead_of_the_clock_is_not_fresh(tmp_path: Path) -> None:
    path = _dated(tmp_path / "ahead.json", 7200)
    code, line = check(str(path), "--max-age", "3600")
    assert code == 2 and line.startswith("smem STALE: report dated 7") and line.endswith(" s ahead of this clock (max 3600 s)")
    assert check(str(path), "--max-age", "9000")[0] == 0


def test_a_fractional_max_age_is_said_as_given(tmp_path: Path) -> None:
    path = _dated(tmp_path / "old.json", -60)
    code, line = check(str(path), "--max-age", "1.5")
    assert code == 2 and line.startswith("smem STALE: report 6") and line.endswith(" s old (max 1.5 s)")


def test_a_run_without_its_baseline_is_incomplete_as_its_labels_say(tmp_path: Path) -> None:
    (tmp_path / "baselines").mkdir()
    path, features = tmp_path / "cmp.json", tmp_path / "cmp.nfd"
    assert cli.main(["--simulate", "h200", "--compare", str(tmp_path / "baselines"), "--json", str(path),
                     "--nfd", str(features), "--quiet"]) == 2
    assert "/verdict=bad_input\n" in features.read_text()  # the JSON's result, as NFD's verdict says it
    assert check(str(path)) == (2, "smem INCOMPLETE: the run found no baseline to compare with (exit 2)")
    data = json.loads(H200_REPORT.read_text())  # a run whose devices passed but that itself did not
    for result, code, line in [("incomplete", 4, "smem INCOMPLETE: the run did not complete (exit 4)"),
                               ("fail", 1, "smem FAIL: the run failed (exit 1)")]:
        (tmp_path / f"{result}.json").write_text(json.dumps({**data, "result": result, "exit_code": code}))
        assert check(str(tmp_path / f"{result}.json")) == (min(code, 2), line)


def test_an_incomplete_line_keeps_its_cause(tmp_path: Path) -> None:
    # The line becomes Slurm's drain reason and NHC's and NPD's message: the cause must survive 80 bytes.
    # A sticky fault ends its worker at once; the probe timeout is long enough that no step of a loaded
    # machine meets it first.
    path = _report(tmp_path, "inc.json", "--simulate", "h200,sticky=100000", "--max-restarts", "1",
                   "--probe-timeout", "600")
    code, line = check(str(path))
    assert (code, line) == (2, "smem INCOMPLETE SIM-sm_90-0: sticky fault in step static_split:0:32, given up")


def test_an_incomplete_line_keeps_a_timeout_as_its_cause(tmp_path: Path) -> None:
    # Only the probe timeout ends a hang. On a loaded machine another step may meet it first: whichever step
    # it was, the first fault gives the device up (--max-restarts 0) and the line names a timeout.
    path = _report(tmp_path, "hang.json", "--simulate", "h200,hang=100000", "--max-restarts", "0",
                   "--probe-timeout", "2")
    code, line = check(str(path))
    assert code == 2 and re.fullmatch(r"smem INCOMPLETE SIM-sm_90-0: timeout in step \S+, given up", line), line


def test_an_unmeasured_row_without_a_fault_is_named_with_its_note(tmp_path: Path) -> None:
    report = json.loads(H200_REPORT.read_text())
    dev = report["devices"][0]
    dev["summary"] = {"status": "incomplete", "counts": {"error": 1},
                      "reason": "ERROR residency staircase: reported -, measured -; not measured: no probe"}
    row = next(v for v in dev["verdicts"] if v["verdict"] == "match")
    row.update(verdict="ERROR", note="no residency probe", quantity="residency staircase")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    code, line = check(str(path))
    assert (code, line) == (2, "smem INCOMPLETE GPU-7d135d97: residency staircase: no residency probe")
