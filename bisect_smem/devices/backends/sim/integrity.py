"""The simulated validation (--level full): one block per SM over the simulated shared memory (sim_memory,
or what a replayed report recorded), with the faults the spec injects; and the device's address, so that
the leftover writer's process opens the same simulated device."""

from __future__ import annotations

from bisect_smem.core.hardware import MAX_THREADS_PER_BLOCK
from bisect_smem.devices.backends.base import DeviceAddress
from bisect_smem.devices.backends.families import Integrity
from bisect_smem.devices.backends.sim.context import INVALID, POISONED, SimContext
from bisect_smem.devices.probes import LaunchOutcome, LeftoverOutcome, MarchFault, MarchOutcome, Outcome


class SimIntegrity(SimContext, Integrity):
    """The march test and the leftover check on a simulated device."""

    def _validation_fault(self, dynamic_bytes: int, threads: int) -> LaunchOutcome | None:
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, POISONED)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK or dynamic_bytes > self.model.optin_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE, INVALID)
        return self._fault(dynamic_bytes)

    def march(self, dynamic_bytes: int, threads: int, blocks: int, seed: int,
              fault: MarchFault | None = None) -> MarchOutcome:
        failed = self._validation_fault(dynamic_bytes, threads)
        if failed is not None:
            return MarchOutcome(failed.outcome, failed.detail)
        return self.memory.march(dynamic_bytes, blocks, seed, fault)

    def leftover_write(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        fault = self._validation_fault(dynamic_bytes, threads)
        if fault is not None:
            return LeftoverOutcome(fault.outcome, fault.detail)
        return self.memory.write(dynamic_bytes, blocks, nonce)

    def leftover_read(self, dynamic_bytes: int, threads: int, blocks: int, nonce: int) -> LeftoverOutcome:
        fault = self._validation_fault(dynamic_bytes, threads)
        if fault is not None:
            return LeftoverOutcome(fault.outcome, fault.detail)
        return self.memory.read(dynamic_bytes, blocks, nonce)

    def address(self) -> DeviceAddress:
        return DeviceAddress("sim", 0, self.spec.text)
