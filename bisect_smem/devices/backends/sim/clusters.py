"""The simulated thread block clusters: scheduled within one GPC (core.hardware.SMS_PER_GPC SMs, the last
the rest), each cluster's blocks as many as residency lets an SM hold; or as the replayed report recorded."""

from __future__ import annotations

from bisect_smem.core.hardware import NONPORTABLE_CLUSTER_SIZE, PORTABLE_CLUSTER_SIZE, SMS_PER_GPC, has_clusters
from bisect_smem.core.profiles import cc_text
from bisect_smem.devices.backends.families import Clusters
from bisect_smem.devices.backends.sim.context import INVALID, POISONED
from bisect_smem.devices.backends.sim.model import UNRECORDED
from bisect_smem.devices.backends.sim.residency import SimResidency
from bisect_smem.devices.probes import ClusterOutcome, ClusterResidencyOutcome, Outcome


class SimClusters(SimResidency, Clusters):
    """Clusters of a simulated device, from the blocks per SM its residency gives."""

    def cluster_support(self) -> str | None:
        if self.record is not None and self.record.clusters_skipped:
            return self.record.clusters_skipped
        if not has_clusters(self.model.compute_capability):
            return f"thread block clusters need cc 9.0+ (this device: {cc_text(self.model.compute_capability)})"
        return None

    def _blocks_per_sm(self, dynamic_bytes: int, threads: int) -> int:
        return self.residency(dynamic_bytes, threads, 0).blocks_per_sm_min or 0

    def _gpc_sizes(self) -> list[int]:
        full, rest = divmod(self.model.multiprocessor_count, SMS_PER_GPC)
        return [SMS_PER_GPC] * full + ([rest] if rest else [])

    def cluster_launches(self, dynamic_bytes: int, sizes: tuple[int, ...], nonportable: bool,
                         threads: int) -> list[ClusterOutcome]:
        if self.record and not self._poisoned:
            return self.record.cluster_launches(dynamic_bytes, sizes, nonportable)
        results = []
        for size in sizes:
            results.append(self.cluster_launch(dynamic_bytes, size, nonportable, threads))
            if not results[-1].ok:
                break
        return results

    def cluster_launch(self, dynamic_bytes: int, cluster_size: int, nonportable: bool,
                       threads: int) -> ClusterOutcome:
        """One cluster by the rules: its size within the limit, its blocks within one GPC."""
        if self._poisoned:
            return ClusterOutcome(Outcome.ILLEGAL_ADDRESS, POISONED)
        limit = NONPORTABLE_CLUSTER_SIZE if nonportable else PORTABLE_CLUSTER_SIZE
        if not has_clusters(self.model.compute_capability) or not 1 <= cluster_size <= limit:
            return ClusterOutcome(Outcome.CLUSTER_MISCONFIG, "CUDA_ERROR_INVALID_CLUSTER_SIZE")
        if dynamic_bytes > self.model.optin_bytes:
            return ClusterOutcome(Outcome.INVALID_VALUE, INVALID)
        if self._blocks_per_sm(dynamic_bytes, threads) * max(self._gpc_sizes()) < cluster_size:
            return ClusterOutcome(Outcome.CLUSTER_MISCONFIG, "CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES")
        return ClusterOutcome(Outcome.OK, "", cluster_size, cluster_size * dynamic_bytes, 0, cluster_size)

    def cluster_residency(self, dynamic_bytes: int, cluster_size: int, nonportable: bool, threads: int,
                          hold_ns: int, clusters: int) -> ClusterResidencyOutcome:
        rec = self.record.clusters.get(dynamic_bytes) if self.record else None
        counts = rec.active_clusters.get(str(cluster_size)) if rec is not None else None
        if counts is not None and counts.get("measured") is not None:
            return ClusterResidencyOutcome(Outcome.OK, "", min(counts["measured"], clusters), counts.get("api"))
        if self.record:
            return ClusterResidencyOutcome(Outcome.OTHER, f"clusters of {cluster_size} at {dynamic_bytes} B: {UNRECORDED}")
        bps = self._blocks_per_sm(dynamic_bytes, threads)
        total = sum(gpc * bps // cluster_size for gpc in self._gpc_sizes())
        return ClusterResidencyOutcome(Outcome.OK, "", min(total, clusters), total)

    def cluster_api_max_size(self, dynamic_bytes: int, threads: int) -> int | None:
        if self.record:
            rec = self.record.clusters.get(dynamic_bytes)
            return rec.api_max_cluster_size if rec is not None else None
        return min(NONPORTABLE_CLUSTER_SIZE, self._blocks_per_sm(dynamic_bytes, threads) * max(self._gpc_sizes()))
