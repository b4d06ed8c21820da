"""Backends: the ways bisect_smem reaches a device. Exactly one is selected by name."""

from __future__ import annotations

from bisect_smem.core.errors import UsageError
from bisect_smem.devices.backends.base import Backend

BACKEND_NAMES = ("cupy", "numba", "sim")
REAL_BACKENDS = ("cupy", "numba")


def get_backend(name: str, sim_specs: tuple = ()) -> Backend:
    """The backend called ``name``; an unknown name lists the valid ones."""
    if name == "cupy":
        from bisect_smem.devices.backends.cupy_backend import CupyBackend

        return CupyBackend()
    if name == "numba":
        from bisect_smem.devices.backends.numba_backend import NumbaBackend

        return NumbaBackend()
    if name == "sim":
        from bisect_smem.devices.backends.sim import SimBackend

        return SimBackend(tuple(sim_specs))
    raise UsageError(f"unknown backend {name!r}; valid: {', '.join(BACKEND_NAMES)}")
