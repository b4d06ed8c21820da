"""A CUDA 12 stack on any driver: cuda-bindings 12.x's driver API loads a cubin (built by nvcc for this GPU),
asks MaxDynamicSharedMemorySize one byte over the opt-in ceiling (refused), launches 100000 B without raising
the limit (refused), then raises it and launches at the ceiling.

    python cuda12_driver.py FILL.cubin
"""

import ctypes
import sys

from cuda.bindings import driver as cu


def check(result: tuple) -> object:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{err}")
    return rest[0] if len(rest) == 1 else rest


def main() -> int:
    check(cu.cuInit(0))
    device = check(cu.cuDeviceGet(0))
    context = check(cu.cuDevicePrimaryCtxRetain(device))
    check(cu.cuCtxSetCurrent(context))
    version = check(cu.cuDriverGetVersion())
    optin = check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                          device))
    module = check(cu.cuModuleLoad(sys.argv[1].encode()))
    fill = check(cu.cuModuleGetFunction(module, b"fill"))
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    print(f"driver CUDA {version}; opt-in {optin} B")
    (err,) = cu.cuFuncSetAttribute(fill, attr, optin + 1)
    print(f"cuFuncSetAttribute({optin + 1} B): {err}")
    args = ((ctypes.c_int(1024),), (ctypes.c_int,))
    (err,) = cu.cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, 100000, 0, args, 0)
    print(f"cuLaunchKernel(100000 B, limit never raised): {err}")
    check(cu.cuFuncSetAttribute(fill, attr, optin))
    (err,) = cu.cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, optin, 0, args, 0)
    print(f"cuLaunchKernel({optin} B after raising): {err}; sync {cu.cuCtxSynchronize()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
