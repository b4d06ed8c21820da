"""The Backend protocol, the DeviceSession core every session implements (its probe families are in
families.py), and the one funnel of CUDA errors: the seam below the experiments."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bisect_smem.core.attributes import DeviceContext, NvmlInfo
from bisect_smem.core.errors import BisectSmemError
from bisect_smem.core.frozen import frozen
from bisect_smem.devices.attributes import read_nvml_all
from bisect_smem.devices.backends.libcuda import libcuda
from bisect_smem.devices.probes import Outcome, classify_cuda_error


def driver_failure(err: Any) -> str | None:
    """The CUDA error name of a failed cuda-bindings driver call (its ``CUresult``); None on success."""
    return None if int(err) == 0 else err.name


def driver_value(result: tuple[Any, ...]) -> Any | None:
    """The value a cuda-bindings driver call returned, or None when the call failed. For the API's
    predictions, recorded beside what the GPU did: an unanswered prediction is unknown, not a fault."""
    err, *values = result
    if driver_failure(err) is not None:
        return None
    return values[0] if len(values) == 1 else tuple(values)


@dataclass
class CudaFailure:
    """What ``CudaErrorFunnel`` caught in its block: the error's Outcome class and text (falsy if none)."""

    outcome: Outcome | None = None
    detail: str = ""

    def __bool__(self) -> bool:
        return self.outcome is not None


@frozen
class CudaErrorFunnel:
    """The one place a backend's CUDA exceptions become probe outcomes.

    ``errors`` are the exception types the backend's CUDA layers raise (CuPy's, cuda-bindings', numba's);
    ``describe`` turns one into text that names the CUDA error; ``is_cuda`` may reject an exception of
    those types that is not a CUDA failure, which then propagates as the bug it is. Use::

        with self.cuda_errors() as failed:
            ...                      # launch, synchronise, read back
        if failed:
            return LaunchOutcome(failed.outcome, failed.detail)
    """

    errors: tuple[type[BaseException], ...]
    describe: Callable[[BaseException], str] = str
    is_cuda: Callable[[BaseException], bool] = lambda _exc: True

    @contextmanager
    def __call__(self) -> Iterator[CudaFailure]:
        """A block whose CUDA errors become the yielded CudaFailure."""
        failure = CudaFailure()
        try:
            yield failure
        except self.errors as exc:
            if not self.is_cuda(exc):
                raise
            failure.detail = self.describe(exc)
            failure.outcome = classify_cuda_error(failure.detail)


