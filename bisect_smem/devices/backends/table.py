"""The backends, one table: each backend's package declares its entry (entry.py) and has one line here.

Reading the table imports the three packages' ``__init__`` files and nothing else: a backend's own modules,
and CuPy or numba, load when that backend is built (``get_backend``), so a run that measures no GPU (fit
against published rows, merge, profiles) never loads the real ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from bisect_smem.core.errors import UsageError
from bisect_smem.devices.backends import cupy, numba, sim
from bisect_smem.devices.backends.entry import BackendEntry

if TYPE_CHECKING:
    # Deferred to type checking: the protocols' module loads the driver binding, which reading the table never needs.
    from bisect_smem.devices.backends.base import Backend, DeviceAddress, DeviceSession

# A new backend is its package and one line here; the order is the order --help and --backend all list them.
BACKENDS: Mapping[str, BackendEntry] = MappingProxyType(
    {entry.name: entry for entry in (cupy.BACKEND, numba.BACKEND, sim.BACKEND)})
# The backends that reach a GPU: what --backend all runs, where each one's libraries are installed.
REAL_BACKENDS = tuple(name for name, entry in BACKENDS.items() if not entry.simulated)
# What a run uses when no backend is named: the first real one, or the simulated one with --simulate.
DEFAULT_BACKEND = REAL_BACKENDS[0]
SIMULATED_BACKEND = next(name for name, entry in BACKENDS.items() if entry.simulated)
# The backends that run --level full's validation kernels.
VALIDATING_BACKENDS = tuple(name for name, entry in BACKENDS.items() if entry.validates)


def entry_for(name: str) -> BackendEntry:
    """The table's entry called ``name``; an unknown name lists the valid ones."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    return BACKENDS[name]


def get_backend(name: str, sim_specs: Sequence[str] = ()) -> Backend:
    """The backend called ``name`` (the simulator built from the ``--simulate`` texts ``sim_specs``)."""
    return entry_for(name).build(sim_specs)


def open_address(address: DeviceAddress, static_sizes: tuple[int, ...]) -> DeviceSession:
    """A new session on the device at ``address`` (a new CUDA context when it is a real one)."""
    specs = (address.sim_spec,) if address.sim_spec is not None else ()
    return get_backend(address.backend, specs).open(address.index, static_sizes)
