"""The Numba backend: the same probes written as numba-cuda kernels, compiled by NVVM (not NVRTC) and
launched through numba's own driver layer: a second, independent path to every ceiling.

numba-cuda has no API for the shared-memory opt-in; ``set_kernel_max_dynamic_smem`` shows the recipe
(the driver attribute on the compiled kernel, through cuda-bindings). The kernels themselves are in
numba_kernels (imported here, inside functions, so the parent process never pays for numba); numba caches
them on disk (``cache=True``: per compute capability, in numba's cache directory or ``NUMBA_CACHE_DIR``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from bisect_smem.core.attributes import DeviceContext, NvmlInfo
from bisect_smem.core.errors import BackendUnavailable, UsageError
from bisect_smem.devices import attributes
from bisect_smem.devices.backends import REQUIRED_MODULES
from bisect_smem.devices.backends.base import (
    CudaErrorFunnel,
    DeviceIdentity,
    RealDevices,
    driver_failure,
    driver_value,
)
from bisect_smem.devices.backends.libcuda import libcuda
from bisect_smem.devices.kernel_abi import (
    RESIDENCY_COUNTER_WORDS,
    RESULT_WORDS,
    ResidencyWord,
    decode_probe_result,
)
from bisect_smem.devices.probes import (
    Launch,
    LaunchOutcome,
    Outcome,
    ProbeKernel,
    ResidencyOutcome,
    ResidencyProbe,
    classify_cuda_error,
    residency_from_peaks,
)

INSTALL_HINT = "install numba-cuda: pip install 'bisect-smem[numba]'"
W_PEAK, COUNTER_STRIDE = int(ResidencyWord.PEAK), len(ResidencyWord)
SUPPORTED_STEPS = ("default_ceiling", "attribute_accept_ceiling", "static_split", "block_registers", "residency")
_RUNTIME_NAMES = {  # numba device attribute -> cudaDeviceProp name used by the report
    "MAX_SHARED_MEMORY_PER_BLOCK": "sharedMemPerBlock", "MULTIPROCESSOR_COUNT": "multiProcessorCount",
    "MAX_THREADS_PER_MULTI_PROCESSOR": "maxThreadsPerMultiProcessor",
    "MAX_THREADS_PER_MULTIPROCESSOR": "maxThreadsPerMultiProcessor", "COMPUTE_CAPABILITY_MAJOR": "major",
    "COMPUTE_CAPABILITY_MINOR": "minor", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": "sharedMemPerMultiprocessor",
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": "sharedMemPerBlockOptin",
    "MAX_BLOCKS_PER_MULTIPROCESSOR": "maxBlocksPerMultiProcessor",
    "RESERVED_SHARED_MEMORY_PER_BLOCK": "reservedSharedMemPerBlock",
}


def apply_numpy_compat() -> None:
    """numba-cuda 0.30.4 registers an overload for ``np.row_stack``, which NumPy 2.5 removed; without the
    alias its first kernel compile fails with AttributeError. ``row_stack`` was always ``vstack``."""
    import numpy as np

    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


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


def import_cuda() -> Any:
    """numba.cuda, after the NumPy compatibility alias it needs (and without scipy: scipy_hidden)."""
    apply_numpy_compat()
    with scipy_hidden():
        from numba import cuda

    return cuda


def kernel_handle(dispatcher: Any) -> int:
    """The driver handle of a compiled numba kernel (a CUkernel under library loading).

    numba-cuda 0.30 has no public way to reach it; this is the one place that uses its internals, and
    tests/measure/test_numba.py fails loudly when they change.
    """
    compiled = next(iter(dispatcher.overloads.values()))
    handle = compiled._codelibrary.get_cufunc().handle
    return int(getattr(handle, "value", handle))


def set_kernel_max_dynamic_smem(dispatcher: Any, nbytes: int, device: int) -> str | None:
    """Raise a numba kernel's dynamic shared memory limit; the CUDA error name when the driver refuses.

    The handle is a CUkernel: cuFuncSetAttribute on it answers CUDA_ERROR_INVALID_HANDLE, while
    cuKernelSetAttribute works (a plain CUfunction, in older numba, takes cuFuncSetAttribute).
    """
    from cuda.bindings import driver as cu

    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    handle = kernel_handle(dispatcher)
    (err,) = cu.cuKernelSetAttribute(attr, nbytes, cu.CUkernel(handle), cu.CUdevice(device))
    if err == cu.CUresult.CUDA_ERROR_INVALID_HANDLE:
        (err,) = cu.cuFuncSetAttribute(cu.CUfunction(handle), attr, nbytes)
    return driver_failure(err)


def cuda_error_text(exc: BaseException) -> str:
    """The exception's text, led by the CUDA error name where it carries only a result code."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        from cuda.bindings import driver as cu

        try:
            return f"{cu.CUresult(code).name}: {exc}"
        except ValueError:
            pass
    return str(exc)


