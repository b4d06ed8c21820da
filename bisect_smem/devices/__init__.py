"""devices: how a GPU is reached. May import core only.

The backends (backends/: the registry, the Backend protocol with its one CUDA-error funnel, the probe
families a session implements, one small protocol each (families), the batch planners (batches), cupy,
numba, and the simulated device over its DeviceModel, each session's families beyond the ceilings in
modules of their own), the probe kernels' ABI (kernel_abi, validation_abi), the probe outcome types
(probes), the compiler and its cache (nvrtc), ptxas -v where installed (ptxas), reading the reported
attributes and NVML (attributes) and the host the device lives in (host). Only backends/cupy/backend.py
imports cupy and only backends/numba/backend.py (with numba_kernels) imports numba.
"""
