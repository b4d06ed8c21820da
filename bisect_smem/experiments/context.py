"""What a step runs with: the device's session and progress sink, the configuration, what the device
reported and its published row, what the steps before it measured, and the Prior the later steps build
on, fixed once. A step records its searches and its other probes here; the step loop collects them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from bisect_smem.core.attributes import DriverAttributes
from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import DEFAULT_GRANULE_BYTES, block_footprint, blocks_per_sm, ceil_div, round_up
from bisect_smem.core.model import Ceiling, Measured
from bisect_smem.core.profiles import ArchProfile, profile_for_cc
from bisect_smem.core.search import find_ceiling_batched, probe_bound
from bisect_smem.devices.backends.base import DeviceSession
from bisect_smem.devices.device_info import DeviceInfo
from bisect_smem.devices.probes import LeftoverOutcome
from bisect_smem.experiments.config import MeasureConfig

Progress = Callable[[str], None]
WriteElsewhere = Callable[[int, int, int], LeftoverOutcome]
"""``(dynamic_bytes, blocks, nonce)``: another process, with a CUDA context of its own, fills one block
per SM with ``nonce``'s pattern and ends; what it ran comes back. A failure to run it at all is a
MeasurementError."""
CARVEOUT_FOOTPRINT_BYTES = 8 * 1024  # published carveouts differ by 8 KB or more: one count each


@frozen
class DeviceFacts:
    """What the device reported (the driver's view) and its published row: they feed formulas and labels,
    never the bounds of a search."""

    reported: DriverAttributes = DriverAttributes()
    profile: ArchProfile | None = None

    @classmethod
    def of(cls, info: DeviceInfo) -> DeviceFacts:
        """The facts of an opened device."""
        return cls(info.reported.driver or DriverAttributes(), profile_for_cc(info.identity.compute_capability))


@frozen
class Limits:
    """What the residency formula uses: reported per-SM limits and the measured block footprint."""

    smem_per_sm_bytes: int | None
    max_blocks_per_sm: int | None
    max_threads_per_sm: int | None
    granule_bytes: int
    reserved_bytes: int

    def footprint(self, dynamic_bytes: int) -> int:
        """Shared memory one block takes on its SM: whole granules plus the reserved window."""
        return block_footprint(dynamic_bytes, self.granule_bytes, self.reserved_bytes)

    def carveout_probe_bytes(self) -> int:
        """The dynamic size of the carveout sweep's blocks: a footprint of 8 KB, or more where the block
        limit would otherwise cap the count before the largest carveout is full."""
        footprint = CARVEOUT_FOOTPRINT_BYTES
        if self.smem_per_sm_bytes and self.max_blocks_per_sm:
            needed = ceil_div(self.smem_per_sm_bytes, self.max_blocks_per_sm)
            footprint = max(footprint, round_up(needed, self.granule_bytes))
        return max(footprint - self.reserved_bytes, 0)

    def formula(self, dynamic_bytes: int, threads: int) -> tuple[int | None, str | None]:
        """floor(smem_per_SM / footprint), capped by the block and thread limits, and which one binds."""
        return blocks_per_sm(self.footprint(dynamic_bytes), threads, self.smem_per_sm_bytes, self.max_blocks_per_sm,
                             self.max_threads_per_sm)


@frozen
class Prior:
    """What residency, carveout, clusters and validation build on, fixed once the quick steps are done:
    the reference opt-in ceiling (None: not measured), the allocation granule (measured, else published,
    else the occupancy calculator's unit), the reserved window (measured, else reported, else none) and
    the residency formula's limits. Bytes."""

    optin_bytes: int | None
    granule_bytes: int
    reserved_bytes: int
    limits: Limits

    @classmethod
    def build(cls, earlier: Measured, facts: DeviceFacts) -> Prior:
        """The Prior from what the quick steps measured and what the device reported."""
        granule = earlier.allocation_granularity_bytes or (
            facts.profile.allocation_granularity_bytes if facts.profile else DEFAULT_GRANULE_BYTES)
        reserved = earlier.reserved_bytes
        if reserved is None:
            reserved = facts.reported.reserved_shared_memory_per_block_bytes or 0
        r = facts.reported
        limits = Limits(r.max_shared_memory_per_multiprocessor_bytes, r.max_blocks_per_multiprocessor,
                        r.max_threads_per_multiprocessor, granule, reserved)
        return cls(earlier.optin_dynamic_ceiling_bytes, granule, reserved, limits)

    def require_optin(self) -> int:
        """The reference opt-in ceiling, which residency, carveout, clusters and validation build on."""
        if self.optin_bytes is None:
            raise MeasurementError("needs the opt-in ceiling, which was not measured")
        return self.optin_bytes


@dataclass
class StepContext:
    """One step's view of its device. ``probes`` counts the device's probes that are not ceiling searches,
    by experiment, across steps; ``searches`` holds this step's searches."""

    session: DeviceSession
    progress: Progress
    config: MeasureConfig
    facts: DeviceFacts
    earlier: Measured  # what the steps before this one measured
    prior_of: Callable[[], Prior]  # the device's Prior, built on the first call
    write_elsewhere: WriteElsewhere | None = None
    probes: Counter[str] = field(default_factory=Counter)
    searches: dict[str, Ceiling] = field(default_factory=dict)

    @property
    def prior(self) -> Prior:
        """The device's Prior."""
        return self.prior_of()

    def search(self, name: str, predicate: Callable[[list[int]], list[bool]]) -> Ceiling:
        """Search one ceiling, several sizes per round, and record it; an unexpected probe class becomes
        the ceiling's error, not a number (a sticky one propagates: only a new process recovers)."""
        count = 0

        def counted(sizes: list[int]) -> list[bool]:
            nonlocal count
            for n in sizes:
                count += 1
                self.progress(f"{name}: probe {count} at {n} B")
            return predicate(sizes)

        cap, confirm = self.config.cap_bytes, self.config.confirm
        bound = probe_bound(cap, confirm)
        try:
            result = find_ceiling_batched(counted, cap_bytes=cap, confirm=confirm)
        except ProbeFault as fault:
            if fault.sticky:
                raise
            ceiling = Ceiling(None, count, bound, error=str(fault))
        else:
            ceiling = Ceiling(result.ceiling_bytes, result.probes, bound, result.at_cap, result.unstable_range,
                              result.non_monotone_at, rounds=result.rounds)
        self.searches[name] = ceiling
        return ceiling
