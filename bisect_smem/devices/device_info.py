"""Opening a device: compile and load its probe kernels and read what it says about itself, once."""

from __future__ import annotations

import time

from bisect_smem.core.attributes import NvmlInfo, ReportedAttributes
from bisect_smem.core.frozen import frozen
from bisect_smem.devices.attributes import driver_view, runtime_view
from bisect_smem.devices.backends.base import Backend, DeviceIdentity, DeviceSession


@frozen
class DeviceInfo:
    """What a device says about itself, gathered once when it is opened."""

    identity: DeviceIdentity
    reported: ReportedAttributes
    nvml: NvmlInfo
    open_s: float = 0.0  # compiling and loading the kernels, reading the attributes


def open_device(backend: Backend, index: int, static_sizes: tuple[int, ...], nvml: bool = True,
                step_kinds: frozenset[str] | None = None) -> tuple[DeviceSession, DeviceInfo]:
    """Open the device (with the kernels the steps of ``step_kinds`` need, None: all) and read what it
    reports; ``nvml=False`` leaves NVML to the caller."""
    start = time.perf_counter()
    session = backend.open(index, static_sizes, step_kinds)
    reported = ReportedAttributes(driver_view(session.driver_attributes()), runtime_view(session.runtime_attributes()))
    info = DeviceInfo(session.identity(), reported, session.nvml_info() if nvml else NvmlInfo(),
                      round(time.perf_counter() - start, 6))
    return session, info
