"""The HealthCheckProgram and the Prolog on a real one-node Slurm cluster, over simulated devices: a
mismatch drains the node with the tool's reason (and, from the Prolog, requeues the job held); a
healthy device leaves the node up."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from tests.paths import ROOT
from tests.slurm_cluster import Cluster, one_node_cluster, wrapper

SLURM = ROOT / "examples" / "slurm"
MISMATCH_REASON = "Reason=bisect-smem: smem MISMATCH SIM-sm_90-0 opt-in 204800 B, reported 232448"


def _env(work: Path, spec: str) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT),
            "BISECT_SMEM_PYTHON": sys.executable, "BISECT_SMEM_REPORT": str(work / "report.json"),
            "BISECT_SMEM_ARGS": f"--simulate {spec}", "BISECT_SMEM_CONF": "/nonexistent",
            "SLURM_CONF": str(work / "slurm.conf")}


def _health_check(spec: str) -> Callable[[Path], str]:
    """The slurm.conf lines of a HealthCheckProgram that measures ``spec`` every 2 s."""
    def lines(work: Path) -> str:
        program = wrapper(work / "healthcheck", SLURM / "healthcheck.sh", {**_env(work, spec), "BISECT_SMEM_MEASURE": "1"})
        return f"HealthCheckProgram={program}\nHealthCheckInterval=2\n"
    return lines


def _drained(cluster: Cluster) -> bool:
    return "DRAIN" in cluster.node_line() and "Reason=bisect-smem" in cluster.node_line()


def test_the_health_check_drains_a_mismatching_node_with_the_reason() -> None:
    with one_node_cluster(_health_check("h200,optin=204800")) as cluster:
        cluster.wait("the drain", lambda: _drained(cluster))
        line = cluster.node_line()
        print(f"\nscontrol show node: {line}")
        assert re.search(r"State=\S*DRAIN", line) and MISMATCH_REASON in line, line


def test_the_health_check_leaves_a_healthy_node_up() -> None:
    with one_node_cluster(_health_check("h200")) as cluster:
        report = cluster.work / "report.json"
        cluster.wait("a health check", report.exists)
        first = report.stat().st_mtime_ns
        cluster.wait("a second health check", lambda: report.stat().st_mtime_ns != first)
        line = cluster.node_line()
        assert re.search(r"State=IDLE ", line) and "DRAIN" not in line and "Reason=" not in line, line
        assert cluster.run("sinfo", "-h", "-o", "%T").strip() == "idle"


def test_a_job_whose_prolog_finds_a_mismatch_is_requeued_and_the_node_drained() -> None:
    def lines(work: Path) -> str:
        env = {**_env(work, "h200,optin=204800"), "BISECT_SMEM_ALL_GPUS": "1"}  # no GPU gres in this cluster
        return f"Prolog={wrapper(work / 'prolog', SLURM / 'prolog.sh', env)}\n"

    with one_node_cluster(lines) as cluster:
        job = cluster.run("sbatch", "--parsable", f"--chdir={cluster.work}", "--wrap", "true").strip().split(";")[0]
        cluster.wait("the drain", lambda: _drained(cluster))
        cluster.wait("the requeue", lambda: "Restarts=1" in cluster.run("scontrol", "show", "job", job))
        shown = " ".join(cluster.run("scontrol", "show", "job", job).split())
        assert "JobState=PENDING" in shown and re.search(r"Reason=\S*[Hh]eld", shown), shown
        assert MISMATCH_REASON in cluster.node_line(), cluster.node_line()
