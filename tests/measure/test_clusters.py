"""Thread block clusters on simulated devices: measured on cc 9.0+, skipped with a reason below."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisect_smem.analysis.verdicts import cluster_verdicts
from bisect_smem.core.model import Measured
from bisect_smem.core.profiles import PROFILES, ArchProfile, find_profile
from bisect_smem.devices.backends.sim.backend import SimSession
from bisect_smem.devices.backends.sim.model import DeviceModel
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.probes import ClusterOutcome
from bisect_smem.experiments.clusters import ACTIVE_SIZES, ClusterExperiments, cluster_probe_sizes
from tests.conftest import run_cli_json


def run_json(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code, report = run_cli_json(args, tmp_path, capsys)
    return code, report["devices"][0]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.key)
def test_clusters_are_measured_on_cc9_and_skipped_below(profile: ArchProfile, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, dev = run_json(["--simulate", profile.key], tmp_path, capsys)
    assert code == 0
    m = dev["measured"]
    rows = [v for v in dev["verdicts"] if "cluster" in v["quantity"] or "distributed" in v["quantity"]]
    if profile.compute_capability < (9, 0):
        assert m["clusters"] == [] and m["clusters_skipped"].startswith("thread block clusters need cc 9.0+")
        assert [(r["quantity"], r["verdict"]) for r in rows] == [("thread block clusters", "info")]
        return
    optin = profile.max_smem_per_block_optin_bytes
    assert [c["dynamic_bytes"] for c in m["clusters"]] == cluster_probe_sizes(optin, 128)
    assert m["clusters"][-1]["dynamic_bytes"] == optin
    for c in m["clusters"]:
        assert c["max_cluster_size_portable"] == 8 and c["max_cluster_size_nonportable"] == 16
        assert c["dsm_verified"] is True
        assert sorted(map(int, c["active_clusters"])) == list(ACTIVE_SIZES)
        for counts in c["active_clusters"].values():
            assert counts["measured"] == counts["api"] > 0
    assert rows and {r["verdict"] for r in rows} == {"match"}


class WrongNeighbour(SimSession):
    """Distributed shared memory that reads back one wrong byte in clusters of four or more."""

    def cluster_launch(self, dynamic_bytes: int, cluster_size: int, nonportable: bool,
                       threads: int) -> ClusterOutcome:
        got = super().cluster_launch(dynamic_bytes, cluster_size, nonportable, threads)
        if got.ok and cluster_size >= 4:
            return ClusterOutcome(got.outcome, "", got.blocks_ran, got.bytes_checked, 1, got.cluster_size_seen)
        return got


def test_a_wrong_byte_in_distributed_shared_memory_is_a_mismatch() -> None:
    session = WrongNeighbour(0, SimSpec(DeviceModel.from_profile(find_profile("h200"))), (0,))
    results = ClusterExperiments(session, 132, 32, lambda _t: None).measure(232448, 128)
    assert all(c.dsm_verified is False for c in results)
    rows = cluster_verdicts(Measured(clusters=tuple(results)))
    dsm = [r for r in rows if r.quantity.startswith("distributed")]
    assert dsm and all(r.verdict == "MISMATCH" and r.measured == "WRONG BYTES" for r in dsm)


def test_cluster_results_that_differ_from_the_api_are_mismatches() -> None:
    session = SimSession(0, SimSpec(DeviceModel.from_profile(find_profile("h200"))), (0,))
    (first, *_) = ClusterExperiments(session, 132, 32, lambda _t: None).measure(232448, 128)
    skewed = type(first)(first.dynamic_bytes, first.max_cluster_size_portable, 12, first.api_max_cluster_size,
                         {"16": {"measured": 0, "api": 8}}, True)
    rows = {r.quantity: r for r in cluster_verdicts(Measured(clusters=(skewed,)))}
    assert rows["largest cluster at 1024 B (non-portable)"].verdict == "MISMATCH"
    assert rows["co-resident clusters of 16 at 1024 B"].verdict == "MISMATCH"
