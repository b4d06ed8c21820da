"""The CuPy backend: NVRTC through RawModule (all probe variants in one compile), launches through CuPy.

The only module that imports cupy, and only inside functions: the parent process never pays for it.
"""

from __future__ import annotations

import importlib.util
import itertools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bisect_smem.core.attributes import DeviceContext, NvmlInfo
from bisect_smem.core.errors import BackendUnavailable, KernelCompileError
from bisect_smem.core.hardware import NONPORTABLE_CLUSTER_SIZE, DriverAttribute, has_clusters
from bisect_smem.core.profiles import cc_text
from bisect_smem.devices import attributes
from bisect_smem.devices.backends import REQUIRED_MODULES, driver_calls
from bisect_smem.devices.backends.base import CudaErrorFunnel, DeviceAddress, DeviceIdentity, RealDevices
from bisect_smem.devices.backends.cupy_wheel import INSTALL_HINT, check_driver_for_cupy, cupy_cuda_major
from bisect_smem.devices.backends.driver_calls import DriverError
from bisect_smem.devices.backends.libcuda import libcuda
from bisect_smem.devices.kernel_abi import (
    CLUSTER_RESULT_WORDS,
    ILLEGAL_ACCESS_NAME,
    MARCH_FAULT_NAME,
    NVRTC_OPTIONS,
    PROBE_HOLE_NAME,
    RESIDENCY_CARVEOUT,
    RESIDENCY_COUNTER_WORDS,
    RESIDENCY_STAIRCASE,
    RESULT_WORDS,
    ClusterWord,
    ResidencyWord,
    cluster_dsm_name,
    cluster_residency_name,
    decode_probe_result,
    module_name_expressions,
    module_source,
    probe_name,
    residency_name,
)
from bisect_smem.devices.nvrtc import CompileFailed, NvrtcUnavailable, cached_cubin
from bisect_smem.devices.probes import (
    ClusterOutcome,
    ClusterResidencyOutcome,
    Launch,
    LaunchOutcome,
    LeftoverOutcome,
    MarchFault,
    MarchOutcome,
    Outcome,
    ProbeKernel,
    ResidencyOutcome,
    ResidencyProbe,
    classify_cuda_error,
    residency_from_peaks,
)
from bisect_smem.devices.validation_abi import (
    LEFTOVER_READ_NAME,
    LEFTOVER_SLOT_WORDS,
    LEFTOVER_WRITE_NAME,
    MARCH_NAME,
    MARCH_SLOT_WORDS,
    decode_leftover_slots,
    decode_march_slot,
)


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


class CupyBackend(RealDevices):
    """Probe kernels compiled by NVRTC and launched by CuPy."""

    name, preloaded = "cupy", ("cupy",)

    def device_count(self) -> int:
        lib = libcuda()
        count = lib.device_count()  # no driver is the more basic answer, so it is checked first
        if importlib.util.find_spec(REQUIRED_MODULES["cupy"][0]) is None:
            raise BackendUnavailable(f"the cupy backend needs CuPy, which is not installed: {INSTALL_HINT}")
        check_driver_for_cupy(lib.driver_version(), cupy_cuda_major())
        return count

    def loaded_static_smem(self, path: Path, kernel: str) -> int | None:
        """Load a cubin or PTX file on device 0 and ask the driver for the kernel's SHARED_SIZE_BYTES."""
        import cupy

        module = cupy.RawModule(path=str(path))
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


