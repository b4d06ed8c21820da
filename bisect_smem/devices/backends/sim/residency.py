"""The simulated residency and carveout: how many blocks of a size fit on an SM by the model's rules (a
carveout preference rounded up to a supported size), or as the replayed report recorded them."""

from __future__ import annotations

from collections.abc import Sequence

from bisect_smem.core.hardware import MAX_THREADS_PER_BLOCK
from bisect_smem.devices.backends.batches import residency_each
from bisect_smem.devices.backends.families import Carveout, Residency
from bisect_smem.devices.backends.sim.context import INVALID, POISONED, SimContext
from bisect_smem.devices.backends.sim.model import UNRECORDED
from bisect_smem.devices.probes import Outcome, ResidencyOutcome, ResidencyProbe


class SimResidency(SimContext, Residency, Carveout):
    """Residency and carveout sweeps of a simulated device."""

    def residency_batch(self, probes: Sequence[ResidencyProbe]) -> list[ResidencyOutcome]:
        return residency_each(self, probes)

    def residency(self, dynamic_bytes: int, threads: int, hold_ns: int,
                  carveout_percent: int | None = None) -> ResidencyOutcome:
        m = self.model
        if self._poisoned:
            return ResidencyOutcome(Outcome.ILLEGAL_ADDRESS, POISONED)
        if dynamic_bytes > m.optin_bytes or not 1 <= threads <= MAX_THREADS_PER_BLOCK:
            return ResidencyOutcome(Outcome.INVALID_VALUE, INVALID)
        if self.record is not None:
            if carveout_percent is not None and carveout_percent in self.record.carveout:
                return self._recorded_carveout(dynamic_bytes, threads, carveout_percent)
            step = self.record.residency_step(dynamic_bytes, threads) if carveout_percent is None else None
            if step is None:
                return ResidencyOutcome(Outcome.OTHER, f"residency at {dynamic_bytes} B, {threads} threads: {UNRECORDED}")
            return ResidencyOutcome(Outcome.OK, "", step.blocks_per_sm_min, step.blocks_per_sm_max,
                                    step.api_blocks_per_sm)
        capacity = m.carveout_capacity(carveout_percent, m.footprint(dynamic_bytes))
        blocks = m.blocks_per_sm(dynamic_bytes, threads, capacity)
        held = max(blocks - m.fewer_blocks, 1) if blocks else blocks
        return ResidencyOutcome(Outcome.OK, "", held, held, blocks)

    def _recorded_carveout(self, dynamic_bytes: int, threads: int, percent: int) -> ResidencyOutcome:
        """Under a recorded carveout setting: the recorded answer at the sweep's size, else the capacity
        residency proved for that setting (the driver still grows a carveout to fit one block)."""
        point = self.record.carveout[percent]
        if dynamic_bytes == self._sweep_bytes:
            return ResidencyOutcome(Outcome.OK, "", point.blocks_per_sm, point.blocks_per_sm, point.api_blocks_per_sm)
        m = self.model
        footprint = m.footprint(dynamic_bytes)
        capacity = point.carveout_range_bytes[0] if point.carveout_range_bytes else m.smem_per_sm_bytes
        blocks = m.blocks_per_sm(dynamic_bytes, threads, max(capacity, footprint))
        api = m.blocks_per_sm(dynamic_bytes, threads, m.carveout_capacity(percent, footprint))
        return ResidencyOutcome(Outcome.OK, "", blocks, blocks, api)

    def carveout_sweep(self, dynamic_bytes: int, threads: int, hold_ns: int,
                       percents: tuple[int, ...]) -> list[ResidencyOutcome]:
        self._sweep_bytes = dynamic_bytes  # a recording's counts were taken at the sweep's size
        return [self.residency(dynamic_bytes, threads, hold_ns, p) for p in percents]
