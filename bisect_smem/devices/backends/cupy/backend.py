"""The CuPy backend: NVRTC through RawModule (all probe variants in one compile), launches through CuPy.

The only module that imports cupy, and only in ``import_cupy``: the parent process never pays for it. The
session's probe families beyond the ceilings are mixins in residency.py, clusters.py and integrity.py,
which reach CuPy through the module this one hands them (``_cupy``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bisect_smem.core.attributes import DeviceContext, NvmlInfo
from bisect_smem.core.errors import BackendUnavailable, KernelCompileError
from bisect_smem.core.hardware import DriverAttribute
from bisect_smem.devices import attributes
from bisect_smem.devices.backends import driver_calls
from bisect_smem.devices.backends.base import CudaErrorFunnel, DeviceIdentity, RealDevices
from bisect_smem.devices.backends.batches import launch_rows
from bisect_smem.devices.backends.cupy import BACKEND
from bisect_smem.devices.backends.cupy.clusters import CupyClusters
from bisect_smem.devices.backends.cupy.integrity import CupyIntegrity
from bisect_smem.devices.backends.cupy.residency import CupyResidency
from bisect_smem.devices.backends.cupy.wheel import INSTALL_HINT, check_driver_for_cupy, cupy_cuda_major
from bisect_smem.devices.backends.driver_calls import DriverError
from bisect_smem.devices.backends.families import Ceilings, FaultSeam
from bisect_smem.devices.backends.libcuda import libcuda
from bisect_smem.devices.kernel_abi import (
    ILLEGAL_ACCESS_NAME,
    NVRTC_OPTIONS,
    PROBE_HOLE_NAME,
    RESULT_WORDS,
    module_name_expressions,
    module_source,
    probe_name,
)
from bisect_smem.devices.nvrtc import CompileFailed, NvrtcUnavailable, cached_cubin
from bisect_smem.devices.probes import Launch, LaunchOutcome, Outcome, ProbeKernel


class ContextStarter:
    """Initialise the driver and create device ``index``'s primary context on a thread of its own.

    ``wait`` returns once it is done, whether it worked or not: a failure is for the runtime's own
    call to report, as it would without this head start.
    """

    def __init__(self, index: int) -> None:
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, args=(index,), daemon=True)
        self._thread.start()

    def _start(self, index: int) -> None:
        try:
            libcuda().retain_primary_context(index)
        except BackendUnavailable as exc:
            self.error = exc

    def wait(self) -> None:
        """Until the context exists (or its creation failed)."""
        self._thread.join()


def import_cupy() -> Any:
    """CuPy; BackendUnavailable, with the install hint, where it cannot be imported."""
    try:
        # Deferred: CuPy loads only in the process that opens a CuPy device, a second or more of its start.
        import cupy
    except ImportError as exc:
        raise BackendUnavailable(f"CuPy could not be imported ({exc}): {INSTALL_HINT}") from exc
    return cupy


class CupySession(CupyResidency, CupyClusters, CupyIntegrity, Ceilings, FaultSeam):
    """One device: every probe kernel compiled in a single NVRTC call and loaded once. Its ceilings and
    fault seam are here; each other probe family is a module of its own (residency, clusters,
    integrity), reaching CuPy through this session."""

    def __init__(self, index: int, static_sizes: tuple[int, ...], step_kinds: frozenset[str] | None = None) -> None:
        # The driver starts and the context is created while this thread imports CuPy and reads the
        # kernel source: in a fresh process each takes a few hundred milliseconds.
        context = ContextStarter(index)
        self._cupy = cupy = import_cupy()
        self.index = index
        names = module_name_expressions(static_sizes, step_kinds)
        source = module_source()
        context.wait()
        self._device = cupy.cuda.Device(index)
        self._device.use()
        try:
            self._module, self._functions = self._load_module(source, names)
        except (cupy.cuda.compiler.CompileException, CompileFailed) as exc:
            raise KernelCompileError(f"probe kernels failed to compile for device {index}", str(exc)) from exc
        except cupy.cuda.driver.CUDADriverError as exc:
            raise KernelCompileError(f"probe kernels failed to load on device {index}: {exc}", str(exc)) from exc
        self._seeds = itertools.count(1)
        self._residency_grid = libcuda().residency_grid(index)
        self._streams: list[Any] = []  # for launch_batch, created as needed
        self.cuda_errors = CudaErrorFunnel((DriverError, cupy.cuda.driver.CUDADriverError,
                                            cupy.cuda.runtime.CUDARuntimeError))

    def _load_module(self, source: str, names: list[str]) -> tuple[Any, dict[str, Any]]:
        """The probe module from bisect_smem's compiled-module cache (NVRTC once per source, driver and
        architecture), else compiled by CuPy, which recompiles on every run when given name expressions."""
        cupy = self._cupy
        arch = f"sm_{self._device.compute_capability}"  # CuPy spells cc 9.0 as "90"
        try:
            path, lowered = cached_cubin(source, names, NVRTC_OPTIONS, arch)
        except (NvrtcUnavailable, OSError):
            module = cupy.RawModule(code=source, options=NVRTC_OPTIONS, name_expressions=names)
            return module, {name: module.get_function(name) for name in names}
        module = cupy.RawModule(path=str(path))
        return module, {name: module.get_function(lowered[name]) for name in names}

    def _function(self, kernel: ProbeKernel) -> Any:
        name = PROBE_HOLE_NAME if kernel.hole_bytes is not None else probe_name(kernel.static_bytes, kernel.opt_in)
        return self._functions[name]

    def _probe_args(self, kernel: ProbeKernel, dynamic_bytes: int, seed: int, out: Any) -> tuple:
        args = (self._cupy.uint32(dynamic_bytes), self._cupy.uint32(seed), out)
        return args if kernel.hole_bytes is None else (*args, self._cupy.uint32(kernel.hole_bytes))

    def identity(self) -> DeviceIdentity:
        runtime = self._cupy.cuda.runtime
        props = runtime.getDeviceProperties(self.index)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        return DeviceIdentity(index=self.index, name=name,
                              compute_capability=(int(props["major"]), int(props["minor"])),
                              pci_bus_id=runtime.deviceGetPCIBusId(self.index),
                              extra=DeviceContext(cupy_version=self._cupy.__version__,
                                                  cuda_runtime_version=runtime.runtimeGetVersion(),
                                                  cuda_driver_version=runtime.driverGetVersion()))

    def driver_attributes(self) -> dict[int, int | None]:
        return libcuda().attributes(attributes.DRIVER_ATTRIBUTE_IDS, self.index)

    def runtime_attributes(self) -> dict[str, int | None]:
        props = self._cupy.cuda.runtime.getDeviceProperties(self.index)
        return {prop: props.get(prop) for _, _, prop in attributes.DEVICE_ATTRIBUTES}

    def nvml_info(self) -> NvmlInfo:
        return attributes.read_nvml(self._cupy.cuda.runtime.deviceGetPCIBusId(self.index))

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        if not kernel.opt_in:
            raise ValueError("the default-ceiling kernel must stay fresh: its attribute is never raised")
        with self.cuda_errors() as failed:
            self._function(kernel).max_dynamic_shared_size_bytes = nbytes
        return LaunchOutcome(failed.outcome, failed.detail) if failed else LaunchOutcome(Outcome.OK)

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        return self.launch_batch([Launch(kernel, dynamic_bytes, threads)])[0]

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        return driver_calls.available_dynamic_smem(self._function(kernel).kernel.ptr, threads)

    def launch_batch(self, launches: Sequence[Launch]) -> list[LaunchOutcome]:
        # Each launch writes its own row on its own stream: a probe is one block on one SM, so they run
        # side by side, and one copy reads them all. The streams are blocking ones, ordered after the
        # zero fill and before the read on the legacy default stream.
        cupy = self._cupy
        outs = cupy.zeros((len(launches), RESULT_WORDS), dtype=cupy.uint32)
        while len(self._streams) < len(launches):
            self._streams.append(cupy.cuda.Stream(non_blocking=False))

        def launch_one(row: int, probe: Launch, seed: int) -> None:
            with self._streams[row]:
                args = self._probe_args(probe.kernel, probe.dynamic_bytes, seed, outs[row])
                self._function(probe.kernel)((1,), (probe.threads,), args, shared_mem=probe.dynamic_bytes)

        return launch_rows(self, launches, self._seeds, self.cuda_errors, launch_one, lambda: outs.get().tolist())

    def inject_illegal_access(self) -> None:
        """Test only: a real out-of-window shared-memory store. The context is poisoned afterwards."""
        self._functions[ILLEGAL_ACCESS_NAME]((1,), (32,), (self._cupy.uint32(0x00F00000),))

    def close(self) -> None:
        self._module = None
        self._functions = {}


class CupyBackend(RealDevices):
    """Probe kernels compiled by NVRTC and launched by CuPy."""

    name, preloaded, session_type = "cupy", ("cupy",), CupySession

    def device_count(self) -> int:
        lib = libcuda()
        count = lib.device_count()  # no driver is the more basic answer, so it is checked first
        if BACKEND.missing_module() is not None:
            raise BackendUnavailable(f"the cupy backend needs CuPy, which is not installed: {INSTALL_HINT}")
        check_driver_for_cupy(lib.driver_version(), cupy_cuda_major())
        return count

    def loaded_static_smem(self, path: Path, kernel: str) -> int | None:
        """Load a cubin or PTX file on device 0 and ask the driver for the kernel's SHARED_SIZE_BYTES."""
        module = import_cupy().RawModule(path=str(path))
        return int(module.get_function(kernel).shared_size_bytes)

    def open(self, index: int, static_sizes: tuple[int, ...],
             step_kinds: frozenset[str] | None = None) -> CupySession:
        return CupySession(index, static_sizes, step_kinds)

    def prepare(self, indices: tuple[int, ...], static_sizes: tuple[int, ...],
                step_kinds: frozenset[str] | None = None) -> None:
        """The probe module in the compiled-module cache for each architecture among the devices, compiled
        here once while their workers import CuPy; a worker that gets there first waits for this compile."""
        names = module_name_expressions(static_sizes, step_kinds)
        try:
            lib = libcuda()
            archs = {f"sm_{lib.attribute(DriverAttribute.COMPUTE_CAPABILITY_MAJOR, i)}"
                     f"{lib.attribute(DriverAttribute.COMPUTE_CAPABILITY_MINOR, i)}" for i in indices}
            for arch in sorted(archs):
                cached_cubin(module_source(), names, NVRTC_OPTIONS, arch)
        except Exception:  # noqa: BLE001 - a head start only: each session compiles what is missing and reports its own failure
            pass
