"""What the CuPy backend asks the driver for through cuda-bindings, where CuPy has no call: a cluster
launch (cuLaunchKernelEx with a cluster dimension), the non-portable cluster attribute, and the occupancy
queries that take a function handle. Each call's result code goes through ``driver_failure`` or
``driver_value`` (backends/base.py); a refused attribute raises DriverError, which the backend's
CUDA-error funnel turns into the probe's outcome.

cuda-bindings is imported in one place, ``cuda_driver`` (deferred): it is an extra, and only a device's
worker that launches clusters, asks the occupancy API or drives numba's kernels needs it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from bisect_smem.devices.backends.base import driver_failure, driver_value

KERNEL_ARGUMENT_TYPES = {"uint": ctypes.c_uint, "pointer": ctypes.c_void_p, "ulonglong": ctypes.c_ulonglong}


class DriverError(Exception):
    """A cuda-bindings call that failed; the message is the CUDA error name."""


def cuda_driver() -> Any:
    """cuda-bindings' driver module (ImportError where the extra is not installed)."""
    # Deferred: an extra, loaded only by a worker that makes one of these calls.
    from cuda.bindings import driver

    return driver


def bindings_installed() -> bool:
    """Whether cuda-bindings' driver module can be imported here."""
    try:
        cuda_driver()
    except ImportError:
        return False
    return True


def function_handle(pointer: int, nonportable: bool = False) -> Any:
    """The CUfunction at ``pointer`` (a CuPy function's ``kernel.ptr``), allowed non-portable cluster sizes
    where asked; a refusal raises DriverError."""
    cu = cuda_driver()
    handle = cu.CUfunction(pointer)
    if nonportable:
        (err,) = cu.cuFuncSetAttribute(handle, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                       1)
        refused = driver_failure(err)
        if refused:
            raise DriverError(refused)
    return handle


def launch_config(grid: int, threads: int, dynamic_bytes: int, cluster_size: int | None) -> Any:
    """A CUlaunchConfig of ``grid`` blocks of ``threads``, with ``dynamic_bytes`` of dynamic shared memory
    and, where given, clusters of ``cluster_size`` blocks, on the legacy default stream."""
    cu = cuda_driver()
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    config.sharedMemBytes = dynamic_bytes
    config.hStream = cu.CUstream(0)
    if cluster_size is not None:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster_size, 1, 1
        config.attrs = [attr]
        config.numAttrs = 1
    else:
        config.numAttrs = 0
    return config


def launch(handle: Any, config: Any, args: Sequence[Any], types: Sequence[str]) -> str | None:
    """cuLaunchKernelEx with ``args`` of the ``types`` named in KERNEL_ARGUMENT_TYPES; the CUDA error name
    when it fails (a cluster that cannot launch is refused here, synchronously)."""
    cu = cuda_driver()
    (err,) = cu.cuLaunchKernelEx(config, handle, (tuple(args), tuple(KERNEL_ARGUMENT_TYPES[t] for t in types)), 0)
    return driver_failure(err)


def available_dynamic_smem(pointer: int, threads: int) -> int | None:
    """cuOccupancyAvailableDynamicSMemPerBlock at one block per SM; None without cuda-bindings or an answer."""
    try:
        cu = cuda_driver()
    except ImportError:
        return None
    size = driver_value(cu.cuOccupancyAvailableDynamicSMemPerBlock(cu.CUfunction(pointer), 1, threads))
    return None if size is None else int(size)


def max_active_clusters(handle: Any, config: Any) -> int | None:
    """cuOccupancyMaxActiveClusters for a launch configuration; None where it does not answer."""
    cu = cuda_driver()
    count = driver_value(cu.cuOccupancyMaxActiveClusters(handle, config))
    return None if count is None else int(count)


def max_potential_cluster_size(handle: Any, config: Any) -> int | None:
    """cuOccupancyMaxPotentialClusterSize for a launch configuration; None where it does not answer."""
    cu = cuda_driver()
    size = driver_value(cu.cuOccupancyMaxPotentialClusterSize(handle, config))
    return None if size is None else int(size)
