"""The Numba backend: the same probes written as numba-cuda kernels, compiled by NVVM (not NVRTC) and
launched through numba's own driver layer: a second, independent path to every ceiling.

numba-cuda has no API for the shared-memory opt-in; driver.py's ``set_kernel_max_dynamic_smem`` shows
the recipe (the driver attribute on the compiled kernel, through cuda-bindings). The kernels themselves are in
kernels.py (imported here, inside functions, so the parent process never pays for numba); numba caches
them on disk (``cache=True``: per compute capability, in numba's cache directory or ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from bisect_smem.core.attributes import DeviceContext, NvmlInfo
from bisect_smem.core.errors import BackendUnavailable
from bisect_smem.devices import attributes
from bisect_smem.devices.backends.base import CudaErrorFunnel, DeviceIdentity, RealDevices
from bisect_smem.devices.backends.batches import launch_rows
from bisect_smem.devices.backends.families import Ceilings
from bisect_smem.devices.backends.libcuda import libcuda
from bisect_smem.devices.backends.numba import BACKEND
from bisect_smem.devices.backends.numba.driver import cuda_error_text, set_kernel_max_dynamic_smem
from bisect_smem.devices.backends.numba.residency import NumbaResidency
from bisect_smem.devices.kernel_abi import RESULT_WORDS
from bisect_smem.devices.probes import Launch, LaunchOutcome, Outcome, ProbeKernel, classify_cuda_error

INSTALL_HINT = "install numba-cuda: pip install numba-cuda (the numba extra)"
_RUNTIME_NAMES = {  # numba device attribute -> cudaDeviceProp name used by the report
    "MAX_SHARED_MEMORY_PER_BLOCK": "sharedMemPerBlock", "MULTIPROCESSOR_COUNT": "multiProcessorCount",
    "MAX_THREADS_PER_MULTI_PROCESSOR": "maxThreadsPerMultiProcessor",
    "MAX_THREADS_PER_MULTIPROCESSOR": "maxThreadsPerMultiProcessor", "COMPUTE_CAPABILITY_MAJOR": "major",
    "COMPUTE_CAPABILITY_MINOR": "minor", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": "sharedMemPerMultiprocessor",
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": "sharedMemPerBlockOptin",
    "MAX_BLOCKS_PER_MULTIPROCESSOR": "maxBlocksPerMultiProcessor",
    "RESERVED_SHARED_MEMORY_PER_BLOCK": "reservedSharedMemPerBlock",
}


def numpy_with_compat() -> Any:
    """NumPy, with the alias numba-cuda needs: numba-cuda 0.30.4 registers an overload for ``np.row_stack``,
    which NumPy 2.5 removed; without the alias its first kernel compile fails with AttributeError.
    ``row_stack`` was always ``vstack``."""
    # Deferred: NumPy comes with numba, an extra; only the process that opens a numba device loads it.
    import numpy as np

    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    return np


@contextlib.contextmanager
def scipy_hidden() -> Iterator[None]:
    """numba imports scipy.linalg (half a second on the H200 host), on its import and again where the first
    kernel loads its NumPy registries, only to offer np.dot and np.linalg inside kernels, which the probe
    kernels never use. So scipy is hidden meanwhile, and numba leaves those functions out, unless this
    process has imported scipy already."""
    if "scipy" in sys.modules:
        yield
        return
    sys.modules["scipy"] = None  # type: ignore[assignment] - None in sys.modules: the import fails
    try:
        yield
    finally:
        if "scipy" in sys.modules and sys.modules["scipy"] is None:
            del sys.modules["scipy"]


def import_numba() -> Any:
    """The numba package with numba.cuda loaded, after the NumPy alias it needs (and without scipy:
    scipy_hidden); ``numba.cuda``, ``numba.config`` and ``numba.cuda.dispatcher`` are reached from it."""
    numpy_with_compat()
    with scipy_hidden():
        # Deferred: numba loads only in the process that opens a numba device, and after the alias above.
        import numba.cuda.dispatcher

    return numba


def import_cuda() -> Any:
    """numba.cuda, loaded as import_numba loads it."""
    return import_numba().cuda


def compile_kernels(cuda: Any, cc: tuple[int, int], static_sizes: tuple[int, ...]) -> tuple[dict, Any]:
    """The probe kernels by (static bytes, opt-in), and the residency kernel, for the current device.

    Each is its own dispatcher over the same function: two kernels, so the default one is never opted
    in; the second of a pair (and every kernel in a later run) is loaded from numba's disk cache.
    """
    # Deferred: the kernels' module imports numba at its top, which import_numba has loaded by now.
    from bisect_smem.devices.backends.numba import kernels as nk

    functions = nk.kernel_functions(cc, static_sizes)
    with scipy_hidden():
        kernels = {(s, o): cached_jit(cuda, nk.PROBE_SIGNATURE, functions[f"probe:{s}"])
                   for s in static_sizes for o in (False, True)}
        residency = cached_jit(cuda, nk.RESIDENCY_SIGNATURE, functions["residency"])
    return kernels, residency


def cached_jit(cuda: Any, signature: str, function: Any) -> Any:
    """``cuda.jit(signature, cache=True)``; without a writable cache directory, compiled every run."""
    try:
        cuda.dispatcher.CUDACache(function)  # finds (and creates) the cache directory, as cache=True does
    except RuntimeError:  # numba found no directory it may write (in-tree, NUMBA_CACHE_DIR, user cache)
        return cuda.jit(signature)(function)
    return cuda.jit(signature, cache=True)(function)


class NumbaSession(NumbaResidency, Ceilings):
    """One device with every numba kernel compiled; default and opt-in probes are distinct kernels. It
    measures the ceilings (here) and residency (numba_residency); numba-cuda launches no clusters and sets
    no carveout, and the validation kernels and the faulting probe are CuPy's only."""

    def __init__(self, index: int, static_sizes: tuple[int, ...]) -> None:
        numba = import_numba()
        self._cuda = cuda = numba.cuda
        self._numba_version = numba.__version__
        numba.config.CUDA_LOW_OCCUPANCY_WARNINGS = 0  # single-block probes are small on purpose
        self.index = index
        cuda.select_device(index)
        self._kernels, self._residency = compile_kernels(cuda, tuple(cuda.get_current_device().compute_capability),
                                                         static_sizes)
        self._np = numpy_with_compat()
        self._streams: list[Any] = []  # for launch_batch, created as needed
        self._seeds = itertools.count(1)
        self._residency_grid = libcuda().residency_grid(index)
        # numba's own driver layer raises CudaAPIError; launches through cuda.core raise its CUDAError,
        # which is only told apart from a bug by the CUDA error name in its text.
        self.cuda_errors = CudaErrorFunnel((Exception,), describe=cuda_error_text,
                                           is_cuda=lambda exc: isinstance(exc, cuda.cudadrv.driver.CudaAPIError)
                                           or "CUDA_ERROR_" in str(exc))

    def identity(self) -> DeviceIdentity:
        dev = self._cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        pci = f"{dev.PCI_DOMAIN_ID:04x}:{dev.PCI_BUS_ID:02x}:{dev.PCI_DEVICE_ID:02x}.0"
        return DeviceIdentity(self.index, name, tuple(dev.compute_capability), pci,
                              DeviceContext(numba_version=self._numba_version))

    def driver_attributes(self) -> dict[int, int | None]:
        return libcuda().attributes(attributes.DRIVER_ATTRIBUTE_IDS, self.index)

    def runtime_attributes(self) -> dict[str, int | None]:
        dev = self._cuda.get_current_device()
        values: dict[str, int | None] = {}
        for numba_name, prop in _RUNTIME_NAMES.items():
            if values.get(prop) is not None:
                continue
            try:
                values[prop] = int(getattr(dev, numba_name))
            except Exception:  # noqa: BLE001 - an attribute this numba or driver does not know is unknown
                values[prop] = None
        return values

    def nvml_info(self) -> NvmlInfo:
        return attributes.read_nvml(self.identity().pci_bus_id)

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        if not kernel.opt_in:
            raise ValueError("the default-ceiling kernel must stay fresh: its attribute is never raised")
        failed = set_kernel_max_dynamic_smem(self._kernels[(kernel.static_bytes, True)], nbytes, self.index)
        return LaunchOutcome(classify_cuda_error(failed), failed) if failed else LaunchOutcome(Outcome.OK)

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        return self.launch_batch([Launch(kernel, dynamic_bytes, threads)])[0]

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        return None  # numba exposes no occupancy query for a function's available dynamic memory

    def launch_batch(self, launches: Sequence[Launch]) -> list[LaunchOutcome]:
        # As the CuPy backend does: each probe into its own row, on a stream of its own (blocking, so
        # ordered after the zero fill and before the read on the default stream), read with one copy.
        np, cuda = self._np, self._cuda
        with self.cuda_errors() as failed:
            outs = cuda.to_device(np.zeros((len(launches), RESULT_WORDS), dtype=np.uint32))
            while len(self._streams) < len(launches):
                self._streams.append(cuda.stream())
        if failed:
            return [LaunchOutcome(failed.outcome, failed.detail) for _ in launches]

        def launch_one(row: int, probe: Launch, seed: int) -> None:
            n = probe.dynamic_bytes
            kernel = self._kernels[(probe.kernel.static_bytes, probe.kernel.opt_in)]
            kernel[1, probe.threads, self._streams[row], n](np.uint32(n), np.uint32(seed), outs[row])

        outcomes = launch_rows(self, launches, self._seeds, self.cuda_errors, launch_one,
                               lambda: outs.copy_to_host().tolist())
        # numba cannot take the shared-window address of its arrays, so the footprint stays unknown.
        return [replace(o, dynamic_base_offset_bytes=None) for o in outcomes]

    def close(self) -> None:
        self._kernels = {}


class NumbaBackend(RealDevices):
    """Probe kernels compiled by NVVM through numba-cuda."""

    name, session_type = "numba", NumbaSession

    def device_count(self) -> int:
        count = libcuda().device_count()
        missing = BACKEND.missing_module()
        if missing is not None:
            raise BackendUnavailable(f"the numba backend needs {missing}, which is not installed: {INSTALL_HINT}")
        return count

    def preload(self) -> None:
        try:
            import_cuda()
        except ImportError:
            pass  # the session says why

    def open(self, index: int, static_sizes: tuple[int, ...],
             step_kinds: frozenset[str] | None = None) -> NumbaSession:
        return NumbaSession(index, static_sizes)
