"""A minimal ctypes binding of the CUDA driver API: device count and device attributes.

It lets the parent process enumerate devices without importing CuPy (which costs about a second),
and it is the "driver" source of reported attributes, independent of the runtime CuPy wraps.
"""

from __future__ import annotations

import ctypes
import sys

from bisect_smem.core.errors import BackendUnavailable
from bisect_smem.core.hardware import DriverAttribute

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1


class LibCuda:
    """The driver library, loaded and initialised once per process."""

    def __init__(self) -> None:
        name = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"
        try:
            self._lib = ctypes.CDLL(name)
        except OSError as exc:
            raise BackendUnavailable(f"no NVIDIA driver found ({name} could not be loaded)") from exc
        rc = self._lib.cuInit(0)
        if rc != CUDA_SUCCESS:
            raise BackendUnavailable(f"the NVIDIA driver did not initialise (cuInit: {self.error_name(rc)})")

    def error_name(self, rc: int) -> str:
        """The driver's name for a result code (CUDA_ERROR_...)."""
        text = ctypes.c_char_p()
        if self._lib.cuGetErrorName(rc, ctypes.byref(text)) == CUDA_SUCCESS and text.value:
            return text.value.decode()
        return f"CUDA error {rc}"

    def device_count(self) -> int:
        """cuDeviceGetCount; raises BackendUnavailable when the driver refuses."""
        count = ctypes.c_int()
        rc = self._lib.cuDeviceGetCount(ctypes.byref(count))
        if rc != CUDA_SUCCESS:
            raise BackendUnavailable(f"cuDeviceGetCount failed: {self.error_name(rc)}")
        return count.value

    def driver_version(self) -> int:
        """The CUDA version the driver supports, e.g. 13000 for 13.0."""
        version = ctypes.c_int()
        rc = self._lib.cuDriverGetVersion(ctypes.byref(version))
        return version.value if rc == CUDA_SUCCESS else 0

    def attribute(self, attribute_id: int, ordinal: int) -> int | None:
        """cuDeviceGetAttribute; None when this driver does not know the attribute."""
        device = ctypes.c_int()
        rc = self._lib.cuDeviceGet(ctypes.byref(device), ordinal)
        if rc != CUDA_SUCCESS:
            raise BackendUnavailable(f"cuDeviceGet({ordinal}) failed: {self.error_name(rc)}")
        value = ctypes.c_int()
        rc = self._lib.cuDeviceGetAttribute(ctypes.byref(value), attribute_id, device)
        if rc == CUDA_ERROR_INVALID_VALUE:
            return None
        if rc != CUDA_SUCCESS:
            raise BackendUnavailable(f"cuDeviceGetAttribute({attribute_id}) failed: {self.error_name(rc)}")
        return value.value

    def attributes(self, ids: tuple[int, ...], ordinal: int) -> dict[int, int | None]:
        """cuDeviceGetAttribute for each id (None where unknown to this driver)."""
        return {attr_id: self.attribute(attr_id, ordinal) for attr_id in ids}

    def pci_bus_id(self, ordinal: int) -> str | None:
        """cuDeviceGetPCIBusId (``0000:00:06.0``); None when the driver does not say."""
        device = ctypes.c_int()
        text = ctypes.create_string_buffer(64)
        if self._lib.cuDeviceGet(ctypes.byref(device), ordinal) != CUDA_SUCCESS:
            return None
        if self._lib.cuDeviceGetPCIBusId(text, len(text), device) != CUDA_SUCCESS:
            return None
        return text.value.decode() or None

    def retain_primary_context(self, ordinal: int) -> None:
        """Create (or retain) the device's primary context, the one the runtime and CuPy then use. Through
        ctypes the interpreter lock is released meanwhile, so other threads keep working."""
        device = ctypes.c_int()
        rc = self._lib.cuDeviceGet(ctypes.byref(device), ordinal)
        if rc == CUDA_SUCCESS:
            context = ctypes.c_void_p()
            rc = self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
        if rc != CUDA_SUCCESS:
            raise BackendUnavailable(f"cuDevicePrimaryCtxRetain({ordinal}) failed: {self.error_name(rc)}")

    def residency_grid(self, ordinal: int) -> int:
        """More blocks than every SM can hold at once (block limit + 1 per SM), so each fills to its limit."""
        sms = self.attribute(DriverAttribute.MULTIPROCESSOR_COUNT, ordinal) or 1
        return sms * ((self.attribute(DriverAttribute.MAX_BLOCKS_PER_MULTIPROCESSOR, ordinal) or 32) + 1)


_instance: LibCuda | None = None


def libcuda() -> LibCuda:
    """The process-wide driver binding (raises BackendUnavailable without a driver)."""
    global _instance
    if _instance is None:
        _instance = LibCuda()
    return _instance
