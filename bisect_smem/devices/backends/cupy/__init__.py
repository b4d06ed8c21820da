"""The CuPy backend: probe kernels compiled by NVRTC and launched by CuPy (backend.py); only backend.py
imports CuPy. This file is the backend's entry in the table, and imports nothing else."""

from __future__ import annotations

from bisect_smem.devices.backends.entry import BackendEntry

BACKEND = BackendEntry(name="cupy", factory="bisect_smem.devices.backends.cupy.backend:CupyBackend",
                       required_modules=("cupy",), validates=True)
