"""The state a simulated device's context keeps, as a real CUDA context does: each function's attribute, a
context that a fault has poisoned, what each SM's shared memory holds for the leftover check; the faults a
spec injects, and the test-only fault seam. Each probe family of the simulated session (sim.py) builds on it.
"""

from __future__ import annotations

import random
import time

from bisect_smem.core.errors import KernelCompileError
from bisect_smem.core.hardware import STATIC_SMEM_COMPILE_CAP_BYTES
from bisect_smem.devices.backends.families import FaultSeam
from bisect_smem.devices.backends.sim.memory import SharedMemory
from bisect_smem.devices.backends.sim.model import DeviceModel, RecordedMemory
from bisect_smem.devices.backends.sim.spec import SimSpec
from bisect_smem.devices.probes import LaunchOutcome, Outcome, ProbeKernel

POISONED = "CUDA_ERROR_ILLEGAL_ADDRESS (simulated, poisoned context)"
INVALID = "CUDA_ERROR_INVALID_VALUE: invalid argument"


class SimContext(FaultSeam):
    """One simulated device's context: what it holds between probes, and the faults its spec injects."""

    def __init__(self, index: int, spec: SimSpec, static_sizes: tuple[int, ...]) -> None:
        too_big = [s for s in static_sizes if s > STATIC_SMEM_COMPILE_CAP_BYTES]
        if too_big:
            raise KernelCompileError(
                f"static shared memory {too_big[0]} B exceeds the compile-time cap of "
                f"{STATIC_SMEM_COMPILE_CAP_BYTES} B",
                f"ptxas error: uses too much shared data ({too_big[0]:#x} bytes, 0xc000 max)")
        self.index = index
        self.spec = spec
        self.model: DeviceModel = spec.model
        self.record = spec.model.record
        self.faults = spec.faults
        self._max_dynamic: dict[ProbeKernel, int] = {}
        self._random = random.Random(spec.faults.seed)
        self._poisoned = False
        self.memory = RecordedMemory(self.record) if self.record else SharedMemory(
            spec.model.multiprocessor_count, spec.faults.bitflip, spec.faults.leak)
        self._sweep_bytes: int | None = None  # the size of the last carveout sweep

    def _fault(self, dynamic_bytes: int) -> LaunchOutcome | None:
        """The injected fault this launch hits, if any."""
        faults = self.faults
        if self._poisoned or (faults.sticky_bytes is not None and dynamic_bytes >= faults.sticky_bytes):
            self._poisoned = True
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access "
                                                          "was encountered (simulated)")
        if faults.hang_bytes is not None and dynamic_bytes >= faults.hang_bytes:
            while True:  # never returns, as a hung kernel: only the runner's timeout ends it
                time.sleep(3600)
        if faults.holes is not None and faults.holes[0] <= dynamic_bytes <= faults.holes[1]:
            return LaunchOutcome(Outcome.INVALID_VALUE, f"{INVALID} (simulated holes)")
        if faults.hole_bytes is not None and dynamic_bytes == faults.hole_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE, f"{INVALID} (simulated hole)")
        return None

    def inject_illegal_access(self) -> None:
        """Test only: poison the simulated context, as a real illegal access would."""
        self._poisoned = True
