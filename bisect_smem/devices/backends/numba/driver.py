"""The driver calls numba-cuda does not offer, made on the kernels it compiled through cuda-bindings: the
shared-memory opt-in (numba-cuda has no API for it) and the CUDA error name of a failed call.

Nothing here imports numba: the dispatchers are numba's, handed in by backend.py.
"""

from __future__ import annotations

from typing import Any

from bisect_smem.devices.backends.base import driver_failure
from bisect_smem.devices.backends.driver_calls import cuda_driver


def kernel_handle(dispatcher: Any) -> int:
    """The driver handle of a compiled numba kernel (a CUkernel under library loading).

    numba-cuda 0.30 has no public way to reach it; this is the one place that uses its internals, and
    tests/measure/test_numba.py fails loudly when they change.
    """
    compiled = next(iter(dispatcher.overloads.values()))
    handle = compiled._codelibrary.get_cufunc().handle
    return int(getattr(handle, "value", handle))


def set_kernel_max_dynamic_smem(dispatcher: Any, nbytes: int, device: int) -> str | None:
    """Raise a numba kernel's dynamic shared memory limit; the CUDA error name when the driver refuses.

    The handle is a CUkernel: cuFuncSetAttribute on it answers CUDA_ERROR_INVALID_HANDLE, while
    cuKernelSetAttribute works (a plain CUfunction, in older numba, takes cuFuncSetAttribute).
    """
    cu = cuda_driver()
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel_handle(dispatcher)
    (err,) = cu.cuKernelSetAttribute(attr, nbytes, cu.CUkernel(handle), cu.CUdevice(device))
    if err == cu.CUresult.CUDA_ERROR_INVALID_HANDLE:
        (err,) = cu.cuFuncSetAttribute(cu.CUfunction(handle), attr, nbytes)
    return driver_failure(err)


def cuda_error_text(exc: BaseException) -> str:
    """The exception's text, led by the CUDA error name where it carries only a result code."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        cu = cuda_driver()
        try:
            return f"{cu.CUresult(code).name}: {exc}"
        except ValueError:
            pass
    return str(exc)
