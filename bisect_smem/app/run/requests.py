"""What a run asks for, built in one place from the options the CLI, ``fit`` and the pytest plugin share.

The backend is resolved here, once, and travels as an object (to worker processes too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.numbers import whole_number
from bisect_smem.devices.backends.base import Backend
from bisect_smem.devices.backends.table import BACKENDS, DEFAULT_BACKEND, REAL_BACKENDS, SIMULATED_BACKEND, get_backend
from bisect_smem.devices.probes import MarchFault
from bisect_smem.experiments.config import MeasureConfig, PlantedFaults

ALL_BACKENDS = "all"


@frozen
class RunRequest:
    """What to run: a backend (resolved once), which devices (None: all visible), how, and for how long."""

    backend: Backend
    devices: tuple[int, ...] | None = None
    config: MeasureConfig = MeasureConfig()
    isolate: bool | None = None  # None: a worker process unless the backend needs none
    device_timeout_s: float = 300.0
    probe_timeout_s: float = 5.0
    startup_timeout_s: float = 120.0
    max_restarts: int = 6
    inject_fault: str | None = None  # test only: a step whose first attempt makes a real illegal access
    inject_device: int | None = None  # test only: the one device it does so on (None: every device)

    def __post_init__(self) -> None:
        for name in ("device_timeout_s", "probe_timeout_s", "startup_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 (got {getattr(self, name)})")
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0 (got {self.max_restarts})")

    @property
    def simulated(self) -> bool:
        """Whether the backend models its devices rather than reaching a GPU (the table says)."""
        return BACKENDS[self.backend.name].simulated

    @property
    def isolated(self) -> bool:
        """Worker processes, unless asked otherwise, or the backend needs none and no fault is injected."""
        if self.isolate is not None:
            return self.isolate
        return self.backend.needs_isolation or self.inject_fault is not None


def backend_for(name: str | None, simulate: Sequence[str] | None = None) -> Backend:
    """The backend a run uses: by name, or the simulator when ``--simulate`` specs are given."""
    name = name or (SIMULATED_BACKEND if simulate else DEFAULT_BACKEND)
    if simulate:
        if name != SIMULATED_BACKEND:
            raise UsageError(f"--simulate runs on the {SIMULATED_BACKEND} backend, not {name!r}")
        return get_backend(name, tuple(simulate))
    if name == SIMULATED_BACKEND:
        raise UsageError(f"the {name} backend needs --simulate PROFILE (see `bisect-smem profiles`)")
    return get_backend(name)


def build_request(backend: str | None = None, simulate: Sequence[str] | None = None, **options: Any) -> RunRequest:
    """A RunRequest for one backend; ``options`` are RunRequest's other fields."""
    return RunRequest(backend_for(backend, simulate), **options)


def build_requests(backend: str | None, simulate: Sequence[str] | None,
                   **options: Any) -> tuple[list[RunRequest], list[str]]:
    """One request per backend to run: ``all`` means every real backend available here. Returns the
    requests and, for ``all``, why each missing backend was left out."""
    if backend not in (None, *BACKENDS, ALL_BACKENDS):
        raise UsageError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}, {ALL_BACKENDS}")
    if backend != ALL_BACKENDS:
        return [build_request(backend, simulate, **options)], []
    if simulate:
        raise UsageError(f"--simulate runs on the sim backend, not {ALL_BACKENDS!r}")
    candidates = [get_backend(name) for name in REAL_BACKENDS]
    skipped = [f"{b.name}: {b.unavailable_reason()}" for b in candidates if not b.is_available()]
    requests = [RunRequest(b, **options) for b in candidates if b.is_available()]
    return requests, skipped


def planted_faults(values: Sequence[str] | None, level: str) -> tuple[str | None, PlantedFaults]:
    """The hidden, test-only ``--inject-fault`` values: a step key (its first attempt makes a real illegal
    access), ``march:SM:BYTE`` (the march kernel corrupts that SM's word holding BYTE between its write and
    read) and ``sweep-hole:BYTES`` (the granule sweep's launch of BYTES reads a byte wrong); the last two
    need --level full. Returns the step key (or None) and the planted kernel faults."""
    step, march, hole = None, None, None
    for value in values or ():
        kind, _, rest = value.partition(":")
        if kind in ("march", "sweep-hole") and level != "full":
            raise UsageError(f"--inject-fault {value}: the validation kernels run at --level full only")
        if kind == "march":
            sm, sep, byte = rest.partition(":")
            if not sep:
                raise UsageError(f"--inject-fault {value}: march takes SM:BYTE, like march:5:1000")
            march = MarchFault(whole_number(sm, "--inject-fault march SM"), whole_number(byte, "--inject-fault march byte"))
        elif kind == "sweep-hole":
            hole = whole_number(rest, "--inject-fault sweep-hole bytes")
            if hole < 1:
                raise UsageError(f"--inject-fault {value}: the hole must be at a size of 1 B or more")
        elif step is not None:
            raise UsageError(f"--inject-fault names one step (got {step} and {value})")
        else:
            step = value
    return step, PlantedFaults(march, hole)