class CupySession:
    """One device: every probe kernel compiled in a single NVRTC call and loaded once."""

    def __init__(self, index: int, static_sizes: tuple[int, ...], step_kinds: frozenset[str] | None = None) -> None:
        # The driver starts and the context is created while this thread imports CuPy and reads the
        # kernel source: in a fresh process each takes a few hundred milliseconds.
        context = ContextStarter(index)
        try:
            import cupy
        except ImportError as exc:
            raise BackendUnavailable(f"CuPy could not be imported ({exc}): {INSTALL_HINT}") from exc
        self._cupy = cupy
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

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        return self.residency_batch([ResidencyProbe(dynamic_bytes, threads, hold_ns, carveout_percent)])[0]

    def inject_illegal_access(self) -> None:
        """Test only: a real out-of-window shared-memory store. The context is poisoned afterwards."""
        self._functions[ILLEGAL_ACCESS_NAME]((1,), (32,), (self._cupy.uint32(0x00F00000),))

    # Thread block clusters: CuPy has no cluster launch, so these go through cuda-bindings (driver_calls).

    def cluster_support(self) -> str | None:
        cc = self.identity().compute_capability
        if not has_clusters(cc):
            return f"thread block clusters need cc 9.0+ (this device: {cc_text(cc)})"
        if not libcuda().attribute(DriverAttribute.CLUSTER_LAUNCH, self.index):
            return "the driver reports no cluster launch (attribute 120 is 0)"
        if not driver_calls.bindings_installed():
            return "cluster launches need cuda-bindings: pip install 'bisect-smem[cuda13]' (or [cuda12])"
        return None

    def _cluster_function(self, name: str, nonportable: bool, dynamic_bytes: int) -> Any:
        fn = self._functions[name]
        fn.max_dynamic_shared_size_bytes = dynamic_bytes
        return driver_calls.function_handle(fn.kernel.ptr, nonportable)

    def cluster_launches(self, dynamic_bytes: int, sizes: tuple[int, ...], nonportable: bool,
                         threads: int) -> list[ClusterOutcome]:
        cupy = self._cupy
        outs = cupy.zeros((len(sizes), CLUSTER_RESULT_WORDS), dtype=cupy.uint32)
        failure = None
        launched = 0
        with self.cuda_errors() as failed:
            handle = self._cluster_function(cluster_dsm_name(nonportable), nonportable, dynamic_bytes)
            for row, size in enumerate(sizes):
                seed = next(self._seeds) & 0xFF
                # A cluster that cannot launch is refused here, synchronously; the rest run back to back.
                refused = driver_calls.launch(handle, driver_calls.launch_config(size, threads, dynamic_bytes, size),
                                              (dynamic_bytes, seed, outs[row].data.ptr), ("uint", "uint", "pointer"))
                if refused:
                    failure = ClusterOutcome(classify_cuda_error(refused), refused)
                    break
                launched += 1
            rows = outs.get().tolist()
        if failed:
            return [ClusterOutcome(failed.outcome, failed.detail)]
        w = ClusterWord
        results = [ClusterOutcome(Outcome.OK, "", row[w.BLOCKS_RAN], row[w.BYTES_CHECKED], row[w.BYTES_WRONG],
                                  row[w.CLUSTER_SIZE_SEEN]) for row in rows[:launched]]
        return results + ([failure] if failure else [])

    def cluster_residency(self, dynamic_bytes: int, cluster_size: int, nonportable: bool, threads: int,
                          hold_ns: int, clusters: int) -> ClusterResidencyOutcome:
        cupy = self._cupy
        with self.cuda_errors() as failed:
            handle = self._cluster_function(cluster_residency_name(nonportable), nonportable, dynamic_bytes)
            config = driver_calls.launch_config(clusters * cluster_size, threads, dynamic_bytes, cluster_size)
            api_count = driver_calls.max_active_clusters(handle, config)
            counters = cupy.zeros(len(ResidencyWord), dtype=cupy.uint32)
            refused = driver_calls.launch(handle, config, (counters.data.ptr, hold_ns), ("pointer", "ulonglong"))
            if refused:
                return ClusterResidencyOutcome(classify_cuda_error(refused), refused, None, api_count)
            peak = int(counters.get()[ResidencyWord.PEAK])
        if failed:
            return ClusterResidencyOutcome(failed.outcome, failed.detail)
        return ClusterResidencyOutcome(Outcome.OK, "", peak, api_count)

    def cluster_api_max_size(self, dynamic_bytes: int, threads: int) -> int | None:
        with self.cuda_errors() as failed:
            handle = self._cluster_function(cluster_dsm_name(True), True, dynamic_bytes)
        if failed:
            return None
        return driver_calls.max_potential_cluster_size(
            handle, driver_calls.launch_config(NONPORTABLE_CLUSTER_SIZE, threads, dynamic_bytes, None))

    def carveout_sweep(self, dynamic_bytes: int, threads: int, hold_ns: int,
                       percents: tuple[int, ...]) -> list[ResidencyOutcome]:
        return self.residency_batch([ResidencyProbe(dynamic_bytes, threads, hold_ns, p) for p in percents])

    def close(self) -> None:
        self._module = None
        self._functions = {}

    def launch_batch(self, launches: Sequence[Launch]) -> list[LaunchOutcome]:
        # Each launch writes its own row on its own stream: a probe is one block on one SM, so they run
        # side by side, and one copy reads them all. The streams are blocking ones, ordered after the
        # zero fill and before the read on the legacy default stream. A size over the limit is refused
        # when it is enqueued, so its error stays with its own probe.
        cupy = self._cupy
        outs = cupy.zeros((len(launches), RESULT_WORDS), dtype=cupy.uint32)
        while len(self._streams) < len(launches):
            self._streams.append(cupy.cuda.Stream(non_blocking=False))
        pending: list[LaunchOutcome | int] = []  # per probe: its outcome already, or the seed to decode with
        for row, probe in enumerate(launches):
            n = probe.dynamic_bytes
            limit = self.set_max_dynamic(probe.kernel, n) if probe.raise_limit else None
            if limit is not None and not limit.ok:
                pending.append(limit)
                continue
            seed = next(self._seeds) & 0xFF
            with self.cuda_errors() as failed, self._streams[row]:
                args = self._probe_args(probe.kernel, n, seed, outs[row])
                self._function(probe.kernel)((1,), (probe.threads,), args, shared_mem=n)
            pending.append(LaunchOutcome(failed.outcome, failed.detail) if failed else seed)
        return self._decoded(launches, pending, outs)

    def _decoded(self, launches: Sequence[Launch], pending: list[LaunchOutcome | int], outs: Any) -> list[LaunchOutcome]:
        """Read every row after the one synchronisation (a fault in any launch surfaces there) and decode
        each launched probe's row with its seed."""
        with self.cuda_errors() as failed:
            rows = outs.get().tolist()
        if failed:
            return [p if isinstance(p, LaunchOutcome) else LaunchOutcome(failed.outcome, failed.detail)
                    for p in pending]
        return [p if isinstance(p, LaunchOutcome) else
                decode_probe_result(rows[i], launches[i].kernel.static_bytes, launches[i].dynamic_bytes, p)
                for i, p in enumerate(pending)]

    def residency_batch(self, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
        # One after another on the legacy default stream: each fills every SM alone. An attribute or a
        # carveout preference set between two launches applies to the later one only.
        cupy = self._cupy
        counters = cupy.zeros((len(probes), RESIDENCY_COUNTER_WORDS), dtype=cupy.uint32)
        pending: list[ResidencyOutcome | int] = []  # per probe: its outcome already, or the API's count
        for row, probe in enumerate(probes):
            variant = RESIDENCY_STAIRCASE if probe.carveout_percent is None else RESIDENCY_CARVEOUT
            fn = self._functions[residency_name(variant)]
            n, threads = probe.dynamic_bytes, probe.threads
            with self.cuda_errors() as failed:
                fn.max_dynamic_shared_size_bytes = n
                if probe.carveout_percent is not None:
                    fn.preferred_shared_memory_carveout = probe.carveout_percent
                api = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.kernel.ptr, threads, n)
                fn((self._residency_grid,), (threads,), (counters[row], cupy.uint64(probe.hold_ns)), shared_mem=n)
            pending.append(ResidencyOutcome(failed.outcome, failed.detail) if failed else int(api))
        with self.cuda_errors() as failed:
            # Copied whole and sliced on the host: a strided device view would need CuPy to compile a copy
            # kernel, which a cold node pays for.
            peaks = counters.get()[:, ResidencyWord.PEAK::len(ResidencyWord)].tolist()
        if failed:
            return [p if isinstance(p, ResidencyOutcome) else ResidencyOutcome(failed.outcome, failed.detail)
                    for p in pending]
        return [p if isinstance(p, ResidencyOutcome) else residency_from_peaks(peaks[i], p)
                for i, p in enumerate(pending)]

    # Validation (experiments/validation.py): one block per SM at the opt-in ceiling, result slots per block.

    def _per_block(self, name: str, dynamic_bytes: int, threads: int, blocks: int, slot_words: int,
                   args: tuple, after: tuple = ()) -> tuple[list[int] | None, Any]:
        """Launch ``name`` with one result slot per block (between ``args`` and ``after``) and read every
        slot back (one synchronisation)."""
        cupy = self._cupy
        fn = self._functions[name]
        slots = cupy.zeros(blocks * slot_words, dtype=cupy.uint32)
        with self.cuda_errors() as failed:
            fn.max_dynamic_shared_size_bytes = dynamic_bytes
            fn((blocks,), (threads,), (cupy.uint32(dynamic_bytes), *args, slots, *after), shared_mem=dynamic_bytes)
            words = slots.get().tolist()
        return (None, failed) if failed else (words, failed)

    def march(self, dynamic_bytes: int, threads: int, blocks: int, seed: int,
              fault: MarchFault | None = None) -> MarchOutcome:
        u32 = self._cupy.uint32
        planted = () if fault is None else (u32(fault.sm_id), u32(fault.word), u32(fault.mask))
        words, failed = self._per_block(MARCH_NAME if fault is None else MARCH_FAULT_NAME, dynamic_bytes, threads,
                                        blocks, MARCH_SLOT_WORDS, (u32(seed),), planted)
        if words is None:
            return MarchOutcome(failed.outcome, failed.detail)
        slots = (decode_march_slot(words[b:b + MARCH_SLOT_WORDS]) for b in range(0, len(words), MARCH_SLOT_WORDS))
        return MarchOutcome(Outcome.OK, "", tuple(s for s in slots if s is not None))

    def leftover_write(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        words, failed = self._per_block(LEFTOVER_WRITE_NAME, dynamic_bytes, threads, blocks, LEFTOVER_SLOT_WORDS,
                                        (self._cupy.uint64(nonce),))
        return LeftoverOutcome(failed.outcome, failed.detail) if words is None else decode_leftover_slots(words)

    def leftover_read(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        words, failed = self._per_block(LEFTOVER_READ_NAME, dynamic_bytes, threads, blocks, LEFTOVER_SLOT_WORDS,
                                        (self._cupy.uint64(nonce),))
        return LeftoverOutcome(failed.outcome, failed.detail) if words is None else decode_leftover_slots(words)

    def address(self) -> DeviceAddress:
        return DeviceAddress("cupy", self.index)
