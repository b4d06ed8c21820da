"""What a device says about itself, typed: its attributes as each source reports them (the driver API and
the runtime's device properties), NVML's view, and the context a report records beside them.

Each field is named after the driver attribute or NVML query it holds, with its unit; None where the
source does not know it. A report's JSON uses these names as its keys. The types live in core because a
DeviceReport holds them; devices/attributes.py reads them from a GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bisect_smem.core.frozen import frozen


@frozen
class DeviceAttributes:
    """The attributes both the driver (cuDeviceGetAttribute) and the runtime (cudaDeviceProp) report."""

    max_shared_memory_per_block_bytes: int | None = None  # attribute 8: the 48 KiB default, bytes
    multiprocessor_count: int | None = None  # attribute 16: SMs
    max_threads_per_multiprocessor: int | None = None  # attribute 39: threads
    compute_capability_major: int | None = None  # attribute 75
    compute_capability_minor: int | None = None  # attribute 76
    max_shared_memory_per_multiprocessor_bytes: int | None = None  # attribute 81: bytes
    max_shared_memory_per_block_optin_bytes: int | None = None  # attribute 97: bytes
    max_blocks_per_multiprocessor: int | None = None  # attribute 106: blocks
    reserved_shared_memory_per_block_bytes: int | None = None  # attribute 111: bytes
    cluster_launch: int | None = None  # attribute 120: 1 where clusters launch

    def get(self, key: str, default: Any = None) -> Any:
        """The value under its report key, for readers that take the JSON's names."""
        return getattr(self, key, default) if key in _FIELDS[type(self)] else default


@frozen
class DriverAttributes(DeviceAttributes):
    """The driver's view: the shared attributes and those only the driver API has."""

    # attribute 150 (CUDA 13.4+ drivers): bytes; None where the driver does not know the id
    max_oversized_shared_memory_per_block_bytes: int | None = None


_FIELDS = {cls: frozenset(f.name for f in dataclasses.fields(cls)) for cls in (DeviceAttributes, DriverAttributes)}
ATTRIBUTE_KEYS = tuple(f.name for f in dataclasses.fields(DeviceAttributes))
SOURCE_KEYS = {"driver": tuple(f.name for f in dataclasses.fields(DriverAttributes)), "runtime": ATTRIBUTE_KEYS}


@frozen
class ReportedAttributes:
    """The attributes by source; a source that was never read is None."""

    driver: DriverAttributes | None = None
    runtime: DeviceAttributes | None = None

    def sources(self) -> dict[str, DeviceAttributes]:
        """The sources that were read, by name, driver first."""
        return {name: view for name, view in (("driver", self.driver), ("runtime", self.runtime)) if view is not None}

    def get(self, source: str, default: Any = None) -> Any:
        """One source's view by name, for readers that take the JSON's names."""
        return self.sources().get(source, default)

    def best(self, key: str) -> tuple[int | None, str | None]:
        """The value of ``key`` from the first source that knows it, driver first, and that source's name."""
        for name, view in self.sources().items():
            value = view.get(key)
            if value is not None:
                return value, name
        return None, None

    def disagreements(self) -> list[tuple[str, dict[str, int | None]]]:
        """Attributes that two sources both know and report differently (unknown is not a disagreement):
        each key with every source's value."""
        found = []
        for key in ATTRIBUTE_KEYS:
            values = {name: view.get(key) for name, view in self.sources().items()}
            if len({v for v in values.values() if v is not None}) > 1:
                found.append((key, values))
        return found


@frozen
class NvmlInfo:
    """NVML's view of the device; a query that failed (permissions, MIG slices, not supported) is None."""

    driver_version: str | None = None  # nvmlSystemGetDriverVersion, e.g. "580.159.04"
    cuda_driver_version: int | None = None  # nvmlSystemGetCudaDriverVersion, e.g. 13000 for 13.0
    uuid: str | None = None
    pci_bus_id: str | None = None
    virtualization_mode: str | None = None  # none, passthrough, vgpu, host_vgpu, host_vsga
    mig_mode: str | None = None  # enabled or disabled
    name: str | None = None
    error: str | None = None  # why NVML could not answer at all


@frozen
class DeviceContext:
    """What explains a device's numbers: its bus, NVML's view, the versions of the software that measured
    it, and for a simulated device what it was built from."""

    pci_bus_id: str | None = None  # as the backend names the device
    nvml_driver_version: str | None = None
    nvml_cuda_driver_version: int | None = None  # e.g. 13000 for CUDA 13.0
    nvml_uuid: str | None = None
    nvml_pci_bus_id: str | None = None
    nvml_virtualization_mode: str | None = None
    nvml_mig_mode: str | None = None
    nvml_name: str | None = None
    nvml_error: str | None = None
    cupy_version: str | None = None
    cuda_runtime_version: int | None = None  # cudaRuntimeGetVersion, e.g. 13020 for 13.2
    cuda_driver_version: int | None = None  # cudaDriverGetVersion, e.g. 13000 for 13.0
    numba_version: str | None = None
    profile: str | None = None  # a simulated device's profile key
    replayed_from: str | None = None  # a replayed device's report file
    replayed_backend: str | None = None  # the backend that measured it
    replayed_error: str | None = None  # the replayed device's own error: a replay keeps it

    def with_nvml(self, nvml: NvmlInfo) -> DeviceContext:
        """This context with NVML's view in its ``nvml_*`` fields."""
        return dataclasses.replace(self, **{f"nvml_{f.name}": getattr(nvml, f.name)
                                            for f in dataclasses.fields(NvmlInfo)})

    @property
    def nvml(self) -> NvmlInfo:
        """The ``nvml_*`` fields as NVML's view."""
        return NvmlInfo(**{f.name: getattr(self, f"nvml_{f.name}") for f in dataclasses.fields(NvmlInfo)})

    def get(self, key: str, default: Any = None) -> Any:
        """A field by its report key, for readers that take the JSON's names."""
        return getattr(self, key) if key in _CONTEXT_FIELDS else default

    @property
    def nvml_format_pci_bus_id(self) -> str | None:
        """The PCI bus id as NVML and DCGM write it (``00000000:3B:00.0``): NVML's own, else the backend's
        (CUDA's ``0000:3b:00.0``) with its domain widened to 8 hex digits and upper case, so that exports
        join with DCGM's series by it also where NVML could not be read."""
        return self.nvml_pci_bus_id or (nvml_bus_id(self.pci_bus_id) if self.pci_bus_id else None)


def nvml_bus_id(cuda_bus_id: str) -> str:
    """CUDA's PCI bus id (``0000:3b:00.0``) in NVML's format (``00000000:3B:00.0``); anything else as it is."""
    parts = cuda_bus_id.split(":")
    if len(parts) != 3 or not all(parts) or not all(c in "0123456789abcdefABCDEF." for c in "".join(parts)):
        return cuda_bus_id
    return f"{parts[0].zfill(8)}:{parts[1]}:{parts[2]}".upper()


_CONTEXT_FIELDS = frozenset(f.name for f in dataclasses.fields(DeviceContext))
