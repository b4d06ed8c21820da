"""The Slurm scripts on their own: bash parses them and shellcheck finds nothing; the NHC module under a
harness that provides NHC's die and log (Debian has no NHC package), over real reports; and the
Prolog/Epilog and HealthCheckProgram over a stand-in for the tool and scontrol, for every exit code.
tests/fleet/test_slurm_health.py runs them on a real one-node Slurm."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from tests.conftest import consumer_tool
from tests.paths import H200_REPORT, ROOT

SLURM = ROOT / "examples" / "slurm"
SCRIPTS = [SLURM / "healthcheck.sh", SLURM / "prolog.sh", SLURM / "bisect_smem.nhc", SLURM / "fleet.sbatch"]
# Stands in for "python -m bisect_smem": records each call with the CUDA variables it saw, and answers
# with the exit codes the test asks for.
FAKE_PYTHON = """#!/usr/bin/env bash
shift 2
echo "$* CVD=${CUDA_VISIBLE_DEVICES-unset} ORDER=${CUDA_DEVICE_ORDER-unset}" >> "$FAKE_LOG"
if [ "$1" = check ]; then echo "smem MISMATCH GPU-7d135d97 opt-in 204800 B"; exit "${FAKE_CHECK:-0}"; fi
# A measurement that ends with a verdict (0, 1, 4) writes its report, as the tool does; others write none.
case "${FAKE_MEASURE:-0}" in 0|1|4) while [ $# -gt 1 ]; do [ "$1" = --json ] && echo "{}" > "$2"; shift; done ;; esac
exit "${FAKE_MEASURE:-0}"
"""
# Stands in for scontrol: records each call; `show node` answers as slurmctld would for FAKE_NODE's state.
FAKE_SCONTROL = """#!/usr/bin/env bash
echo "scontrol $*" >> "$FAKE_LOG"
if [ "$1" = show ]; then echo "NodeName=node7 Arch=x86_64 ${FAKE_NODE:-State=IDLE ThreadsPerCore=1}"; fi
"""


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_parses_the_script(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_finds_nothing(script: Path) -> None:
    tool = consumer_tool("shellcheck", "`make test` installs it as root")
    done = subprocess.run([tool, "-s", "bash", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


NHC_HARNESS = """die() { echo "DIE $1 $2"; return 0; }
log() { echo "LOG $*"; }
source "$MODULE"
check_smem_limits "$@"
echo "RC $?"
"""


def nhc(*args: str) -> list[str]:
    """check_smem_limits ARGS under NHC's functions: the lines die, log and the return code gave."""
    done = subprocess.run(["bash", "-c", NHC_HARNESS, "harness", *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "MODULE": str(SLURM / "bisect_smem.nhc"), "PYTHONPATH": str(ROOT),
                               "BISECT_SMEM_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("nhc")
    made = {}
    for name, spec in (("ok", "h200"), ("mismatch", "h200,optin=204800")):
        made[name] = folder / f"{name}.json"
        cli.main(["--simulate", spec, "--json", str(made[name]), "--quiet"])
    return made


def test_nhc_passes_a_healthy_report(reports: dict[str, Path]) -> None:
    assert nhc(str(reports["ok"])) == ["RC 0"]


def test_nhc_dies_on_a_mismatch_with_the_check_line(reports: dict[str, Path]) -> None:
    assert nhc("-a", "3600", str(reports["mismatch"])) == [
        "DIE 1 bisect-smem: smem MISMATCH SIM-sm_90-0 opt-in 204800 B, reported 232448", "RC 1"]


def test_nhc_logs_a_stale_report_and_fails_it_only_with_u() -> None:
    lines = nhc("-a", "60", str(H200_REPORT))
    assert lines[0].startswith("LOG check_smem_limits: not judged: smem STALE: report ") and lines[1] == "RC 0"
    lines = nhc("-u", "-a", "60", str(H200_REPORT))
    assert lines[0].startswith("DIE 1 bisect-smem: smem STALE: ") and lines[1] == "RC 1"


def test_nhc_takes_the_python_from_p_and_refuses_a_bad_option(reports: dict[str, Path], tmp_path: Path) -> None:
    assert nhc("-p", "/nonexistent/python", str(reports["ok"]))[-1] == "RC 1"  # exit 127: a broken setup fails
    assert nhc("-a") == ["DIE 1 check_smem_limits: option -a needs a value", "RC 1"]
    assert nhc("-x") == ["DIE 1 check_smem_limits: unknown option -x", "RC 1"]
    assert nhc(str(tmp_path / "missing.json"))[0].startswith("LOG check_smem_limits: not judged: smem UNKNOWN: ")


def run_hook(script: str, tmp_path: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    """A Slurm script over the stand-ins: its exit code and the calls it made, in order."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("python", FAKE_PYTHON), ("scontrol", FAKE_SCONTROL), ("logger", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_LOG": str(log), "BISECT_SMEM_PYTHON": str(bin_dir / "python"),
            "BISECT_SMEM_REPORT": str(tmp_path / "state" / "report.json"), "SLURMD_NODENAME": "node7",
            "BISECT_SMEM_JOB_REPORTS": str(tmp_path / "state" / "jobs"),
            "SLURM_JOB_ID": "42", "BISECT_SMEM_CONF": "/nonexistent"}
    done = subprocess.run([str(SLURM / script)], capture_output=True, text=True, timeout=30, env={**base, **env})
    return done.returncode, log.read_text().splitlines() if log.exists() else []


DRAIN = 'scontrol update NodeName=node7 State=DRAIN Reason=bisect-smem: smem MISMATCH GPU-7d135d97 opt-in 204800 B'
PROLOG_DRAIN = ("scontrol update NodeName=node7 State=DRAIN Reason=bisect-smem prolog of job 42: smem MISMATCH "
                "GPU-7d135d97 opt-in 204800 B")
RESUME = "scontrol update NodeName=node7 State=RESUME"


@pytest.mark.parametrize("measured, option, code, drained", [
    ("0", None, 0, False), ("1", None, 1, True), ("3", None, 0, False), ("4", None, 0, False),
    ("4", "fail", 1, True), ("2", None, 1, False), ("137", None, 1, False),
], ids=["ok", "mismatch", "no-gpu", "incomplete-pass", "incomplete-fail", "usage", "killed"])
def test_the_prolog_maps_each_exit_code(measured: str, option: str | None, code: int, drained: bool,
                                        tmp_path: Path) -> None:
    env = {"SLURM_JOB_GPUS": "0", "FAKE_MEASURE": measured, "FAKE_CHECK": "1" if measured == "1" else "2"}
    if option:
        env["BISECT_SMEM_ON_INCOMPLETE"] = option
    got, calls = run_hook("prolog.sh", tmp_path, env)
    assert got == code and (PROLOG_DRAIN in calls) == drained, calls
    # The job's own report, never the node's (state/report.json), which covers every GPU of the node.
    assert calls[0] == f"--quiet --level quick --json {tmp_path}/state/jobs/42.prolog.json CVD=0 ORDER=PCI_BUS_ID"


def test_the_prolog_measures_the_jobs_gpus_only(tmp_path: Path) -> None:
    _, calls = run_hook("prolog.sh", tmp_path, {"SLURM_JOB_GPUS": "2,3"})
    assert calls[0].endswith("CVD=2,3 ORDER=PCI_BUS_ID")
    _, calls = run_hook("prolog.sh", tmp_path, {"CUDA_VISIBLE_DEVICES": "GPU-7d135d97", "SLURM_JOB_GPUS": "2"})
    assert calls[0].endswith("CVD=GPU-7d135d97 ORDER=PCI_BUS_ID")
    assert run_hook("prolog.sh", tmp_path, {}) == (0, [])  # a job without GPUs: nothing measured
    _, calls = run_hook("prolog.sh", tmp_path, {"BISECT_SMEM_ALL_GPUS": "1", "BISECT_SMEM_ARGS": "--device 1"})
    assert calls[0].endswith("--device 1 CVD=unset ORDER=PCI_BUS_ID")


def test_the_epilog_is_the_same_script_by_context_or_name(tmp_path: Path) -> None:
    assert (SLURM / "epilog.sh").resolve() == (SLURM / "prolog.sh").resolve()
    for script, env in (("epilog.sh", {}), ("prolog.sh", {"SLURM_SCRIPT_CONTEXT": "epilog_slurmd"})):
        done = subprocess.run([str(SLURM / script)], capture_output=True, text=True, timeout=30,
                              env={"PATH": "/usr/bin:/bin", "BISECT_SMEM_CONF": "/nonexistent", "SLURM_JOB_ID": "9", **env})
        assert done.returncode == 0 and "epilog of job 9: the job has no GPUs" in done.stderr


@pytest.mark.parametrize("checked, option, drained", [
    ("0", None, False), ("1", None, True), ("2", None, False), ("2", "drain", True),
], ids=["ok", "problem", "unknown", "unknown-drains"])
def test_the_health_check_drains_on_a_problem(checked: str, option: str | None, drained: bool,
                                              tmp_path: Path) -> None:
    env = {"FAKE_CHECK": checked, **({"BISECT_SMEM_ON_UNKNOWN": option} if option else {})}
    code, calls = run_hook("healthcheck.sh", tmp_path, env)
    assert code == 0 and (DRAIN in calls) == drained, calls
    assert calls[0].startswith(f"check {tmp_path}/state/report.json")


def test_the_health_check_measures_first_when_asked(tmp_path: Path) -> None:
    _, calls = run_hook("healthcheck.sh", tmp_path, {"BISECT_SMEM_MEASURE": "1", "BISECT_SMEM_MAX_AGE": "600",
                                                     "BISECT_SMEM_ARGS": "--device 0"})
    assert calls[0].startswith(f"--quiet --level quick --json {tmp_path}/state/report.json --device 0 ")
    assert calls[1].startswith(f"check --max-age 600 {tmp_path}/state/report.json")


@pytest.mark.parametrize("node, resumed", [
    ("State=IDLE+DRAIN ThreadsPerCore=1 Reason=bisect-smem: smem MISMATCH GPU-7d135d97 [root@2026-12-01T10:10:47]", True),
    ("State=MIXED+DRAIN ThreadsPerCore=1 Reason=bisect-smem: smem MISMATCH GPU-7d135d97 [root@2026-12-01T10:10:47]", True),
    ("State=IDLE+DRAIN ThreadsPerCore=1 Reason=new cables [admin@2026-12-01T10:10:47]", False),
    ("State=IDLE+DRAIN ThreadsPerCore=1 Reason=bisect-smem prolog of job 7: smem MISMATCH [root@2026-12-01]", False),
    ("State=IDLE+DRAIN ThreadsPerCore=1 Reason=NHC: check_smem_limits: bisect-smem: x [root@2026-12-01]", False),
    ("State=IDLE ThreadsPerCore=1", False),
], ids=["own-idle", "own-mixed", "admin", "prolog", "nhc", "not-drained"])
def test_the_health_check_resumes_only_its_own_drain(node: str, resumed: bool, tmp_path: Path) -> None:
    code, calls = run_hook("healthcheck.sh", tmp_path, {"FAKE_CHECK": "0", "FAKE_NODE": node})
    assert code == 0 and (RESUME in calls) == resumed, calls
    assert not any("State=DRAIN" in c for c in calls)
    for checked in ("1", "2"):  # a node that does not pass is never resumed
        _, calls = run_hook("healthcheck.sh", tmp_path, {"FAKE_CHECK": checked, "FAKE_NODE": node})
        assert RESUME not in calls, calls


def test_a_passing_epilog_removes_the_jobs_reports_and_a_failing_one_keeps_them(tmp_path: Path) -> None:
    jobs = tmp_path / "state" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "42.prolog.json").write_text("{}")
    env = {"SLURM_JOB_GPUS": "0", "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"}
    assert run_hook("prolog.sh", tmp_path, {**env, "FAKE_MEASURE": "1", "FAKE_CHECK": "1"})[0] == 1
    assert sorted(p.name for p in jobs.iterdir()) == ["42.epilog.json", "42.prolog.json"]
    code, calls = run_hook("prolog.sh", tmp_path, env)
    assert code == 0 and calls[0].startswith(f"--quiet --level quick --json {jobs}/42.epilog.json ")
    # This attempt's two reports are gone; the failed attempt's stays, moved aside under its time.
    (kept,) = jobs.iterdir()
    assert kept.name.startswith("42.epilog.2") and kept.name != "42.epilog.json"


def test_nhc_keeps_stderr_out_of_the_drain_reason(reports: dict[str, Path], tmp_path: Path) -> None:
    # A Python warning on stderr (a deprecation, a driver message) must not become the node's drain reason.
    noisy = tmp_path / "python"
    noisy.write_text(f'#!/bin/sh\necho "SomeWarning: a library spoke" >&2\nexec "{sys.executable}" "$@"\n')
    noisy.chmod(0o755)
    assert nhc("-p", str(noisy), "-a", "3600", str(reports["mismatch"])) == [
        "DIE 1 bisect-smem: smem MISMATCH SIM-sm_90-0 opt-in 204800 B, reported 232448", "RC 1"]


def test_a_requeued_jobs_attempt_never_reads_the_last_attempts_report(tmp_path: Path) -> None:
    jobs = tmp_path / "state" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "42.prolog.json").write_text("{}")  # the last attempt's, passing
    os.utime(jobs / "42.prolog.json", (1764892800, 1764892800))  # 2025-12-05T00:00:00Z
    code, calls = run_hook("prolog.sh", tmp_path, {"SLURM_JOB_GPUS": "0", "FAKE_MEASURE": "3", "FAKE_CHECK": "2"})
    # Moved aside under its own time: what this attempt's check reads is only what this attempt wrote (here,
    # nothing: a node that found no GPU).
    assert code == 0 and sorted(p.name for p in jobs.iterdir()) == ["42.prolog.20251205T000000Z.json"]
    assert calls[1].startswith(f"check {jobs}/42.prolog.json ")


def test_hooks_without_a_job_id_never_share_a_report(tmp_path: Path) -> None:
    env = {"SLURM_JOB_GPUS": "0", "SLURM_JOB_ID": ""}
    names = [run_hook("prolog.sh", tmp_path, env)[1][0].split("--json ")[1].split()[0] for _ in range(2)]
    assert names[0] != names[1] and all(Path(n).name.startswith("nojob.") for n in names), names