@frozen
class DeviceIdentity:
    """Who the device is, as the backend sees it."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    pci_bus_id: str | None = None
    extra: DeviceContext = DeviceContext()  # what the backend adds to the report's context (its versions)


@frozen
class DeviceAddress:
    """How another process opens the same device (the backends' registry opens it): a backend name, an
    index, and for a simulated device its ``--simulate`` text."""

    backend: str
    index: int
    sim_spec: str | None = None


class DeviceSession(Protocol):
    """One opened device with the probe kernels of its steps compiled and loaded: who it is and what it
    reports. What it can measure are the probe families it implements beside this (families.py)."""

    def identity(self) -> DeviceIdentity:
        """Name, compute capability and PCI bus id."""
        ...

    def driver_attributes(self) -> dict[int, int | None]:
        """cuDeviceGetAttribute values by attribute id."""
        ...

    def runtime_attributes(self) -> dict[str, int | None]:
        """Runtime device properties (cudaDeviceProp names)."""
        ...

    def nvml_info(self) -> NvmlInfo:
        """NVML's view: driver version, UUID, virtualization and MIG mode; None for what failed."""
        ...

    def close(self) -> None:
        """Release the module and buffers."""
        ...


class RealDevices:
    """``is_available`` and ``unavailable_reason`` of a backend that reaches real devices, from its
    ``device_count``, which raises BackendUnavailable with the reason. A real device's faults can end
    its process, so it is always measured in a worker of its own."""

    needs_isolation = True
    nvml_from_host = True
    primary_context = True
    preloaded: tuple[str, ...] = ()  # the modules its sessions open devices through

    def preload(self) -> None:
        """Import ``preloaded`` (Backend.preload); a failure is for ``open`` to report."""
        for module in self.preloaded:
            try:
                importlib.import_module(module)
            except ImportError:
                pass

    def host_nvml(self, indices: tuple[int, ...]) -> dict[int, NvmlInfo]:
        """NVML's view of each device, found by the PCI bus id the driver gives it, with NVML started once."""
        lib = libcuda()
        return dict(zip(indices, read_nvml_all([lib.pci_bus_id(i) for i in indices]), strict=True))

    def prepare(self, indices: tuple[int, ...], static_sizes: tuple[int, ...],
                step_kinds: frozenset[str] | None = None) -> None:
        """Nothing to do once for all devices."""

    def loaded_static_smem(self, path: Path, kernel: str) -> int | None:
        """The driver's static shared memory for a kernel in a compiled file; None where not supported."""
        return None

    def device_count(self) -> int:
        """How many devices the driver shows; raises BackendUnavailable with the reason."""
        raise NotImplementedError

    def is_available(self) -> bool:
        """Whether a device can be measured through it; never raises."""
        try:
            return self.device_count() > 0
        except BisectSmemError:
            return False

    def unavailable_reason(self) -> str:
        """Why not, in one line ('' when available)."""
        try:
            count = self.device_count()
        except BisectSmemError as exc:
            return str(exc)
        return "" if count else "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)"


@runtime_checkable
class Backend(Protocol):
    """A way to reach devices: cupy, numba or sim. ``is_available`` never raises.

    ``session_type`` is the class of its sessions: the probe families it implements are what the backend
    can measure (families.supports), known before any device is opened; ``needs_isolation`` says
    whether its devices must be measured in worker processes (faults that end a process, hangs);
    ``nvml_from_host`` whether NVML's view of a device is the host's, read once by the supervisor
    (``host_nvml``) rather than by each device's session (a simulated device's is its own);
    ``primary_context`` whether a session runs in the device's primary CUDA context, which a worker
    may have the driver create before it opens the device.
    """

    name: str
    session_type: type[DeviceSession]
    needs_isolation: bool
    nvml_from_host: bool
    primary_context: bool

    def host_nvml(self, indices: tuple[int, ...]) -> dict[int, NvmlInfo]:
        """NVML's view of each of these devices, read in this process; empty where sessions answer it."""
        ...

    def prepare(self, indices: tuple[int, ...], static_sizes: tuple[int, ...],
                step_kinds: frozenset[str] | None = None) -> None:
        """Do, once in this process and beside the devices' workers, what each device's session would
        otherwise repeat (the CuPy backend compiles its probe module into the cache, once per
        architecture); a failure here is left for the sessions to meet. Never raises."""
        ...

    def preload(self) -> None:
        """Import, in a worker before its job arrives, the library its sessions open devices through (CuPy,
        numba), so that the import passes while the driver creates the context. Never raises: a failure
        is for ``open`` to report."""
        ...

    def is_available(self) -> bool:
        """Whether a device can be measured through it; never raises."""
        ...

    def unavailable_reason(self) -> str:
        """Why not, in one line ('' when available)."""
        ...

    def device_count(self) -> int:
        """How many devices it reaches; raises BackendUnavailable with the reason."""
        ...

    def open(self, index: int, static_sizes: tuple[int, ...],
             step_kinds: frozenset[str] | None = None) -> DeviceSession:
        """Compile and load the probe kernels on device ``index``: those the steps of ``step_kinds`` need
        (None: every kind); a backend may compile more."""
        ...

    def loaded_static_smem(self, path: Path, kernel: str) -> int | None:
        """Load a cubin or PTX file and ask the driver for the kernel's static shared memory (bytes);
        None where this backend cannot load compiled files."""
        ...
