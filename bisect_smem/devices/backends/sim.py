"""The simulated backend: one session that answers every probe from a DeviceModel (sim_model.py), so the whole
pipeline runs without a GPU, on a published profile or on a replayed report. A question the model's recording
answers gets the recorded answer; on a replayed report, any other is answered "not measured in the replayed
report"; on a profile, the documented rules answer. The session keeps the state a real context has: each
function's attribute, a context that a fault has poisoned, and what each SM's shared memory holds for the
leftover check.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path

from bisect_smem.core.attributes import DeviceAttributes, DeviceContext, DriverAttributes, NvmlInfo
from bisect_smem.core.errors import KernelCompileError
from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_THREADS_PER_BLOCK,
    NONPORTABLE_CLUSTER_SIZE,
    PORTABLE_CLUSTER_SIZE,
    SMS_PER_GPC,
    STATIC_SMEM_COMPILE_CAP_BYTES,
    has_aggr_register,
    has_clusters,
    has_smem_registers,
    round_up,
)
from bisect_smem.core.profiles import cc_text
from bisect_smem.devices import attributes
from bisect_smem.devices.backends.base import DeviceAddress, DeviceIdentity, launch_each, residency_each
from bisect_smem.devices.backends.sim_memory import SharedMemory
from bisect_smem.devices.backends.sim_model import UNRECORDED, DeviceModel, RecordedMemory
from bisect_smem.devices.backends.sim_spec import SimSpec
from bisect_smem.devices.probes import (
    ClusterOutcome,
    ClusterResidencyOutcome,
    Launch,
    LaunchOutcome,
    LeftoverOutcome,
    MarchFault,
    MarchOutcome,
    Outcome,
    ProbeKernel,
    ResidencyOutcome,
    ResidencyProbe,
    SmemRegisters,
)

_POISONED = "CUDA_ERROR_ILLEGAL_ADDRESS (simulated, poisoned context)"
_INVALID = "CUDA_ERROR_INVALID_VALUE: invalid argument"


class SimBackend:
    """Simulated devices, one per spec."""

    name = "sim"
    supported_steps: tuple[str, ...] | None = None
    nvml_from_host = primary_context = False  # a simulated device's NVML view is its session's own; no CUDA

    def host_nvml(self, indices: tuple[int, ...]) -> dict[int, NvmlInfo]:
        """Nothing: each simulated session answers for its device."""
        return {}

    def prepare(self, indices: tuple[int, ...], static_sizes: tuple[int, ...],
                step_kinds: frozenset[str] | None = None) -> None:
        """Nothing: a simulated device compiles nothing."""

    def preload(self) -> None:
        """Nothing: a simulated device needs no library."""

    def __init__(self, specs: tuple[SimSpec, ...]) -> None:
        self.specs = specs

    def is_available(self) -> bool:
        return bool(self.specs)

    def unavailable_reason(self) -> str:
        return "" if self.specs else "no simulated device was given (--simulate PROFILE)"

    def device_count(self) -> int:
        return len(self.specs)

    def loaded_static_smem(self, path: Path, kernel: str) -> int | None:
        return None  # a simulated device loads no compiled files

    @property
    def needs_isolation(self) -> bool:
        """Only sticky and hanging faults need worker processes; a plain simulated device runs inline."""
        return any(spec.faults.needs_isolation for spec in self.specs)

    def open(self, index: int, static_sizes: tuple[int, ...],
             step_kinds: frozenset[str] | None = None) -> SimSession:
        return SimSession(index, self.specs[index], static_sizes)


class SimSession:
    """One simulated device with its per-function attribute state."""

    def __init__(self, index: int, spec: SimSpec, static_sizes: tuple[int, ...]) -> None:
        too_big = [s for s in static_sizes if s > STATIC_SMEM_COMPILE_CAP_BYTES]
        if too_big:
            raise KernelCompileError(
                f"static shared memory {too_big[0]} B exceeds the compile-time cap of "
                f"{STATIC_SMEM_COMPILE_CAP_BYTES} B",
                f"ptxas error: uses too much shared data ({too_big[0]:#x} bytes, 0xc000 max)")
        self.index = index
        self.spec = spec
        self.model: DeviceModel = spec.model
        self.record = spec.model.record
        self.faults = spec.faults
        self._max_dynamic: dict[ProbeKernel, int] = {}
        self._random = random.Random(spec.faults.seed)
        self._poisoned = False
        self.memory = RecordedMemory(self.record) if self.record else SharedMemory(
            spec.model.multiprocessor_count, spec.faults.bitflip, spec.faults.leak)
        self._sweep_bytes: int | None = None  # the size of the last carveout sweep

    # What the device says about itself: recorded, else what the rules' parameters make it.

    def identity(self) -> DeviceIdentity:
        m, rec = self.model, self.record
        if rec is not None:
            return DeviceIdentity(self.index, m.name, m.compute_capability, rec.context.pci_bus_id,
                                  DeviceContext(replayed_from=rec.path, replayed_backend=rec.backend,
                                                replayed_error=rec.error))
        return DeviceIdentity(self.index, m.name, m.compute_capability, f"SIM:{self.index:02x}",
                              DeviceContext(profile=m.key))

    def _attributes(self) -> DriverAttributes:
        m = self.model
        return DriverAttributes(
            max_shared_memory_per_block_bytes=DEFAULT_SMEM_PER_BLOCK_BYTES, multiprocessor_count=m.multiprocessor_count,
            max_threads_per_multiprocessor=m.max_threads_per_sm, compute_capability_major=m.compute_capability[0],
            compute_capability_minor=m.compute_capability[1], max_shared_memory_per_multiprocessor_bytes=m.smem_per_sm_bytes,
            max_shared_memory_per_block_optin_bytes=m.optin_bytes, max_blocks_per_multiprocessor=m.max_blocks_per_sm,
            reserved_shared_memory_per_block_bytes=m.reserved_bytes,
            cluster_launch=int(has_clusters(m.compute_capability)))

    def driver_attributes(self) -> dict[int, int | None]:
        view = (self.record.reported.driver or DriverAttributes()) if self.record else self._attributes()
        ids = [*((attr_id, key) for attr_id, key, _ in attributes.DEVICE_ATTRIBUTES), *attributes.DRIVER_ONLY_ATTRIBUTES]
        return {attr_id: view.get(key) for attr_id, key in ids}

    def runtime_attributes(self) -> dict[str, int | None]:
        view: DeviceAttributes = (self.record.reported.runtime or DeviceAttributes()) if self.record \
            else self._attributes()
        return {prop: view.get(key) for _, key, prop in attributes.DEVICE_ATTRIBUTES}

    def nvml_info(self) -> NvmlInfo:
        if self.record is not None:
            return self.record.context.nvml
        return NvmlInfo(driver_version="simulated", uuid=f"SIM-{self.model.key}-{self.index}",
                        pci_bus_id=f"SIM:{self.index:02x}", virtualization_mode="none", mig_mode="disabled",
                        name=self.model.name)

    def address(self) -> DeviceAddress:
        return DeviceAddress("sim", 0, self.spec.text)

    # Ceilings: the attribute, a launch, and what the occupancy API says is available.

    def _limit(self, kernel: ProbeKernel) -> int:
        default = max(DEFAULT_SMEM_PER_BLOCK_BYTES - kernel.static_bytes, 0)
        return self._max_dynamic.get(kernel, default)

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        if not kernel.opt_in:
            raise ValueError("the default-ceiling kernel must stay fresh: its attribute is never raised")
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, _POISONED)
        accepted = self.record.accepted_bytes() if self.record else self.model.optin_bytes
        if accepted is None:
            return LaunchOutcome(Outcome.OTHER, f"what the attribute accepts: {UNRECORDED}")
        if nbytes < 0 or nbytes + self.model.static_footprint(kernel.static_bytes) > accepted:
            return LaunchOutcome(Outcome.INVALID_VALUE, _INVALID)
        self._max_dynamic[kernel] = nbytes
        return LaunchOutcome(Outcome.OK)

    def _fault(self, dynamic_bytes: int) -> LaunchOutcome | None:
        """The injected fault this launch hits, if any."""
        faults = self.faults
        if self._poisoned or (faults.sticky_bytes is not None and dynamic_bytes >= faults.sticky_bytes):
            self._poisoned = True
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access "
                                                          "was encountered (simulated)")
        if faults.hang_bytes is not None and dynamic_bytes >= faults.hang_bytes:
            while True:  # never returns, as a hung kernel: only the runner's timeout ends it
                time.sleep(3600)
        if faults.holes is not None and faults.holes[0] <= dynamic_bytes <= faults.holes[1]:
            return LaunchOutcome(Outcome.INVALID_VALUE, f"{_INVALID} (simulated holes)")
        if faults.hole_bytes is not None and dynamic_bytes == faults.hole_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE, f"{_INVALID} (simulated hole)")
        return None

    def _flaky(self, dynamic_bytes: int, limit: int, outcome: LaunchOutcome, registers: SmemRegisters | None,
               total: int) -> LaunchOutcome:
        """Near a limit, answer wrongly with probability ``flaky``."""
        flaky = self.faults.flaky
        if flaky and abs(dynamic_bytes - limit) <= self.model.granule_bytes and self._random.random() < flaky:
            if outcome.ok:
                return LaunchOutcome(Outcome.INVALID_VALUE, f"{_INVALID} (flaky)")
            return LaunchOutcome(Outcome.OK, "flaky", registers, total)
        return outcome

    def _ceiling(self, kernel: ProbeKernel, threads: int) -> int | None:
        """The largest dynamic size this kernel and block size launch at: recorded (None: not), else the rules'."""
        if self.record:
            return self.record.ceiling(kernel.static_bytes, threads, kernel.opt_in)
        if not kernel.opt_in:
            return self.model.default_ceiling(kernel.static_bytes)
        return self.model.optin_bytes - self.model.static_footprint(kernel.static_bytes)

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, _POISONED)
        total = dynamic_bytes + kernel.static_bytes
        # Flakiness lives near the kernel's real ceiling, not near whatever the attribute was just set to.
        ceiling = self._ceiling(kernel, threads)
        if ceiling is None:
            return LaunchOutcome(Outcome.OTHER, f"{kernel.static_bytes} B static, {threads} threads: {UNRECORDED}")
        registers = self._registers(kernel, dynamic_bytes)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK or dynamic_bytes > min(self._limit(kernel), ceiling):
            # The driver refuses the launch when it is enqueued: it never runs, so it cannot fault.
            return self._flaky(dynamic_bytes, ceiling, LaunchOutcome(Outcome.INVALID_VALUE, _INVALID), registers,
                               total)
        fault = self._fault(dynamic_bytes)
        if fault is not None:
            return fault
        base = self.model.dynamic_base_offset(kernel.static_bytes)
        if kernel.hole_bytes == dynamic_bytes:  # the planted hole: the kernel reads its first byte back wrong
            return LaunchOutcome(Outcome.VERIFY_FAILED, "1 B wrong", registers, total - 1, base)
        ok = LaunchOutcome(Outcome.OK, registers=registers, bytes_verified=total, dynamic_base_offset_bytes=base)
        return self._flaky(dynamic_bytes, ceiling, ok, registers, total)

    def _registers(self, kernel: ProbeKernel, dynamic_bytes: int) -> SmemRegisters:
        cc = self.model.compute_capability
        if not has_smem_registers(cc):
            return SmemRegisters()
        used = kernel.static_bytes + dynamic_bytes
        reserved = self.model.reserved_bytes
        return SmemRegisters(dynamic_smem_size=dynamic_bytes, total_smem_size=round_up(used, self.model.granule_bytes),
                             reserved_smem_offset_begin=0, reserved_smem_offset_cap=reserved,
                             aggr_smem_size=reserved + used if has_aggr_register(cc) else None)

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        """What one block may have beside its static data and reserved window, capped by the attribute."""
        if self.record:
            recorded = self.record.available_dynamic(kernel.static_bytes, threads, kernel.opt_in)
            return None if recorded is None else min(self._limit(kernel), recorded)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            return None
        m = self.model
        hardware = min(m.optin_bytes, m.smem_per_sm_bytes - m.reserved_bytes) - m.static_footprint(kernel.static_bytes)
        return max(min(self._limit(kernel), hardware), 0)

    def launch_batch(self, launches: Sequence[Launch]) -> list[LaunchOutcome]:
        if self.record and any(p.sweep for p in launches):  # the granule sweep answers as it was recorded
            return [self.record.sweep_outcome(p.dynamic_bytes) or self.launch(p.kernel, p.dynamic_bytes, p.threads)
                    for p in launches]
        return launch_each(self, launches)

    def residency_batch(self, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
        return residency_each(self, probes)

    # Residency and carveout.

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        m = self.model
        if self._poisoned:
            return ResidencyOutcome(Outcome.ILLEGAL_ADDRESS, _POISONED)
        if dynamic_bytes > m.optin_bytes or not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            return ResidencyOutcome(Outcome.INVALID_VALUE, _INVALID)
        if self.record is not None:
            if carveout_percent is not None and carveout_percent in self.record.carveout:
                return self._recorded_carveout(dynamic_bytes, threads, carveout_percent)
            step = self.record.residency_step(dynamic_bytes, threads) if carveout_percent is None else None
            if step is None:
                return ResidencyOutcome(Outcome.OTHER, f"residency at {dynamic_bytes} B, {threads} threads: {UNRECORDED}")
            return ResidencyOutcome(Outcome.OK, "", step.blocks_per_sm_min, step.blocks_per_sm_max,
                                    step.api_blocks_per_sm)
        capacity = m.carveout_capacity(carveout_percent, m.footprint(dynamic_bytes))
        blocks = m.blocks_per_sm(dynamic_bytes, threads, capacity)
        held = max(blocks - m.fewer_blocks, 1) if blocks else blocks
        return ResidencyOutcome(Outcome.OK, "", held, held, blocks)

    def _recorded_carveout(self, dynamic_bytes: int, threads: int, percent: int) -> ResidencyOutcome:
        """Under a recorded carveout setting: the recorded answer at the sweep's size, else the capacity
        residency proved for that setting (the driver still grows a carveout to fit one block)."""
        point = self.record.carveout[percent]
        if dynamic_bytes == self._sweep_bytes:
            return ResidencyOutcome(Outcome.OK, "", point.blocks_per_sm, point.blocks_per_sm, point.api_blocks_per_sm)
        m = self.model
        footprint = m.footprint(dynamic_bytes)
        capacity = point.carveout_range_bytes[0] if point.carveout_range_bytes else m.smem_per_sm_bytes
        blocks = m.blocks_per_sm(dynamic_bytes, threads, max(capacity, footprint))
        api = m.blocks_per_sm(dynamic_bytes, threads, m.carveout_capacity(percent, footprint))
        return ResidencyOutcome(Outcome.OK, "", blocks, blocks, api)

    def carveout_sweep(self, dynamic_bytes: int, threads: int, hold_ns: int,
                       percents: tuple[int, ...]) -> list[ResidencyOutcome]:
        self._sweep_bytes = dynamic_bytes  # a recording's counts were taken at the sweep's size
        return [self.residency(dynamic_bytes, threads, hold_ns, p) for p in percents]

    # Thread block clusters: scheduled within one GPC (core.hardware.SMS_PER_GPC SMs, the last the rest).

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
            return ClusterOutcome(Outcome.ILLEGAL_ADDRESS, _POISONED)
        limit = NONPORTABLE_CLUSTER_SIZE if nonportable else PORTABLE_CLUSTER_SIZE
        if not has_clusters(self.model.compute_capability) or not 1 <= cluster_size <= limit:
            return ClusterOutcome(Outcome.CLUSTER_MISCONFIG, "CUDA_ERROR_INVALID_CLUSTER_SIZE")
        if dynamic_bytes > self.model.optin_bytes:
            return ClusterOutcome(Outcome.INVALID_VALUE, _INVALID)
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

    def inject_illegal_access(self) -> None:
        """Test only: poison the simulated context, as a real illegal access would."""
        self._poisoned = True

    def close(self) -> None:
        """End the context: shared memory keeps what was written only on a device that leaks."""
        self.memory.close()
        self._max_dynamic.clear()

    # Validation (experiments/validation.py): one block per SM, over the simulated shared memory.

    def _validation_fault(self, dynamic_bytes: int, threads: int) -> LaunchOutcome | None:
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, _POISONED)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK or dynamic_bytes > self.model.optin_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE, _INVALID)
        return self._fault(dynamic_bytes)

    def march(self, dynamic_bytes: int, threads: int, blocks: int, seed: int,
              fault: MarchFault | None = None) -> MarchOutcome:
        failed = self._validation_fault(dynamic_bytes, threads)
        if failed is not None:
            return MarchOutcome(failed.outcome, failed.detail)
        return self.memory.march(dynamic_bytes, blocks, seed, fault)

    def leftover_write(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        fault = self._validation_fault(dynamic_bytes, threads)
        if fault is not None:
            return LeftoverOutcome(fault.outcome, fault.detail)
        return self.memory.write(dynamic_bytes, blocks, nonce)

    def leftover_read(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        fault = self._validation_fault(dynamic_bytes, threads)
        if fault is not None:
            return LeftoverOutcome(fault.outcome, fault.detail)
        return self.memory.read(dynamic_bytes, blocks, nonce)
