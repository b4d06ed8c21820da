"""Backends: the ways bisect_smem reaches a device. Exactly one is selected by name, and a device is
opened again, in another process, by its address.

Each backend's module is imported when it is named, the simulator's too: importing this package (as a
worker does first, for the driver binding in libcuda.py, to start its device's context) loads none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bisect_smem.core.errors import UsageError

if TYPE_CHECKING:
    # Deferred to type checking: these name the backends' types, whose modules load when a backend is named.
    from bisect_smem.devices.backends.base import Backend, DeviceAddress, DeviceSession
    from bisect_smem.devices.backends.sim_spec import SimSpec

BACKEND_NAMES = ("cupy", "numba", "sim")
REAL_BACKENDS = ("cupy", "numba")
# What each real backend needs installed (its device_count says which is missing; the head start looks first).
REQUIRED_MODULES = {"cupy": ("cupy",), "numba": ("numba", "numba_cuda", "cuda.bindings")}


def get_backend(name: str, sim_specs: tuple[SimSpec, ...] = ()) -> Backend:
    """The backend called ``name`` (the simulator built from ``sim_specs``); an unknown name lists the valid ones."""
    # Deferred: a backend's module is imported when it is named, not before, so a run that measures no
    # GPU (fit against published rows, merge, profiles) never loads the real ones, and a worker reaches
    # the driver binding before any of them.
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


def open_address(address: DeviceAddress, static_sizes: tuple[int, ...]) -> DeviceSession:
    """A new session on the device at ``address`` (a new CUDA context when it is a real one)."""
    # Deferred: the --simulate parser is the simulator's, loaded only where a simulated device is opened.
    from bisect_smem.devices.backends.sim_spec import SimSpec

    specs = (SimSpec.parse(address.sim_spec),) if address.sim_spec is not None else ()
    return get_backend(address.backend, specs).open(address.index, static_sizes)
