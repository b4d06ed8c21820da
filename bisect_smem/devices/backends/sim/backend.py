"""The simulated backend: one session that answers every probe from a DeviceModel (model.py), so the whole
pipeline runs without a GPU, on a published profile or on a replayed report. A question the model's recording
answers gets the recorded answer; on a replayed report, any other is answered "not measured in the replayed
report"; on a profile, the documented rules answer. The session keeps the state a real context has
(context.py) and implements every probe family, one module each: ceilings, residency, clusters,
integrity.
"""

from __future__ import annotations

from pathlib import Path

from bisect_smem.core.attributes import DeviceAttributes, DeviceContext, DriverAttributes, NvmlInfo
from bisect_smem.core.hardware import DEFAULT_SMEM_PER_BLOCK_BYTES, has_clusters
from bisect_smem.devices import attributes
from bisect_smem.devices.backends.base import DeviceIdentity
from bisect_smem.devices.backends.sim.ceilings import SimCeilings
from bisect_smem.devices.backends.sim.clusters import SimClusters
from bisect_smem.devices.backends.sim.integrity import SimIntegrity
from bisect_smem.devices.backends.sim.spec import SimSpec


class SimSession(SimCeilings, SimClusters, SimIntegrity):
    """One simulated device with its per-function attribute state: what it says about itself is here, and
    each probe family in its own module."""

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

    def close(self) -> None:
        """End the context: shared memory keeps what was written only on a device that leaks."""
        self.memory.close()
        self._max_dynamic.clear()


class SimBackend:
    """Simulated devices, one per spec."""

    name, session_type = "sim", SimSession
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


def from_specs(texts: tuple[str, ...]) -> SimBackend:
    """The simulator of the ``--simulate`` texts, one device each (a malformed text is a UsageError)."""
    return SimBackend(tuple(SimSpec.parse(text) for text in texts))
