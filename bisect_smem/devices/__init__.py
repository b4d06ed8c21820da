"""devices: how a GPU is reached. May import core only.

The backends (backends/: the Backend protocol with its one CUDA-error funnel, cupy, numba, and the
simulated device), the probe kernels' ABI (kernel_abi: names, source, result-word layout), the probe
outcome types (probes), the reported attributes by source (attributes: driver, runtime, NVML) and the
host the device lives in (host: hypervisor, DMI, container). Only backends/cupy_backend.py imports
cupy and only backends/numba_backend.py imports numba.
"""
