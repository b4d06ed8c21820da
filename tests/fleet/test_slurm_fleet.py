"""The fleet recipe on a real scheduler: a one-node Slurm cluster on localhost runs the sbatch array with
the simulated backend, one task deviating, and `merge` must name that task.

On CI (CI=true) this test must run: `make test` installs Slurm and munge from Debian's packages when it
runs as root. Elsewhere, without root or without Slurm, it skips with the reason.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from tests.paths import ROOT

RECIPE = ROOT / "examples" / "slurm" / "fleet.sbatch"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")


def _unavailable() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"Slurm/munge not installed ({', '.join(missing)} missing; `make test` installs them as root)"
    if os.geteuid() != 0:
        return "the one-node cluster runs its daemons as root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def slurm_cluster() -> Iterator[dict[str, str]]:
    reason = _unavailable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the Slurm fleet test must run on CI: {reason}")
        pytest.skip(reason)
    work = Path(tempfile.mkdtemp(prefix="smem-slurm-"))  # short: the munge socket path has a length limit
    node = socket.gethostname().split(".")[0]
    (work / "state").mkdir()
    (work / "spool").mkdir()
    key = work / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = work / "slurm.conf"
    conf.write_text(f"""ClusterName=bisectsmemtest
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={work}/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation={work}/state
SlurmdSpoolDir={work}/spool
SlurmctldPidFile={work}/slurmctld.pid
SlurmdPidFile={work}/slurmd.pid
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmctldLogFile={work}/slurmctld.log
SlurmdLogFile={work}/slurmd.log
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=ci Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    commands = [
        ["munged", "-f", f"--key-file={key}", f"--socket={work}/munge.socket", f"--pid-file={work}/munged.pid",
         f"--log-file={work}/munged.log", f"--seed-file={work}/munged.seed"],
        ["slurmctld", "-f", str(conf)],
        ["slurmd", "-f", str(conf), "-N", node],
    ]
    try:
        for command in commands:
            subprocess.run(command, env=env, check=True, timeout=30, capture_output=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=10)
            if state.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the one-node cluster did not come up: {state.stdout} {state.stderr}")
        yield {"SLURM_CONF": str(conf), "WORK": str(work)}
    finally:
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = work / f"{name}.pid"
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
                except (ProcessLookupError, ValueError):
                    pass
        time.sleep(0.5)
        shutil.rmtree(work, ignore_errors=True)


def test_sbatch_array_then_merge_names_the_deviating_task(slurm_cluster: dict[str, str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    work = Path(slurm_cluster["WORK"])
    args_file = work / "args.txt"
    # Four "hosts": the same GPU model, one of them reporting a smaller opt-in limit.
    args_file.write_text("--simulate h200\n--simulate h200\n--simulate h200,optin=200K\n--simulate h200\n")
    env = {**os.environ, "SLURM_CONF": slurm_cluster["SLURM_CONF"], "REPORT_DIR": str(work / "reports"),
           "BISECT_SMEM_PYTHON": sys.executable, "BISECT_SMEM_ARGS_FILE": str(args_file),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    submitted = subprocess.run(["sbatch", "--wait", "--array=0-3", f"--chdir={work}", str(RECIPE)], env=env,
                               capture_output=True, text=True, timeout=300)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr + _logs(work)
    reports = sorted((work / "reports").glob("*.json"))
    assert len(reports) == 4, _logs(work)
    code = cli.main(["merge", *map(str, reports)])
    out = capsys.readouterr().out
    assert code == 1
    deviating = [line.split(".json:")[0] for line in out.splitlines() if "optin_dynamic_ceiling_bytes: 204800" in line]
    assert deviating and all(label.endswith("-2") for label in deviating), out


def _logs(work: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(work.glob("*.log")))
