"""Run the measurements: one worker process per device (spawn), all devices in parallel.

A fault that poisons a CUDA context ends only its worker; the parent alone collects results.
The simulated backend may run inline, in this process, since it cannot poison anything.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bisect_smem.attributes import driver_view, runtime_view
from bisect_smem.backends import get_backend
from bisect_smem.errors import BackendUnavailable, BisectSmemError, UsageError
from bisect_smem.measure import DeviceMeasurement, MeasureConfig, ProbeFault
from bisect_smem.model import DeviceReport, to_jsonable
from bisect_smem.profiles import profile_for_cc
from bisect_smem.verdicts import build_verdicts

ProgressSink = Callable[[int, str], None]
POLL_S = 0.1


@dataclass(frozen=True)
class RunRequest:
    """What to run: a backend by name, which devices (None: all visible), how, and for how long at most."""

    backend: str
    sim_specs: tuple[Any, ...] = ()
    devices: tuple[int, ...] | None = None
    config: MeasureConfig = MeasureConfig()
    isolate: bool = True
    device_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if self.device_timeout_s <= 0:
            raise ValueError(f"device timeout must be > 0 s (got {self.device_timeout_s})")


def measure_one(backend_name: str, sim_specs: tuple[Any, ...], index: int, config: MeasureConfig,
                progress: Callable[[str], None] | None = None) -> DeviceReport:
    """Open device ``index`` and run every experiment on it. Errors become the report's ``error``."""
    start = time.perf_counter()
    backend = get_backend(backend_name, sim_specs)
    try:
        session = backend.open(index, config.static_sizes)
    except BisectSmemError as exc:
        return DeviceReport(index, None, None, backend_name, error=str(exc),
                            elapsed_s=round(time.perf_counter() - start, 3))
    try:
        ident = session.identity()
        reported = {"driver": driver_view(session.driver_attributes()),
                    "runtime": runtime_view(session.runtime_attributes())}
        nvml = session.nvml_info()
        profile = profile_for_cc(ident.compute_capability)
        measured, errors = DeviceMeasurement(session, config, progress, reported["driver"], profile).run()
        cc = f"{ident.compute_capability[0]}.{ident.compute_capability[1]}"
        verdicts = build_verdicts(reported, measured, profile, cc)
        context = {"pci_bus_id": ident.pci_bus_id, **{f"nvml_{k}": v for k, v in nvml.items()}, **ident.extra}
        return DeviceReport(
            index=index, name=ident.name,
            compute_capability=f"{ident.compute_capability[0]}.{ident.compute_capability[1]}",
            backend=backend_name, context=context, reported=reported, measured=measured,
            verdicts=tuple(verdicts), error="; ".join(errors) or None,
            elapsed_s=round(time.perf_counter() - start, 3))
    except ProbeFault as fault:
        return DeviceReport(index, None, None, backend_name, error=str(fault),
                            elapsed_s=round(time.perf_counter() - start, 3))
    finally:
        session.close()


def resolve_devices(request: RunRequest) -> tuple[int, ...]:
    """The device indices to measure; raises BackendUnavailable or UsageError with a one-line reason."""
    backend = get_backend(request.backend, request.sim_specs)
    if not backend.is_available():
        raise BackendUnavailable(backend.unavailable_reason())
    count = backend.device_count()
    if request.devices is None:
        return tuple(range(count))
    for index in request.devices:
        if not 0 <= index < count:
            raise UsageError(f"device {index} does not exist; valid: 0..{count - 1}")
    return tuple(dict.fromkeys(request.devices))


def run(request: RunRequest, progress: ProgressSink | None = None) -> tuple[DeviceReport, ...]:
    """Measure every requested device and return their reports in index order."""
    indices = resolve_devices(request)
    sink = progress or (lambda _i, _t: None)
    if not request.isolate:
        return tuple(measure_one(request.backend, request.sim_specs, i, request.config,
                                 lambda text, i=i: sink(i, text)) for i in indices)
    return _run_isolated(request, indices, sink)


def _worker(out: Any, backend_name: str, sim_specs: tuple[Any, ...], index: int, config: MeasureConfig) -> None:
    """Body of a worker process: measure one device, stream progress, send the report as a dict."""
    last = 0.0

    def progress(text: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= 0.05:  # a few updates a second is enough for a person
            last = now
            out.put(("progress", index, text))

    report = measure_one(backend_name, sim_specs, index, config, progress)
    out.put(("result", index, to_jsonable(report)))


def _run_isolated(request: RunRequest, indices: tuple[int, ...], sink: ProgressSink) -> tuple[DeviceReport, ...]:
    ctx = multiprocessing.get_context("spawn")  # CUDA and fork do not mix
    out = ctx.Queue()
    workers = {i: ctx.Process(target=_worker, args=(out, request.backend, request.sim_specs, i, request.config),
                              daemon=True) for i in indices}
    started = time.monotonic()
    for proc in workers.values():
        proc.start()
    results: dict[int, DeviceReport] = {}
    try:
        while len(results) < len(workers):
            try:
                kind, index, payload = out.get(timeout=POLL_S)
            except queue_module.Empty:
                _reap(workers, results, out, started, request)
                continue
            if kind == "progress":
                sink(index, payload)
            elif kind == "result":
                results[index] = DeviceReport.from_dict(payload)
    finally:
        for proc in workers.values():
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
    return tuple(results[i] for i in indices)


def _reap(workers: dict[int, Any], results: dict[int, DeviceReport], out: Any, started: float,
          request: RunRequest) -> None:
    """Give an error report to every worker that died without a result or ran out of time."""
    elapsed = time.monotonic() - started
    timeout_s = request.device_timeout_s
    for index, proc in workers.items():
        if index in results:
            continue
        if not proc.is_alive():
            proc.join()
            if out.empty():
                results[index] = DeviceReport(index, None, None, request.backend,
                                              error=f"worker process exited with code {proc.exitcode} "
                                                    f"before reporting", elapsed_s=round(elapsed, 3))
        elif elapsed > timeout_s:
            proc.kill()
            results[index] = DeviceReport(index, None, None, request.backend,
                                          error=f"device timed out after {timeout_s:g} s", elapsed_s=round(elapsed, 3))