def compile_kernels(cuda: Any, cc: tuple[int, int], static_sizes: tuple[int, ...]) -> tuple[dict, Any]:
    """The probe kernels by (static bytes, opt-in), and the residency kernel, for the current device.

    Each is its own dispatcher over the same function: two kernels, so the default one is never opted
    in; the second of a pair (and every kernel in a later run) is loaded from numba's disk cache.
    """
    from bisect_smem.devices.backends import numba_kernels as nk  # deferred: it imports numba

    functions = nk.kernel_functions(cc, static_sizes)
    with scipy_hidden():
        kernels = {(s, o): cached_jit(cuda, nk.PROBE_SIGNATURE, functions[f"probe:{s}"])
                   for s in static_sizes for o in (False, True)}
        residency = cached_jit(cuda, nk.RESIDENCY_SIGNATURE, functions["residency"])
    return kernels, residency


def cached_jit(cuda: Any, signature: str, function: Any) -> Any:
    """``cuda.jit(signature, cache=True)``; without a writable cache directory, compiled every run."""
    from numba.cuda.dispatcher import CUDACache

    try:
        CUDACache(function)  # finds (and creates) the cache directory, as cache=True does
    except RuntimeError:  # numba found no directory it may write (in-tree, NUMBA_CACHE_DIR, user cache)
        return cuda.jit(signature)(function)
    return cuda.jit(signature, cache=True)(function)


class NumbaBackend(RealDevices):
    """Probe kernels compiled by NVVM through numba-cuda."""

    name = "numba"
    supported_steps = SUPPORTED_STEPS

    def device_count(self) -> int:
        count = libcuda().device_count()
        for module in REQUIRED_MODULES["numba"]:
            if importlib.util.find_spec(module.split(".")[0]) is None:
                raise BackendUnavailable(f"the numba backend needs {module}, which is not installed: {INSTALL_HINT}")
        return count

    def preload(self) -> None:
        try:
            import_cuda()
        except ImportError:
            pass  # the session says why

    def open(self, index: int, static_sizes: tuple[int, ...],
             step_kinds: frozenset[str] | None = None) -> NumbaSession:
        return NumbaSession(index, static_sizes)


