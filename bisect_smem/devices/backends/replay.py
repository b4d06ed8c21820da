"""A simulated device replayed from a saved measurement (a report or a baseline file).

The device model is the data: its attributes and NVML fields are what the report recorded, its
launch ceilings are the measured ones per static size and block size, its residency follows the
measured staircase (with the API's recorded answers), each carveout setting gives the capacity that
residency proved there, and clusters launch and co-reside as they did. Where the report has no answer
(a size it never probed), the published-profile model of the simulator stands in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bisect_smem.core.attributes import DeviceAttributes, DeviceContext, DriverAttributes, NvmlInfo
from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import (
    DEFAULT_GRANULE_BYTES,
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_THREADS_PER_BLOCK,
    blocks_per_sm,
    static_footprint,
)
from bisect_smem.core.levels import STAIRCASE_THREADS
from bisect_smem.core.model import ClusterMeasurement, DeviceReport, Report, ResidencyStep
from bisect_smem.core.profiles import ArchProfile, parse_cc, profile_for_cc
from bisect_smem.core.saved import load_saved
from bisect_smem.devices import attributes
from bisect_smem.devices.backends.base import DeviceIdentity
from bisect_smem.devices.backends.sim import FAULT_KEYS, SimSession, SimSpec, launch_faults, spec_values
from bisect_smem.devices.probes import (
    ClusterOutcome,
    ClusterResidencyOutcome,
    LaunchOutcome,
    Outcome,
    ProbeKernel,
    ResidencyOutcome,
)


@dataclass(frozen=True)
class ReplayData:
    """One device of a saved report, and where it came from."""

    path: str
    device: DeviceReport


def load_replay(path: str, device: int = 0) -> ReplayData:
    """Read device ``device`` of a report or baseline file; anything unusable is an error (exit 2) naming it."""
    saved = load_saved(Path(path), name=f"--simulate {path}")
    devices = saved.devices if isinstance(saved, Report) else (saved.device,)
    chosen = next((d for d in devices if d.index == device), None)
    if chosen is None:
        raise UsageError(f"--simulate {path}: no device {device} in it (devices: "
                         f"{', '.join(str(d.index) for d in devices) or 'none'})")
    if chosen.measured is None or chosen.compute_capability is None:
        raise UsageError(f"--simulate {path}: device {device} was not measured, so there is nothing to replay")
    parse_cc(chosen.compute_capability, f"--simulate {path}: the compute_capability of device {device}")
    return ReplayData(str(path), chosen)


def replay_profile(dev: DeviceReport) -> ArchProfile:
    """The published-profile fields of the replayed device, from its own report."""
    m = dev.measured
    if m is None:
        raise UsageError(f"device {dev.index} was not measured, so there is nothing to replay")
    driver = dev.reported.driver or DriverAttributes()
    cc = parse_cc(str(dev.compute_capability))
    table = profile_for_cc(cc)

    def pick(*values: int | None) -> int:
        return next((v for v in values if v is not None), 0)

    return ArchProfile(
        key="replay", compute_capability=cc, example_parts=dev.name or "replayed device", aliases=(),
        smem_per_sm_bytes=pick(m.smem_per_sm_bytes, driver.max_shared_memory_per_multiprocessor_bytes),
        max_smem_per_block_optin_bytes=pick(m.optin_dynamic_ceiling_bytes,
                                            driver.max_shared_memory_per_block_optin_bytes),
        reserved_smem_per_block_bytes=pick(m.reserved_bytes, driver.reserved_shared_memory_per_block_bytes),
        carveout_kib=table.carveout_kib if table else None,
        max_threads_per_sm=pick(driver.max_threads_per_multiprocessor, table and table.max_threads_per_sm),
        max_blocks_per_sm=pick(driver.max_blocks_per_multiprocessor, table and table.max_blocks_per_sm),
        multiprocessor_count=pick(driver.multiprocessor_count, table and table.multiprocessor_count),
        allocation_granularity_bytes=pick(m.allocation_granularity_bytes,
                                          table and table.allocation_granularity_bytes, DEFAULT_GRANULE_BYTES),
    )


def parse_replay_spec(text: str) -> SimSpec:
    """``REPORT.json[,device=N,flaky=P,...]``: a SimSpec that replays a saved device (faults allowed)."""
    path, *pairs = [part.strip() for part in text.split(",")]
    values = spec_values(text, pairs, ("device", *FAULT_KEYS),
                         f"a replayed report takes device=N and the faults {', '.join(FAULT_KEYS)}")
    device = values.get("device", "0")
    if not device.isdigit():
        raise UsageError(f"bad --simulate value {text!r}: device takes a whole number (got {device!r})")
    faults = launch_faults(values, text)
    data = load_replay(path, int(device))
    return SimSpec(replay_profile(data.device), text=text, replay=data, **faults)


class ReplaySession(SimSession):
    """A simulated device whose answers are those of a saved measurement."""

    def __init__(self, index: int, spec: SimSpec, static_sizes: tuple[int, ...]) -> None:
        super().__init__(index, spec, static_sizes)
        self.data: ReplayData = spec.replay
        self.dev = self.data.device
        self.measured = self.dev.measured
        self._splits = {(s.static_bytes, s.threads): s for s in self.measured.static_splits}
        self._staircase = sorted((s for s in self.measured.residency if s.threads == STAIRCASE_THREADS),
                                 key=lambda s: s.dynamic_bytes)
        self._carveout = {p.percent: p for p in self.measured.carveout}
        self._clusters = {c.dynamic_bytes: c for c in self.measured.clusters}
        self._sweep_bytes: int | None = None

    def identity(self) -> DeviceIdentity:
        ctx = self.dev.context
        return DeviceIdentity(index=self.index, name=self.dev.name or "replayed device",
                              compute_capability=self.profile.compute_capability,
                              pci_bus_id=ctx.pci_bus_id,
                              extra=DeviceContext(replayed_from=self.data.path, replayed_backend=self.dev.backend))

    def driver_attributes(self) -> dict[int, int | None]:
        driver = self.dev.reported.driver or DriverAttributes()
        ids = [(attr_id, key) for attr_id, key, _ in attributes.DEVICE_ATTRIBUTES]
        ids += list(attributes.DRIVER_ONLY_ATTRIBUTES)
        return {attr_id: driver.get(key) for attr_id, key in ids}

    def runtime_attributes(self) -> dict[str, int | None]:
        runtime = self.dev.reported.runtime or DeviceAttributes()
        return {prop: runtime.get(key) for _, key, prop in attributes.DEVICE_ATTRIBUTES}

    def nvml_info(self) -> NvmlInfo:
        return self.dev.context.nvml

    def _static_footprint(self, kernel: ProbeKernel) -> int:  # type: ignore[override]
        recorded = [s.static_footprint_bytes for s in self.measured.static_splits
                    if s.static_bytes == kernel.static_bytes and s.static_footprint_bytes is not None]
        return recorded[0] if recorded else static_footprint(kernel.static_bytes)

    def _ceiling(self, kernel: ProbeKernel, threads: int) -> int:
        """The largest dynamic size that launched for this kernel and block size when it was measured."""
        if not kernel.opt_in:
            default = self.measured.default_dynamic_ceiling_bytes
            if kernel.static_bytes == 0 and default is not None:
                return default
            return max(DEFAULT_SMEM_PER_BLOCK_BYTES - kernel.static_bytes, 0)
        split = self._splits.get((kernel.static_bytes, threads))
        if split is not None and split.dynamic_ceiling_bytes is not None:
            return split.dynamic_ceiling_bytes
        return max(self.profile.max_smem_per_block_optin_bytes - self._static_footprint(kernel), 0)

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        if not kernel.opt_in:
            raise ValueError("the default-ceiling kernel must stay fresh: its attribute is never raised")
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS (simulated, poisoned context)")
        accepted = self.measured.attribute_accept_ceiling_bytes or self.profile.max_smem_per_block_optin_bytes
        if nbytes < 0 or nbytes + self._static_footprint(kernel) > accepted:
            return LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument")
        self._max_dynamic[kernel] = nbytes
        return LaunchOutcome(Outcome.OK)

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        fault = self._fault(dynamic_bytes)
        if fault is not None:
            return fault
        total = dynamic_bytes + kernel.static_bytes
        ceiling = self._ceiling(kernel, threads)
        registers = self._registers(kernel, dynamic_bytes)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK or dynamic_bytes > min(self._limit(kernel), ceiling):
            return self._flaky(dynamic_bytes, ceiling,
                               LaunchOutcome(Outcome.INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE: invalid argument"),
                               registers, total)
        ok = LaunchOutcome(Outcome.OK, registers=registers, bytes_verified=total,
                           dynamic_base_offset_bytes=self.spec.reserved_bytes + self._static_footprint(kernel))
        return self._flaky(dynamic_bytes, ceiling, ok, registers, total)

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        if not kernel.opt_in:
            recorded = self.measured.default_api_available_dynamic_bytes if kernel.static_bytes == 0 else None
        else:
            split = self._splits.get((kernel.static_bytes, threads))
            recorded = split.api_available_dynamic_bytes if split is not None else None
        if recorded is None:
            return super().available_dynamic_smem(kernel, threads)
        return min(self._limit(kernel), recorded)

    def _step(self, dynamic_bytes: int, threads: int) -> ResidencyStep | None:
        """The recorded plateau that holds this size: exact for the extra block sizes, the staircase for 32."""
        exact = next((s for s in self.measured.residency
                      if s.threads == threads and s.dynamic_bytes == dynamic_bytes), None)
        if exact is not None or threads != STAIRCASE_THREADS:
            return exact
        below = [s for s in self._staircase if s.dynamic_bytes <= dynamic_bytes]
        return below[-1] if below else None

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        if self._poisoned or dynamic_bytes > self.profile.max_smem_per_block_optin_bytes \
                or not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            return super().residency(dynamic_bytes, threads, hold_ns, carveout_percent)
        if carveout_percent is not None and carveout_percent in self._carveout:
            return self._carveout_residency(dynamic_bytes, threads, carveout_percent)
        step = self._step(dynamic_bytes, threads) if carveout_percent is None else None
        if step is None:
            return super().residency(dynamic_bytes, threads, hold_ns, carveout_percent)
        return ResidencyOutcome(Outcome.OK, "", step.blocks_per_sm_min, step.blocks_per_sm_max,
                                step.api_blocks_per_sm)

    def _carveout_residency(self, dynamic_bytes: int, threads: int, percent: int) -> ResidencyOutcome:
        """Under a carveout setting: the recorded answer at the sweep's size, else the capacity residency
        proved for that setting (the driver still grows a carveout to fit one block)."""
        point = self._carveout[percent]
        if dynamic_bytes == self._sweep_bytes:
            return ResidencyOutcome(Outcome.OK, "", point.blocks_per_sm, point.blocks_per_sm, point.api_blocks_per_sm)
        p = self.profile
        footprint = self.footprint(dynamic_bytes)
        capacity = point.carveout_range_bytes[0] if point.carveout_range_bytes else p.smem_per_sm_bytes
        blocks, _ = blocks_per_sm(footprint, threads, max(capacity, footprint), p.max_blocks_per_sm,
                                  p.max_threads_per_sm)
        api, _ = blocks_per_sm(footprint, threads, self.carveout_capacity(percent, footprint), p.max_blocks_per_sm,
                               p.max_threads_per_sm)
        return ResidencyOutcome(Outcome.OK, "", blocks, blocks, api)

    def carveout_sweep(self, dynamic_bytes: int, threads: int, hold_ns: int,
                       percents: tuple[int, ...]) -> list[ResidencyOutcome]:
        self._sweep_bytes = dynamic_bytes  # the recorded counts were taken at the sweep's size
        return super().carveout_sweep(dynamic_bytes, threads, hold_ns, percents)

    def cluster_support(self) -> str | None:
        if self.measured.clusters_skipped:
            return self.measured.clusters_skipped
        return super().cluster_support()

    def _recorded_cluster(self, dynamic_bytes: int) -> ClusterMeasurement | None:
        return self._clusters.get(dynamic_bytes)

    def cluster_launches(self, dynamic_bytes: int, sizes: tuple[int, ...], nonportable: bool,
                         threads: int) -> list[ClusterOutcome]:
        rec = self._recorded_cluster(dynamic_bytes)
        if rec is None or self._poisoned:
            return super().cluster_launches(dynamic_bytes, sizes, nonportable, threads)
        largest = (rec.max_cluster_size_nonportable if nonportable else rec.max_cluster_size_portable) or 0
        results = []
        for size in sizes:
            if size > largest:
                results.append(ClusterOutcome(Outcome.CLUSTER_MISCONFIG, "CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES"))
                break
            wrong = 0 if rec.dsm_verified in (True, None) else 1
            results.append(ClusterOutcome(Outcome.OK, "", size, size * dynamic_bytes, wrong, size))
        return results

    def cluster_residency(self, dynamic_bytes: int, cluster_size: int, nonportable: bool, threads: int,
                          hold_ns: int, clusters: int) -> ClusterResidencyOutcome:
        rec = self._recorded_cluster(dynamic_bytes)
        counts = rec.active_clusters.get(str(cluster_size)) if rec is not None else None
        if counts is None or counts.get("measured") is None:
            return super().cluster_residency(dynamic_bytes, cluster_size, nonportable, threads, hold_ns, clusters)
        return ClusterResidencyOutcome(Outcome.OK, "", min(counts["measured"], clusters), counts.get("api"))

    def cluster_api_max_size(self, dynamic_bytes: int, threads: int) -> int | None:
        rec = self._recorded_cluster(dynamic_bytes)
        if rec is None:
            return super().cluster_api_max_size(dynamic_bytes, threads)
        return rec.api_max_cluster_size
