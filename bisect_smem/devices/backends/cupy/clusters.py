"""The CuPy backend's thread block cluster probes. CuPy has no cluster launch, so these launch its compiled
functions through cuda-bindings (driver_calls): distributed shared memory checked in clusters of each size,
and how many clusters co-reside.

A mixin of CupySession (backend.py), which imports CuPy and hands it over as ``_cupy``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from bisect_smem.core.hardware import NONPORTABLE_CLUSTER_SIZE, DriverAttribute, has_clusters
from bisect_smem.core.profiles import cc_text
from bisect_smem.devices.backends import driver_calls
from bisect_smem.devices.backends.base import CudaErrorFunnel, DeviceIdentity
from bisect_smem.devices.backends.families import Clusters
from bisect_smem.devices.backends.libcuda import libcuda
from bisect_smem.devices.kernel_abi import (
    CLUSTER_RESULT_WORDS,
    ClusterWord,
    ResidencyWord,
    cluster_dsm_name,
    cluster_residency_name,
)
from bisect_smem.devices.probes import ClusterOutcome, ClusterResidencyOutcome, Outcome, classify_cuda_error


class CupyClusters(Clusters):
    """Cluster launches and the cluster occupancy API on CuPy's functions."""

    # What these probes use of the session (set by CupySession.__init__).
    _cupy: Any
    _functions: dict[str, Any]
    _seeds: itertools.count
    cuda_errors: CudaErrorFunnel
    index: int
    identity: Callable[[], DeviceIdentity]

    def cluster_support(self) -> str | None:
        cc = self.identity().compute_capability
        if not has_clusters(cc):
            return f"thread block clusters need cc 9.0+ (this device: {cc_text(cc)})"
        if not libcuda().attribute(DriverAttribute.CLUSTER_LAUNCH, self.index):
            return "the driver reports no cluster launch (attribute 120 is 0)"
        if not driver_calls.bindings_installed():
            return "cluster launches need cuda-bindings: pip install cuda-bindings (the cuda13 or cuda12 extra)"
        return None

    def _cluster_function(self, name: str, nonportable: bool, dynamic_bytes: int) -> Any:
        fn = self._functions[name]
        fn.max_dynamic_shared_size_bytes = dynamic_bytes
        return driver_calls.function_handle(fn.kernel.ptr, nonportable)

    def cluster_launches(self, dynamic_bytes: int, sizes: tuple[int, ...], nonportable: bool,
                         threads: int) -> list[ClusterOutcome]:
        cupy = self._cupy
        outs = cupy.zeros((len(sizes), CLUSTER_RESULT_WORDS), dtype=cupy.uint32)
        failure = None
        launched = 0
        with self.cuda_errors() as failed:
            handle = self._cluster_function(cluster_dsm_name(nonportable), nonportable, dynamic_bytes)
            for row, size in enumerate(sizes):
                seed = next(self._seeds) & 0xFF
                # A cluster that cannot launch is refused here, synchronously; the rest run back to back.
                refused = driver_calls.launch(handle, driver_calls.launch_config(size, threads, dynamic_bytes, size),
                                              (dynamic_bytes, seed, outs[row].data.ptr), ("uint", "uint", "pointer"))
                if refused:
                    failure = ClusterOutcome(classify_cuda_error(refused), refused)
                    break
                launched += 1
            rows = outs.get().tolist()
        if failed:
            return [ClusterOutcome(failed.outcome, failed.detail)]
        w = ClusterWord
        results = [ClusterOutcome(Outcome.OK, "", row[w.BLOCKS_RAN], row[w.BYTES_CHECKED], row[w.BYTES_WRONG],
                                  row[w.CLUSTER_SIZE_SEEN]) for row in rows[:launched]]
        return results + ([failure] if failure else [])

    def cluster_residency(self, dynamic_bytes: int, cluster_size: int, nonportable: bool, threads: int,
                          hold_ns: int, clusters: int) -> ClusterResidencyOutcome:
        cupy = self._cupy
        with self.cuda_errors() as failed:
            handle = self._cluster_function(cluster_residency_name(nonportable), nonportable, dynamic_bytes)
            config = driver_calls.launch_config(clusters * cluster_size, threads, dynamic_bytes, cluster_size)
            api_count = driver_calls.max_active_clusters(handle, config)
            counters = cupy.zeros(len(ResidencyWord), dtype=cupy.uint32)
            refused = driver_calls.launch(handle, config, (counters.data.ptr, hold_ns), ("pointer", "ulonglong"))
            if refused:
                return ClusterResidencyOutcome(classify_cuda_error(refused), refused, None, api_count)
            peak = int(counters.get()[ResidencyWord.PEAK])
        if failed:
            return ClusterResidencyOutcome(failed.outcome, failed.detail)
        return ClusterResidencyOutcome(Outcome.OK, "", peak, api_count)

    def cluster_api_max_size(self, dynamic_bytes: int, threads: int) -> int | None:
        with self.cuda_errors() as failed:
            handle = self._cluster_function(cluster_dsm_name(True), True, dynamic_bytes)
        if failed:
            return None
        return driver_calls.max_potential_cluster_size(
            handle, driver_calls.launch_config(NONPORTABLE_CLUSTER_SIZE, threads, dynamic_bytes, None))
