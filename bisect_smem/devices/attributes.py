"""What the device reports: driver attributes, runtime properties and NVML, and where they disagree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
ATTRIBUTE_KEYS = tuple(key for _, key, _ in DEVICE_ATTRIBUTES)
DRIVER_ATTRIBUTE_IDS = (*(attr_id for attr_id, _, _ in DEVICE_ATTRIBUTES),
                        *(attr_id for attr_id, _ in DRIVER_ONLY_ATTRIBUTES))

NVML_VIRTUALIZATION_MODES = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}
NVML_FIELDS = ("driver_version", "cuda_driver_version", "uuid", "pci_bus_id", "virtualization_mode", "mig_mode",
               "name")


def driver_view(values_by_id: dict[int, int | None]) -> dict[str, int | None]:
    """Driver attribute values under their report keys."""
    view = {key: values_by_id.get(attr_id) for attr_id, key, _ in DEVICE_ATTRIBUTES}
    view.update({key: values_by_id.get(attr_id) for attr_id, key in DRIVER_ONLY_ATTRIBUTES})
    return view


def runtime_view(props: dict[str, Any]) -> dict[str, int | None]:
    """Runtime device properties under the same report keys as the driver's."""
    out: dict[str, int | None] = {}
    for _, key, prop in DEVICE_ATTRIBUTES:
        value = props.get(prop)
        out[key] = int(value) if value is not None else None
    return out


@dataclass(frozen=True)
class Disagreement:
    """One attribute two sources report differently."""

    key: str
    values: dict[str, int | None]

    def describe(self) -> str:
        """``key: driver X, runtime Y``."""
        return f"{self.key}: " + ", ".join(f"{src} {val}" for src, val in self.values.items())


def disagreements(reported: dict[str, dict[str, Any]]) -> list[Disagreement]:
    """Attributes that two sources both know and report differently (unknown is not a disagreement)."""
    found = []
    for key in ATTRIBUTE_KEYS:
        values = {src: view.get(key) for src, view in reported.items() if key in view}
        known = {v for v in values.values() if v is not None}
        if len(known) > 1:
            found.append(Disagreement(key, values))
    return found


def best_value(reported: dict[str, dict[str, Any]], key: str) -> tuple[int | None, str | None]:
    """The value of ``key`` from the first source that knows it, driver first, and that source's name."""
    for source in ("driver", "runtime"):
        value = reported.get(source, {}).get(key)
        if value is not None:
            return value, source
    return None, None


def read_nvml(pci_bus_id: str | None) -> dict[str, Any]:
    """NVML's view of the device with this PCI bus id. Every field that fails is None, never an exception.

    In MIG slices and some containers NVML answers with permission errors for the parent device;
    CUDA still reports the slice, so a failure here only makes fields unknown.
    """
    info: dict[str, Any] = dict.fromkeys(NVML_FIELDS)
    info["error"] = None
    try:
        import pynvml
    except ImportError:
        info["error"] = "nvidia-ml-py is not installed"
        return info
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVML raises its own error type per failure code
        info["error"] = f"nvmlInit failed: {exc}"
        return info
    try:
        info["driver_version"] = _nvml(pynvml.nvmlSystemGetDriverVersion)
        cuda_version = _nvml(pynvml.nvmlSystemGetCudaDriverVersion)
        info["cuda_driver_version"] = cuda_version
        handle = _nvml(pynvml.nvmlDeviceGetHandleByPciBusId, pci_bus_id) if pci_bus_id else None
        if handle is None:
            info["error"] = f"no NVML device for PCI bus id {pci_bus_id}"
            return info
        info["uuid"] = _nvml(pynvml.nvmlDeviceGetUUID, handle)
        pci = _nvml(pynvml.nvmlDeviceGetPciInfo, handle)
        info["pci_bus_id"] = _text(pci.busId) if pci is not None else None
        info["name"] = _nvml(pynvml.nvmlDeviceGetName, handle)
        mode = _nvml(pynvml.nvmlDeviceGetVirtualizationMode, handle)
        info["virtualization_mode"] = NVML_VIRTUALIZATION_MODES.get(mode, f"unknown ({mode})") if mode is not None \
            else None
        mig = _nvml(pynvml.nvmlDeviceGetMigMode, handle)
        info["mig_mode"] = ("enabled" if mig[0] else "disabled") if mig is not None else None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    for key in ("driver_version", "uuid", "name"):
        info[key] = _text(info[key])
    return info


def _nvml(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:  # noqa: BLE001 - NotSupported, NoPermission, ... all mean "unknown"
        return None


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value
