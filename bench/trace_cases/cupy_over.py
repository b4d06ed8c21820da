"""A CuPy RawKernel asked for one byte more dynamic shared memory than the device's opt-in ceiling: CuPy's
cuFuncSetAttribute is refused. Then the ceiling itself, launched. Run as a multiprocessing child too.

``under_ceiling``: a kernel launched with 100000 B whose MaxDynamicSharedMemorySize was never raised (the
launch is refused though the GPU accepts far more after cudaFuncSetAttribute). ``server``: launches in a loop
until a signal ends it, as a serving process does, printing how many it made."""

import multiprocessing
import signal
import sys
import time

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


def under_ceiling() -> None:
    kernel = cupy.RawKernel(SOURCE, "fill")
    try:
        kernel((1,), (128,), (cupy.int32(100000 // 4),), shared_mem=100000)
        cupy.cuda.Device().synchronize()
        print("100000 B without raising the limit: launched")
    except cupy.cuda.driver.CUDADriverError as exc:
        print(f"100000 B without raising the limit: {exc}")


def server() -> None:
    """Launches until SIGTERM; Python's default SIGTERM ends the process without atexit, as a killed server."""
    kernel = cupy.RawKernel(SOURCE, "fill")
    launched = 0
    print("serving", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for _ in range(1000):
            kernel((1,), (128,), (cupy.int32(1024),), shared_mem=4096)
        launched += 1000
        cupy.cuda.Device().synchronize()
        with open(sys.argv[2], "w") as f:
            f.write(str(launched))


if __name__ == "__main__":
    if sys.argv[1:2] == ["under_ceiling"]:
        under_ceiling()
        sys.exit(0)
    if sys.argv[1:2] == ["server"]:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        server()
        sys.exit(0)
    if sys.argv[1:] == ["child"]:
        process = multiprocessing.get_context("spawn").Process(target=one_byte_over)
        process.start()
        process.join()
        sys.exit(process.exitcode)
    one_byte_over()
