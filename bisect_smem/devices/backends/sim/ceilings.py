"""The simulated per-block ceilings: the opt-in attribute, single-block launches with the PTX registers a
real block reads, and what the occupancy API says is available, by the model's rules or its recording."""

from __future__ import annotations

from collections.abc import Sequence

from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_THREADS_PER_BLOCK,
    has_aggr_register,
    has_smem_registers,
    round_up,
)
from bisect_smem.devices.backends.batches import launch_each
from bisect_smem.devices.backends.families import Ceilings
from bisect_smem.devices.backends.sim.context import INVALID, POISONED, SimContext
from bisect_smem.devices.backends.sim.model import UNRECORDED
from bisect_smem.devices.probes import Launch, LaunchOutcome, Outcome, ProbeKernel, SmemRegisters


class SimCeilings(SimContext, Ceilings):
    """The ceilings of a simulated device."""

    def _limit(self, kernel: ProbeKernel) -> int:
        default = max(DEFAULT_SMEM_PER_BLOCK_BYTES - kernel.static_bytes, 0)
        return self._max_dynamic.get(kernel, default)

    def set_max_dynamic(self, kernel: ProbeKernel, nbytes: int) -> LaunchOutcome:
        if not kernel.opt_in:
            raise ValueError("the default-ceiling kernel must stay fresh: its attribute is never raised")
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, POISONED)
        accepted = self.record.accepted_bytes() if self.record else self.model.optin_bytes
        if accepted is None:
            return LaunchOutcome(Outcome.OTHER, f"what the attribute accepts: {UNRECORDED}")
        if nbytes < 0 or nbytes + self.model.static_footprint(kernel.static_bytes) > accepted:
            return LaunchOutcome(Outcome.INVALID_VALUE, INVALID)
        self._max_dynamic[kernel] = nbytes
        return LaunchOutcome(Outcome.OK)

    def _flaky(self, dynamic_bytes: int, limit: int, outcome: LaunchOutcome, registers: SmemRegisters | None,
               total: int) -> LaunchOutcome:
        """Near a limit, answer wrongly with probability ``flaky``."""
        flaky = self.faults.flaky
        if flaky and abs(dynamic_bytes - limit) <= self.model.granule_bytes and self._random.random() < flaky:
            if outcome.ok:
                return LaunchOutcome(Outcome.INVALID_VALUE, f"{INVALID} (flaky)")
            return LaunchOutcome(Outcome.OK, "flaky", registers, total)
        return outcome

    def _ceiling(self, kernel: ProbeKernel, threads: int) -> int | None:
        """The largest dynamic size this kernel and block size launch at: recorded (None: not), else the rules'."""
        if self.record:
            return self.record.ceiling(kernel.static_bytes, threads, kernel.opt_in)
        if not kernel.opt_in:
            return self.model.default_ceiling(kernel.static_bytes)
        return self.model.optin_bytes - self.model.static_footprint(kernel.static_bytes)

    def launch(self, kernel: ProbeKernel, dynamic_bytes: int, threads: int) -> LaunchOutcome:
        if self._poisoned:
            return LaunchOutcome(Outcome.ILLEGAL_ADDRESS, POISONED)
        total = dynamic_bytes + kernel.static_bytes
        # Flakiness lives near the kernel's real ceiling, not near whatever the attribute was just set to.
        ceiling = self._ceiling(kernel, threads)
        if ceiling is None:
            return LaunchOutcome(Outcome.OTHER, f"{kernel.static_bytes} B static, {threads} threads: {UNRECORDED}")
        registers = self._registers(kernel, dynamic_bytes)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK or dynamic_bytes > min(self._limit(kernel), ceiling):
            # The driver refuses the launch when it is enqueued: it never runs, so it cannot fault.
            return self._flaky(dynamic_bytes, ceiling, LaunchOutcome(Outcome.INVALID_VALUE, INVALID), registers,
                               total)
        fault = self._fault(dynamic_bytes)
        if fault is not None:
            return fault
        base = self.model.dynamic_base_offset(kernel.static_bytes)
        if kernel.hole_bytes == dynamic_bytes:  # the planted hole: the kernel reads its first byte back wrong
            return LaunchOutcome(Outcome.VERIFY_FAILED, "1 B wrong", registers, total - 1, base)
        ok = LaunchOutcome(Outcome.OK, registers=registers, bytes_verified=total, dynamic_base_offset_bytes=base)
        return self._flaky(dynamic_bytes, ceiling, ok, registers, total)

    def _registers(self, kernel: ProbeKernel, dynamic_bytes: int) -> SmemRegisters:
        cc = self.model.compute_capability
        if not has_smem_registers(cc):
            return SmemRegisters()
        used = kernel.static_bytes + dynamic_bytes
        reserved = self.model.reserved_bytes
        return SmemRegisters(dynamic_smem_size=dynamic_bytes, total_smem_size=round_up(used, self.model.granule_bytes),
                             reserved_smem_offset_begin=0, reserved_smem_offset_cap=reserved,
                             aggr_smem_size=reserved + used if has_aggr_register(cc) else None)

    def available_dynamic_smem(self, kernel: ProbeKernel, threads: int) -> int | None:
        """What one block may have beside its static data and reserved window, capped by the attribute."""
        if self.record:
            recorded = self.record.available_dynamic(kernel.static_bytes, threads, kernel.opt_in)
            return None if recorded is None else min(self._limit(kernel), recorded)
        if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            return None
        m = self.model
        hardware = min(m.optin_bytes, m.smem_per_sm_bytes - m.reserved_bytes) - m.static_footprint(kernel.static_bytes)
        return max(min(self._limit(kernel), hardware), 0)

    def launch_batch(self, launches: Sequence[Launch]) -> list[LaunchOutcome]:
        if self.record and any(p.sweep for p in launches):  # the granule sweep answers as it was recorded
            return [self.record.sweep_outcome(p.dynamic_bytes) or self.launch(p.kernel, p.dynamic_bytes, p.threads)
                    for p in launches]
        return launch_each(self, launches)
