"""The simulated backend: devices modelled from a published profile or a replayed report (backend.py), no
GPU needed. This file is the backend's entry in the table, and imports nothing else."""

from __future__ import annotations

from bisect_smem.devices.backends.entry import BackendEntry

BACKEND = BackendEntry(name="sim", factory="bisect_smem.devices.backends.sim.backend:from_specs", simulated=True,
                       validates=True)
