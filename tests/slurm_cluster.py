"""A real one-node Slurm cluster on localhost for the tests: munged, slurmctld and slurmd as root, with a
generated munge key and whatever extra slurm.conf lines a test needs (a HealthCheckProgram, a Prolog).

On CI (CI=true) the tests that use it must run: `make test` installs Slurm and munge from Debian's
packages when it runs as root. Elsewhere, without root or without Slurm, they skip with the reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol")


def unavailable() -> str | None:
    """Why no cluster can be started here, or None."""
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


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its folder, node name and the environment that reaches it."""

    work: Path
    node: str
    env: dict[str, str]

    def run(self, *command: str) -> str:
        """A Slurm command's stdout (it must succeed)."""
        done = subprocess.run(list(command), env=self.env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def node_line(self) -> str:
        """``scontrol show node`` of the one node, on one line."""
        return " ".join(self.run("scontrol", "show", "node", self.node).split())

    def wait(self, what: str, ready: Callable[[], bool], timeout_s: float = 60) -> None:
        """Poll ``ready`` until it holds; fail naming ``what`` (with the daemons' logs) when it does not."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.5)
        pytest.fail(f"{what} did not happen in {timeout_s:.0f} s: {self.node_line()}\n{self.logs()}")

    def logs(self) -> str:
        """The tail of every log in the cluster's folder."""
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(self.work.glob("*.log")))


def _config(work: Path, node: str, extra: str) -> str:
    return f"""ClusterName=bisectsmemtest
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
{extra}
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=ci Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


@contextlib.contextmanager
def one_node_cluster(extra_conf: Callable[[Path], str] = lambda work: "") -> Iterator[Cluster]:
    """Start the cluster (``extra_conf(work)`` gives added slurm.conf lines), wait until slurmctld hears the
    node, and stop every daemon afterwards."""
    reason = unavailable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the Slurm tests must run on CI: {reason}")
        pytest.skip(reason)
    work = Path(tempfile.mkdtemp(prefix="smem-slurm-"))  # short: the munge socket path has a length limit
    node = socket.gethostname().split(".")[0]
    for sub in ("state", "spool"):
        (work / sub).mkdir()
    key = work / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = work / "slurm.conf"
    conf.write_text(_config(work, node, extra_conf(work)))
    cluster = Cluster(work, node, {**os.environ, "SLURM_CONF": str(conf)})
    try:
        for command in (["munged", "-f", f"--key-file={key}", f"--socket={work}/munge.socket",
                         f"--pid-file={work}/munged.pid", f"--log-file={work}/munged.log",
                         f"--seed-file={work}/munged.seed"], ["slurmctld", "-f", str(conf)],
                        ["slurmd", "-f", str(conf), "-N", node]):
            subprocess.run(command, env=cluster.env, check=True, timeout=30, capture_output=True)
        cluster.wait("the node registering", lambda: "SlurmdStartTime=None" not in cluster.node_line()
                     and "State=UNKNOWN" not in cluster.node_line())
        yield cluster
    finally:
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = work / f"{name}.pid"
            if pid_file.exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        time.sleep(0.5)
        shutil.rmtree(work, ignore_errors=True)


def wrapper(path: Path, script: Path, env: dict[str, str]) -> Path:
    """An executable that sets ``env`` and runs ``script``: slurmd starts its programs with no
    arguments and an environment of its own, as a site's installed script would read /etc/default."""
    exports = "".join(f"export {key}='{value}'\n" for key, value in env.items())
    path.write_text(f"#!/bin/sh\n{exports}exec '{script}' 2>>'{path.with_suffix('.log')}'\n")
    path.chmod(0o755)
    return path
