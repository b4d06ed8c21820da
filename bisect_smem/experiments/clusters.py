"""Thread block cluster experiments (cc 9.0+): the largest cluster that launches, portable and not, how
many clusters really run at once, and whether distributed shared memory reads back right.

The API's answers (cuOccupancyMaxPotentialClusterSize, cuOccupancyMaxActiveClusters) are recorded beside
what ran; they never choose what is probed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import NONPORTABLE_CLUSTER_SIZE, PORTABLE_CLUSTER_SIZE, ceil_div
from bisect_smem.core.model import ClusterMeasurement
from bisect_smem.core.records import CLUSTERS, CLUSTERS_SKIPPED, Filled
from bisect_smem.devices.backends.base import DeviceSession
from bisect_smem.devices.backends.families import Clusters
from bisect_smem.devices.probes import TOO_BIG, Outcome
from bisect_smem.experiments.context import StepContext
from bisect_smem.experiments.expect import NOTHING_TOO_BIG, expect
from bisect_smem.experiments.steps import Step

CLUSTER_THREADS = 128
ACTIVE_SIZES = (1, 2, 4, 8, 16)
HOLD_NS = 50_000
DOES_NOT_LAUNCH = TOO_BIG | {Outcome.CLUSTER_MISCONFIG}
PROBES = "clusters"  # the key of these experiments' probes in Measured.probes


def cluster_probe_sizes(optin_bytes: int, granule_bytes: int) -> list[int]:
    """Dynamic sizes to try: small, the 48 KB default, half the opt-in ceiling, and the ceiling itself."""
    half = optin_bytes // 2 // granule_bytes * granule_bytes
    return sorted({n for n in (1024, 48 * 1024, half, optin_bytes) if 0 < n <= optin_bytes})


class ClusterExperiments:
    """The cluster experiments on one device; counts its probes."""

    def __init__(self, session: DeviceSession, sm_count: int, max_blocks_per_sm: int,
                 progress: Callable[[str], None], probes: int = 0) -> None:
        """``probes``: how many this device's cluster experiments made before (progress counts on)."""
        self.session = session
        self.sm_count = sm_count
        self.max_blocks_per_sm = max_blocks_per_sm
        self.progress = progress
        self.probes = probes

    def largest(self, dynamic_bytes: int, nonportable: bool) -> tuple[int | None, bool]:
        """The largest cluster size that launches (counting up from 1), and whether every launched
        cluster's distributed shared memory read back right."""
        limit = NONPORTABLE_CLUSTER_SIZE if nonportable else PORTABLE_CLUSTER_SIZE
        largest, verified = None, True
        kind = "non-portable" if nonportable else "portable"
        self.progress(f"clusters of 1..{limit} ({kind}) at {dynamic_bytes} B")
        outcomes = self.session.cluster_launches(dynamic_bytes, tuple(range(1, limit + 1)), nonportable,
                                                 CLUSTER_THREADS)
        self.probes += len(outcomes)
        for size, got in enumerate(outcomes, start=1):
            if not expect(got, f"cluster of {size} at {dynamic_bytes} B", DOES_NOT_LAUNCH):
                break
            largest = size
            verified = verified and got.dsm_verified(size, dynamic_bytes)
        return largest, verified

    def active(self, dynamic_bytes: int, size: int) -> dict[str, int | None]:
        """How many clusters of ``size`` ran at once, and the API's prediction."""
        # More clusters than could ever be resident: every SM's block limit times the SMs.
        clusters = ceil_div(self.sm_count * self.max_blocks_per_sm, size) + 1
        self.probes += 1
        self.progress(f"co-resident clusters of {size} at {dynamic_bytes} B")
        got = self.session.cluster_residency(dynamic_bytes, size, size > PORTABLE_CLUSTER_SIZE, CLUSTER_THREADS,
                                             HOLD_NS, clusters)
        expect(got, f"co-resident clusters of {size} at {dynamic_bytes} B", NOTHING_TOO_BIG)
        return {"measured": got.active_clusters, "api": got.api_active_clusters}

    def measure(self, optin_bytes: int, granule_bytes: int) -> list[ClusterMeasurement]:
        """Largest clusters, co-resident clusters and distributed shared memory at each probe size."""
        results = []
        for dynamic in cluster_probe_sizes(optin_bytes, granule_bytes):
            portable, portable_ok = self.largest(dynamic, nonportable=False)
            nonportable, nonportable_ok = self.largest(dynamic, nonportable=True)
            launched = portable is not None or nonportable is not None
            active = {str(s): self.active(dynamic, s) for s in ACTIVE_SIZES if nonportable and s <= nonportable}
            results.append(ClusterMeasurement(
                dynamic, portable, nonportable, self.session.cluster_api_max_size(dynamic, CLUSTER_THREADS),
                active, (portable_ok and nonportable_ok) if launched else None))
        return results


@frozen
class ClusterResult:
    """Cluster measurements, or why clusters were not measured here."""

    measurements: tuple[ClusterMeasurement, ...] = ()
    skipped: str | None = None


@frozen
class ClusterStep(Step):
    """Thread block clusters (cc 9.0+)."""

    kind: ClassVar[str] = "clusters"
    family: ClassVar[type] = Clusters

    def run(self, ctx: StepContext) -> ClusterResult:
        """Thread block clusters, or why they cannot be measured here."""
        optin = ctx.prior.require_optin()
        reason = ctx.session.cluster_support()
        if reason is not None:
            return ClusterResult(skipped=reason)
        reported = ctx.facts.reported
        runs = ClusterExperiments(ctx.session, reported.multiprocessor_count or 1,
                                  reported.max_blocks_per_multiprocessor or 32, ctx.progress, ctx.probes[PROBES])
        try:
            return ClusterResult(tuple(runs.measure(optin, ctx.prior.granule_bytes)))
        finally:
            ctx.probes[PROBES] = runs.probes

    def contribute(self, value: ClusterResult) -> tuple[Filled, ...]:
        """The cluster measurements, or why they were skipped."""
        return CLUSTERS.filled(value.measurements), CLUSTERS_SKIPPED.filled(value.skipped)
