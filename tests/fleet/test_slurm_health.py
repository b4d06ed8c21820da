"""The HealthCheckProgram and the Prolog on a real one-node Slurm cluster, over simulated devices: a
mismatch drains the node with the tool's reason (and, from the Prolog, requeues the job held); a
healthy device leaves the node up; a node the health check drained is resumed once it passes, and one
drained by someone else is left drained; and a 1-GPU job on a 4-GPU node leaves the node's report,
and the bad GPU the job did not use, as they were."""

from __future__ import annotations

import json
import os
import re
import subprocess
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
        reason = MISMATCH_REASON.replace("bisect-smem:", f"bisect-smem prolog of job {job}:")
        assert reason in cluster.node_line(), cluster.node_line()  # not the health check's: it resumes none


def _health_check_from(conf: str) -> Callable[[Path], str]:
    """A HealthCheckProgram every 2 s whose settings the test changes meanwhile (BISECT_SMEM_CONF=work/conf)."""
    def lines(work: Path) -> str:
        (work / "conf").write_text(conf)
        env = {**_env(work, "h200"), "BISECT_SMEM_MEASURE": "1", "BISECT_SMEM_CONF": str(work / "conf")}
        return f"HealthCheckProgram={wrapper(work / 'healthcheck', SLURM / 'healthcheck.sh', env)}\nHealthCheckInterval=2\n"
    return lines


def test_the_health_check_resumes_the_node_it_drained_once_it_passes() -> None:
    with one_node_cluster(_health_check_from("BISECT_SMEM_ARGS='--simulate h200,optin=204800'\n")) as cluster:
        cluster.wait("the drain", lambda: _drained(cluster))
        (cluster.work / "conf").write_text("BISECT_SMEM_ARGS='--simulate h200'\n")  # the GPU was replaced
        cluster.wait("the resume", lambda: "DRAIN" not in cluster.node_line())
        line = cluster.node_line()
        print(f"\nscontrol show node: {line}")
        # IDLE (+NOT_RESPONDING at times, on a loaded 2-CPU machine): what matters is the drain gone.
        assert re.search(r"State=IDLE[ +]", line) and "Reason=" not in line, line
        assert "resuming" in (cluster.work / "healthcheck.log").read_text()


def test_the_health_check_leaves_someone_elses_drain() -> None:
    with one_node_cluster(_health_check_from("BISECT_SMEM_ARGS='--simulate h200'\n")) as cluster:
        cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=DRAIN", "Reason=new cables")
        report = cluster.work / "report.json"
        cluster.wait("a health check", report.exists)
        for _ in range(2):  # two more passing health checks
            seen = report.stat().st_mtime_ns
            cluster.wait("another health check", lambda seen=seen: report.stat().st_mtime_ns != seen)
        line = cluster.node_line()
        assert re.search(r"State=\S*DRAIN", line) and "Reason=new cables" in line, line


def test_a_one_gpu_job_on_a_four_gpu_node_leaves_the_nodes_report_and_its_bad_gpu() -> None:
    # The node's report covers its 4 GPUs, the last of which is bad; the job gets one good GPU.
    four = ["--simulate", "h200", "--simulate", "h200", "--simulate", "h200", "--simulate", "h200,optin=204800"]

    def lines(work: Path) -> str:
        env = {**_env(work, "h200"), "SLURM_JOB_GPUS": "0", "BISECT_SMEM_JOB_REPORTS": str(work / "jobs")}
        return f"Prolog={wrapper(work / 'prolog', SLURM / 'prolog.sh', env)}\n"

    with one_node_cluster(lines) as cluster:
        node_report = cluster.work / "report.json"
        subprocess.run([sys.executable, "-m", "bisect_smem", *four, "--quiet", "--json", str(node_report)],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=120)
        before = node_report.read_bytes()
        job = cluster.run("sbatch", "--parsable", f"--chdir={cluster.work}", "--wrap", "true").strip().split(";")[0]
        cluster.wait("the job's end", lambda: "JobState=COMPLETED" in cluster.run("scontrol", "show", "job", job))
        job_report = json.loads((cluster.work / "jobs" / f"{job}.prolog.json").read_text())
        assert len(job_report["devices"]) == 1 and job_report["result"] == "pass"
        assert node_report.read_bytes() == before and len(json.loads(before)["devices"]) == 4
        # The health check still reads the node's 4 GPUs, and drains for the one the job did not use.
        check = wrapper(cluster.work / "healthcheck", SLURM / "healthcheck.sh", _env(cluster.work, "h200"))
        subprocess.run([str(check)], env=cluster.env, capture_output=True, timeout=60)
        assert "Reason=bisect-smem: smem MISMATCH SIM-sm_90-3 opt-in 204800 B" in cluster.node_line()
