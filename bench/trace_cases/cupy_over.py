"""A CuPy RawKernel asked for one byte more dynamic shared memory than the device's opt-in ceiling: CuPy's
cuFuncSetAttribute is refused. Then the ceiling itself, launched. Run as a multiprocessing child too."""

import multiprocessing
import sys

import cupy

SOURCE = r"""extern "C" __global__ void fill(int n) {
    extern __shared__ int smem[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) smem[i] = i;
}"""


def one_byte_over() -> None:
    kernel = cupy.RawKernel(SOURCE, "fill")
    optin = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
    try:
        kernel.max_dynamic_shared_size_bytes = optin + 1
        print(f"{optin + 1} B: accepted")
    except cupy.cuda.driver.CUDADriverError as exc:
        print(f"{optin + 1} B: {exc}")
    kernel.max_dynamic_shared_size_bytes = optin
    kernel((1,), (128,), (cupy.int32(optin // 4),), shared_mem=optin)
    cupy.cuda.Device().synchronize()
    print(f"{optin} B: launched")


if __name__ == "__main__":
    if sys.argv[1:] == ["child"]:
        process = multiprocessing.get_context("spawn").Process(target=one_byte_over)
        process.start()
        process.join()
        sys.exit(process.exitcode)
    one_byte_over()
