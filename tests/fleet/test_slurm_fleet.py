"""The fleet recipe on a real scheduler: a one-node Slurm cluster on localhost runs the sbatch array with
the simulated backend, one task deviating, and `merge` must name that task.

On CI (CI=true) this test must run: `make test` installs Slurm and munge from Debian's packages when it
runs as root. Elsewhere, without root or without Slurm, it skips with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bisect_smem.app.cli import main as cli
from tests.paths import ROOT
from tests.slurm_cluster import Cluster, one_node_cluster

RECIPE = ROOT / "examples" / "slurm" / "fleet.sbatch"


@pytest.fixture()
def slurm_cluster() -> Iterator[Cluster]:
    with one_node_cluster() as cluster:
        yield cluster


def test_sbatch_array_then_merge_names_the_deviating_task(slurm_cluster: Cluster,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    work = slurm_cluster.work
    args_file = work / "args.txt"
    # Four "hosts": the same GPU model, one of them reporting a smaller opt-in limit.
    args_file.write_text("--simulate h200\n--simulate h200\n--simulate h200,optin=200K\n--simulate h200\n")
    env = {**slurm_cluster.env, "REPORT_DIR": str(work / "reports"),
           "BISECT_SMEM_PYTHON": sys.executable, "BISECT_SMEM_ARGS_FILE": str(args_file),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    submitted = subprocess.run(["sbatch", "--wait", "--array=0-3", f"--chdir={work}", str(RECIPE)], env=env,
                               capture_output=True, text=True, timeout=300)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr + slurm_cluster.logs()
    reports = sorted((work / "reports").glob("*.json"))
    assert len(reports) == 4, slurm_cluster.logs()
    code = cli.main(["merge", *map(str, reports)])
    out = capsys.readouterr().out
    assert code == 1
    deviating = [line.split(".json:")[0] for line in out.splitlines() if "optin_dynamic_ceiling_bytes: 204800" in line]
    assert deviating and all(label.endswith("-2") for label in deviating), out

