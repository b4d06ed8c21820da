"""Reading what a device reports: driver attributes by id, runtime properties by cudaDeviceProp name, and
NVML, into the typed views of core/attributes.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bisect_smem.core.attributes import DeviceAttributes, DriverAttributes, NvmlInfo
from bisect_smem.core.hardware import DriverAttribute

# (driver attribute, report key, cudaDeviceProp name)
DEVICE_ATTRIBUTES: tuple[tuple[DriverAttribute, str, str], ...] = (
    (DriverAttribute.MAX_SHARED_MEMORY_PER_BLOCK, "max_shared_memory_per_block_bytes", "sharedMemPerBlock"),
    (DriverAttribute.MULTIPROCESSOR_COUNT, "multiprocessor_count", "multiProcessorCount"),
    (DriverAttribute.MAX_THREADS_PER_MULTIPROCESSOR, "max_threads_per_multiprocessor", "maxThreadsPerMultiProcessor"),
    (DriverAttribute.COMPUTE_CAPABILITY_MAJOR, "compute_capability_major", "major"),
    (DriverAttribute.COMPUTE_CAPABILITY_MINOR, "compute_capability_minor", "minor"),
    (DriverAttribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "max_shared_memory_per_multiprocessor_bytes",
     "sharedMemPerMultiprocessor"),
    (DriverAttribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max_shared_memory_per_block_optin_bytes",
     "sharedMemPerBlockOptin"),
    (DriverAttribute.MAX_BLOCKS_PER_MULTIPROCESSOR, "max_blocks_per_multiprocessor", "maxBlocksPerMultiProcessor"),
    (DriverAttribute.RESERVED_SHARED_MEMORY_PER_BLOCK, "reserved_shared_memory_per_block_bytes",
     "reservedSharedMemPerBlock"),
    (DriverAttribute.CLUSTER_LAUNCH, "cluster_launch", "clusterLaunch"),
)
# Attributes only the driver API has (no cudaDeviceProp field); None where the driver does not know the id.
# 150: CU_DEVICE_ATTRIBUTE_MAX_OVERSIZED_SHARED_MEMORY_PER_BLOCK, new in CUDA 13.4 drivers.
DRIVER_ONLY_ATTRIBUTES: tuple[tuple[int, str], ...] = (
    (150, "max_oversized_shared_memory_per_block_bytes"),
)
DRIVER_ATTRIBUTE_IDS = (*(attr_id for attr_id, _, _ in DEVICE_ATTRIBUTES),
                        *(attr_id for attr_id, _ in DRIVER_ONLY_ATTRIBUTES))

NVML_VIRTUALIZATION_MODES = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}


def driver_view(values_by_id: dict[int, int | None]) -> DriverAttributes:
    """Driver attribute values (by cuDeviceGetAttribute id) under their report names."""
    return DriverAttributes(**{key: values_by_id.get(attr_id) for attr_id, key, _ in DEVICE_ATTRIBUTES},
                            **{key: values_by_id.get(attr_id) for attr_id, key in DRIVER_ONLY_ATTRIBUTES})


def runtime_view(props: dict[str, Any]) -> DeviceAttributes:
    """Runtime device properties (by cudaDeviceProp name) under the same report names as the driver's."""
    values = {key: props.get(prop) for _, key, prop in DEVICE_ATTRIBUTES}
    return DeviceAttributes(**{key: int(value) if value is not None else None for key, value in values.items()})


def read_nvml(pci_bus_id: str | None) -> NvmlInfo:
    """NVML's view of the device with this PCI bus id. Every field that fails is None, never an exception."""
    return read_nvml_all([pci_bus_id])[0]


def read_nvml_all(pci_bus_ids: Sequence[str | None]) -> list[NvmlInfo]:
    """NVML's view of each device by PCI bus id, NVML started once for all of them. Every field that
    fails is None, never an exception.

    In MIG slices and some containers NVML answers with permission errors for the parent device;
    CUDA still reports the slice, so a failure here only makes fields unknown.
    """
    try:
        import pynvml  # deferred: only the supervisor of real devices asks NVML
    except ImportError:
        return [NvmlInfo(error="nvidia-ml-py is not installed") for _ in pci_bus_ids]
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVML raises its own error type per failure code
        return [NvmlInfo(error=f"nvmlInit failed: {exc}") for _ in pci_bus_ids]
    try:
        system = {"driver_version": _nvml(pynvml.nvmlSystemGetDriverVersion),
                  "cuda_driver_version": _nvml(pynvml.nvmlSystemGetCudaDriverVersion)}
        return [_device_nvml(pynvml, system, bus_id) for bus_id in pci_bus_ids]
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _device_nvml(pynvml: Any, system: dict[str, Any], pci_bus_id: str | None) -> NvmlInfo:
    """One device's view, beside the system's (driver and CUDA versions)."""
    info = dict(system)
    handle = _nvml(pynvml.nvmlDeviceGetHandleByPciBusId, pci_bus_id) if pci_bus_id else None
    if handle is None:
        return NvmlInfo(**info, error=f"no NVML device for PCI bus id {pci_bus_id}")
    info["uuid"] = _nvml(pynvml.nvmlDeviceGetUUID, handle)
    pci = _nvml(pynvml.nvmlDeviceGetPciInfo, handle)
    info["pci_bus_id"] = _text(pci.busId) if pci is not None else None
    info["name"] = _nvml(pynvml.nvmlDeviceGetName, handle)
    mode = _nvml(pynvml.nvmlDeviceGetVirtualizationMode, handle)
    info["virtualization_mode"] = NVML_VIRTUALIZATION_MODES.get(mode, f"unknown ({mode})") if mode is not None \
        else None
    mig = _nvml(pynvml.nvmlDeviceGetMigMode, handle)
    info["mig_mode"] = ("enabled" if mig[0] else "disabled") if mig is not None else None
    nvml = NvmlInfo(**info)
    return replace(nvml, driver_version=_text(nvml.driver_version), uuid=_text(nvml.uuid), name=_text(nvml.name))


def _nvml(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - NotSupported, NoPermission, ... all mean "unknown"
        return None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value
