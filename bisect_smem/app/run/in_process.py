"""A device measured in this process (``--inline``, or a simulated device that cannot poison anything): the
whole measurement with no restarts, under a watchdog that ends the run when the device timeout passes,
since one process cannot end its own hung probe."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from bisect_smem.analysis.device_report import build_report
from bisect_smem.app.run.leftover_writer import write_elsewhere
from bisect_smem.app.run.requests import RunRequest
from bisect_smem.app.run.worker import planned_steps
from bisect_smem.core.errors import BisectSmemError, ExitCode
from bisect_smem.core.model import DeviceReport
from bisect_smem.devices.device_info import open_device
from bisect_smem.experiments.measure import DeviceMeasurement


def measure(request: RunRequest, index: int, progress: Callable[[str], None]) -> DeviceReport:
    """One device in this process, under the device timeout: one process cannot end its own hung probe,
    so when the time is up the watchdog ends the whole run (exit 4), saying so, rather than wait forever."""
    limit = request.device_timeout_s
    watchdog = threading.Timer(limit, _give_up, args=(index, limit))
    watchdog.daemon = True
    watchdog.start()
    try:
        return measure_whole(request, index, progress)
    finally:
        watchdog.cancel()


def _give_up(index: int, limit: float) -> None:
    try:
        sys.stderr.write(f"\nerror: device {index} did not finish within {limit:g} s, and a run in one process "
                         "(--inline) cannot end a hung probe: the run ends, no report was written\n")
        sys.stderr.flush()
    finally:
        os._exit(ExitCode.INCOMPLETE)


def measure_whole(request: RunRequest, index: int, progress: Callable[[str], None]) -> DeviceReport:
    """The whole device in this process, with no restarts: a sticky fault ends the measurement."""
    start = time.perf_counter()
    name = request.backend.name
    steps = planned_steps(request)
    try:
        session, info = open_device(request.backend, index, request.config.static_sizes,
                                    step_kinds=frozenset(step.kind for step in steps))
    except BisectSmemError as exc:
        return build_report(index, name, None, {}, [], str(exc), time.perf_counter() - start)
    writer = write_elsewhere(session, request.config.static_sizes, progress)
    try:
        done, error = DeviceMeasurement.for_device(session, info, request.config, progress, writer).run(steps)
    finally:
        session.close()
    return build_report(index, name, info, done, [], error, time.perf_counter() - start, steps,
                        request.config.level)
