"""Backends: the ways bisect_smem reaches a device. Exactly one is selected by name, and a device is
opened again, in another process, by its address."""

from __future__ import annotations

from collections.abc import Callable

from bisect_smem.core.errors import UsageError
from bisect_smem.devices.backends.base import Backend, DeviceAddress, DeviceSession
from bisect_smem.devices.backends.cupy_backend import CupyBackend
from bisect_smem.devices.backends.numba_backend import NumbaBackend
from bisect_smem.devices.backends.sim import SimBackend
from bisect_smem.devices.backends.sim_spec import SimSpec

# A backend by name; the simulator is built from its specs. Neither real backend imports its GPU
# package until a device is opened, so every one of them is cheap to name here.
BACKENDS: dict[str, Callable[[tuple[SimSpec, ...]], Backend]] = {
    "cupy": lambda _specs: CupyBackend(),
    "numba": lambda _specs: NumbaBackend(),
    "sim": SimBackend,
}
BACKEND_NAMES = tuple(BACKENDS)
REAL_BACKENDS = ("cupy", "numba")


def get_backend(name: str, sim_specs: tuple[SimSpec, ...] = ()) -> Backend:
    """The backend called ``name``; an unknown name lists the valid ones."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; valid: {', '.join(BACKEND_NAMES)}")
    return BACKENDS[name](tuple(sim_specs))


def open_address(address: DeviceAddress, static_sizes: tuple[int, ...]) -> DeviceSession:
    """A new session on the device at ``address`` (a new CUDA context when it is a real one)."""
    specs = (SimSpec.parse(address.sim_spec),) if address.sim_spec is not None else ()
    return get_backend(address.backend, specs).open(address.index, static_sizes)
