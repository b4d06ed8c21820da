"""Backends: the ways bisect_smem reaches a device. Exactly one is selected by name."""

from __future__ import annotations

from bisect_smem.backends.base import Backend
from bisect_smem.errors import UsageError

BACKEND_NAMES = ("cupy", "numba", "sim")
REAL_BACKENDS = ("cupy", "numba")


def get_backend(name: str, sim_specs: tuple = ()) -> Backend:
    """The backend called ``name``; an unknown name lists the valid ones."""
    if name == "cupy":
        from bisect_smem.backends.cupy_backend import CupyBackend

        return CupyBackend()
    if name == "numba":
        from bisect_smem.backends.numba_backend import NumbaBackend

        return NumbaBackend()
    if name == "sim":
        from bisect_smem.backends.sim import SimBackend

        return SimBackend(tuple(sim_specs))
    raise UsageError(f"unknown backend {name!r}; valid: {', '.join(BACKEND_NAMES)}")