class NumbaSession:
    """One device with every numba kernel compiled; default and opt-in probes are distinct kernels."""

    def __init__(self, index: int, static_sizes: tuple[int, ...]) -> None:
        self._cuda = cuda = import_cuda()
        from numba import config

        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0  # single-block probes are small on purpose
        self.index = index
        cuda.select_device(index)
        self._kernels, self._residency = compile_kernels(cuda, tuple(cuda.get_current_device().compute_capability),
                                                         static_sizes)
        import numpy as np

        self._np = np
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
        import numba

        return DeviceIdentity(self.index, name, tuple(dev.compute_capability), pci,
                              DeviceContext(numba_version=numba.__version__))

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

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        return self.residency_batch([ResidencyProbe(dynamic_bytes, threads, hold_ns, carveout_percent)])[0]

    def residency_batch(self, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
        # One after another on the default stream (each fills every SM alone), each counting into its own
        # row, read with one copy; an attribute set between two launches applies to the later one only.
        from cuda.bindings import driver as cu

        np, cuda = self._np, self._cuda
        with self.cuda_errors() as failed:
            counters = cuda.to_device(np.zeros((len(probes), RESIDENCY_COUNTER_WORDS), dtype=np.uint32))
            function = driver_value(cu.cuKernelGetFunction(cu.CUkernel(kernel_handle(self._residency))))
        if failed:
            return [ResidencyOutcome(failed.outcome, failed.detail) for _ in probes]
        pending: list[ResidencyOutcome | int | None] = []  # per probe: its outcome already, or the API's count
        for row, probe in enumerate(probes):
            if probe.carveout_percent is not None:
                pending.append(ResidencyOutcome(Outcome.OTHER, "the numba backend does not sweep carveouts"))
                continue
            n, threads = probe.dynamic_bytes, probe.threads
            refused, blocks = None, None
            with self.cuda_errors() as failed:
                refused = set_kernel_max_dynamic_smem(self._residency, n, self.index)
                if not refused:
                    blocks = None if function is None else driver_value(
                        cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(function, threads, n))
                    self._residency[self._residency_grid, threads, 0, n](counters[row], np.uint64(probe.hold_ns))
            if refused:
                pending.append(ResidencyOutcome(classify_cuda_error(refused), refused))
            else:
                pending.append(ResidencyOutcome(failed.outcome, failed.detail) if failed
                               else None if blocks is None else int(blocks))
        with self.cuda_errors() as failed:
            rows = counters.copy_to_host()[:, W_PEAK::COUNTER_STRIDE].tolist()  # the one synchronisation
        if failed:
            return [p if isinstance(p, ResidencyOutcome) else ResidencyOutcome(failed.outcome, failed.detail)
                    for p in pending]
        return [p if isinstance(p, ResidencyOutcome) else residency_from_peaks(rows[i], p)
                for i, p in enumerate(pending)]

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        return None  # numba exposes no occupancy query for a function's available dynamic memory

    def cluster_support(self) -> str | None:
        return "the numba backend does not launch clusters"

    def inject_illegal_access(self) -> None:
        raise UsageError("--inject-fault needs the cupy backend: the numba backend has no faulting probe")

    def close(self) -> None:
        self._kernels = {}

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
        pending: list[LaunchOutcome | int] = []  # per probe: its outcome already, or the seed to decode with
        for row, probe in enumerate(launches):
            n = probe.dynamic_bytes
            limit = self.set_max_dynamic(probe.kernel, n) if probe.raise_limit else None
            if limit is not None and not limit.ok:
                pending.append(limit)
                continue
            seed = next(self._seeds) & 0xFF
            kernel = self._kernels[(probe.kernel.static_bytes, probe.kernel.opt_in)]
            with self.cuda_errors() as failed:
                kernel[1, probe.threads, self._streams[row], n](np.uint32(n), np.uint32(seed), outs[row])
            pending.append(LaunchOutcome(failed.outcome, failed.detail) if failed else seed)
        with self.cuda_errors() as failed:
            rows = outs.copy_to_host().tolist()  # the one synchronisation: a fault in any launch surfaces here
        if failed:
            return [p if isinstance(p, LaunchOutcome) else LaunchOutcome(failed.outcome, failed.detail) for p in pending]
        # numba cannot take the shared-window address of its arrays, so the footprint stays unknown.
        return [p if isinstance(p, LaunchOutcome) else replace(
            decode_probe_result(rows[i], launches[i].kernel.static_bytes, launches[i].dynamic_bytes, p),
            dynamic_base_offset_bytes=None) for i, p in enumerate(pending)]
