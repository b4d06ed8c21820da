"""The numba backend: the same probes as numba-cuda kernels, compiled by NVVM (backend.py, kernels.py);
only those two import numba. This file is the backend's entry in the table, and imports nothing else."""

from __future__ import annotations

from bisect_smem.devices.backends.entry import BackendEntry

BACKEND = BackendEntry(name="numba", factory="bisect_smem.devices.backends.numba.backend:NumbaBackend",
                       required_modules=("numba", "numba_cuda", "cuda.bindings"))
