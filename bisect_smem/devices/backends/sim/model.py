"""A simulated device as data: the parameters of the documented rules, from a published profile
(``from_profile``) or from a saved report (``from_report``), and, for a report, what it recorded.

The rules are those of core.hardware: 48 KB without opt-in, dynamic + static within the opt-in limit,
48 KB static at compile time, the reserved window and the allocation granularity from cc 8.0 on, the
16-byte alignment of the dynamic array, blocks per SM from the footprint, and carveouts rounded up to
the next supported size. Where the table leaves the reserved size unconfirmed, the model uses 1 KB from
cc 8.0 on. A recording answers what the report measured, and only that: each of its lookups says None
where the report recorded nothing (or its measurement failed), and the simulated session then answers
"not measured in the replayed report" (Outcome.OTHER), so what the report lacks stays missing or
failed in the replay; its validation (march, granule sweep, leftovers) answers as recorded, and the
device's own error is kept.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

from bisect_smem.core.attributes import DeviceContext, ReportedAttributes
from bisect_smem.core.errors import MeasurementError, UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import (
    DEFAULT_GRANULE_BYTES,
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    KIB,
    block_footprint,
    blocks_per_sm,
    ceil_div,
    default_reserved_bytes,
    static_footprint,
)
from bisect_smem.core.integrity import MARCH_READS_PER_WORD, GranuleSweep, Leftovers, MarchResult, SmMarch
from bisect_smem.core.levels import STAIRCASE_THREADS
from bisect_smem.core.model import CarveoutPoint, ClusterMeasurement, DeviceReport, Report, ResidencyStep, StaticSplit
from bisect_smem.core.profiles import ArchProfile, parse_cc, profile_for_cc
from bisect_smem.core.saved import load_saved
from bisect_smem.devices.probes import ClusterOutcome, LaunchOutcome, LeftoverOutcome, MarchFault, MarchOutcome, Outcome

UNRECORDED = "not measured in the replayed report"


@frozen
class Recording:
    """What one device of a saved report measured, indexed the way a replayed device is asked."""

    path: str
    backend: str
    name: str | None
    context: DeviceContext
    reported: ReportedAttributes
    default_ceiling_bytes: int | None = None
    default_api_available_bytes: int | None = None
    attribute_accept_ceiling_bytes: int | None = None
    splits: dict[tuple[int, int], StaticSplit] = field(default_factory=dict)  # by (static bytes, threads)
    residency: tuple[ResidencyStep, ...] = ()
    carveout: dict[int, CarveoutPoint] = field(default_factory=dict)  # by percent
    clusters: dict[int, ClusterMeasurement] = field(default_factory=dict)  # by dynamic bytes
    clusters_skipped: str | None = None
    march: MarchResult | None = None
    granule_sweep: GranuleSweep | None = None
    leftovers: Leftovers | None = None
    error: str | None = None  # the device's own error, kept by the replay

    @classmethod
    def of(cls, dev: DeviceReport, path: str) -> Recording:
        """The recording of a measured device."""
        m = dev.measured
        if m is None:
            raise UsageError(f"device {dev.index} was not measured, so there is nothing to replay")
        return cls(path, dev.backend, dev.name, dev.context, dev.reported, m.default_dynamic_ceiling_bytes,
                   m.default_api_available_dynamic_bytes, m.attribute_accept_ceiling_bytes,
                   {(s.static_bytes, s.threads): s for s in m.static_splits}, m.residency,
                   {p.percent: p for p in m.carveout}, {c.dynamic_bytes: c for c in m.clusters}, m.clusters_skipped,
                   m.march, m.granule_sweep, m.leftovers, dev.error)

    def cluster_launches(self, dynamic_bytes: int, sizes: tuple[int, ...], nonportable: bool) -> list[ClusterOutcome]:
        """Clusters launch up to the recorded largest size, and read back as they did."""
        rec = self.clusters.get(dynamic_bytes)
        if rec is None:
            return [ClusterOutcome(Outcome.OTHER, f"clusters at {dynamic_bytes} B: {UNRECORDED}")]
        largest = (rec.max_cluster_size_nonportable if nonportable else rec.max_cluster_size_portable) or 0
        results = []
        for size in sizes:
            if size > largest:
                results.append(ClusterOutcome(Outcome.CLUSTER_MISCONFIG, "CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES"))
                break
            wrong = 0 if rec.dsm_verified in (True, None) else 1
            results.append(ClusterOutcome(Outcome.OK, "", size, size * dynamic_bytes, wrong, size))
        return results

    def accepted_bytes(self) -> int | None:
        """The largest value the attribute took when measured, else the largest a recorded launch proves."""
        if self.attribute_accept_ceiling_bytes is not None:
            return self.attribute_accept_ceiling_bytes
        proven = [s.dynamic_ceiling_bytes + (s.static_footprint_bytes or static_footprint(s.static_bytes))
                  for s in self.splits.values() if s.dynamic_ceiling_bytes is not None]
        return max(proven, default=None)

    def march_outcome(self, dynamic_bytes: int) -> MarchOutcome:
        """The march as it ran: each SM seen, passed or with its recorded failure."""
        if self.march is None or self.march.dynamic_bytes != dynamic_bytes:
            return MarchOutcome(Outcome.OTHER, f"the march: {UNRECORDED}")
        failed = {f.sm_id: f for f in self.march.failures}
        passed = MARCH_READS_PER_WORD * (dynamic_bytes // 4)
        return MarchOutcome(Outcome.OK, "", tuple(failed.get(sm, SmMarch(sm, dynamic_bytes, passed))
                                                  for sm in self.march.sms_seen))

    def sweep_outcome(self, dynamic_bytes: int) -> LaunchOutcome | None:
        """A granule sweep launch at a recorded failing size or over the ceiling, as it ran; None where the
        recorded ceiling answers it. A MeasurementError without a recorded sweep: a failed launch would
        read as a hole in it, so the step itself fails."""
        sweep = self.granule_sweep
        if sweep is None:
            raise MeasurementError(f"the granule sweep: {UNRECORDED}")
        if dynamic_bytes in sweep.failing_bytes:
            return LaunchOutcome(Outcome.VERIFY_FAILED, f"as recorded: {sweep.failure_detail or 'failed'}")
        if dynamic_bytes > sweep.ceiling_bytes:
            return LaunchOutcome(Outcome.INVALID_VALUE if sweep.over_ceiling_failed else Outcome.OK, "as recorded")
        return None

    def leftover_outcome(self, own: bool, written: bool) -> LeftoverOutcome:
        """A leftover kernel as it ran: the writer (``written``), or a reader of what this process (``own``)
        or another one left."""
        left = self.leftovers
        if left is None:
            return LeftoverOutcome(Outcome.OTHER, f"the leftovers: {UNRECORDED}")
        if written:
            return LeftoverOutcome(Outcome.OK, "", tuple(range(left.writer_sms)), left.within_process_words_read)
        sms = tuple(range(left.reader_sms))
        if own:
            return LeftoverOutcome(Outcome.OK, "", sms, left.within_process_words_read, left.within_process_words_matching)
        return LeftoverOutcome(Outcome.OK, "", sms, left.across_processes_words_read,
                               left.across_processes_words_matching)

    def static_footprint(self, static_bytes: int) -> int | None:
        """Where the dynamic array started beside ``static_bytes`` of static data; None: not recorded."""
        return next((s.static_footprint_bytes for s in self.splits.values()
                     if s.static_bytes == static_bytes and s.static_footprint_bytes is not None), None)

    def ceiling(self, static_bytes: int, threads: int, opt_in: bool) -> int | None:
        """The largest dynamic size that launched for this kernel and block size; None: not recorded."""
        if not opt_in:
            return self.default_ceiling_bytes if static_bytes == 0 else None
        split = self.splits.get((static_bytes, threads))
        return split.dynamic_ceiling_bytes if split is not None else None

    def available_dynamic(self, static_bytes: int, threads: int, opt_in: bool) -> int | None:
        """cuOccupancyAvailableDynamicSMemPerBlock as it answered; None: not recorded."""
        if not opt_in:
            return self.default_api_available_bytes if static_bytes == 0 else None
        split = self.splits.get((static_bytes, threads))
        return split.api_available_dynamic_bytes if split is not None else None

    def residency_step(self, dynamic_bytes: int, threads: int) -> ResidencyStep | None:
        """The recorded plateau that holds this size: exact for the extra block sizes, the staircase for
        its own block size; None: not recorded."""
        exact = next((s for s in self.residency if s.threads == threads and s.dynamic_bytes == dynamic_bytes), None)
        if exact is not None or threads != STAIRCASE_THREADS:
            return exact
        below = [s for s in self.residency if s.threads == STAIRCASE_THREADS and s.dynamic_bytes <= dynamic_bytes]
        return max(below, key=lambda s: s.dynamic_bytes) if below else None


class RecordedMemory:
    """A replayed device's shared memory, for the validation kernels: the march, and what a leftover writer
    left, answer as its report recorded them (sim_memory.SharedMemory's interface)."""

    def __init__(self, record: Recording) -> None:
        self.record = record
        self.own_nonce: int | None = None  # the leftover pattern this process wrote

    def march(self, dynamic_bytes: int, blocks: int, seed: int, planted: MarchFault | None = None) -> MarchOutcome:
        """The march as recorded; no fault can be planted in a replay."""
        if planted is not None:
            return MarchOutcome(Outcome.OTHER, "a replay answers as its report did: no fault can be planted in it")
        return self.record.march_outcome(dynamic_bytes)

    def write(self, dynamic_bytes: int, blocks: int, nonce: int) -> LeftoverOutcome:
        """The leftover writer as recorded."""
        self.own_nonce = nonce
        return self.record.leftover_outcome(own=True, written=True)

    def read(self, dynamic_bytes: int, blocks: int, nonce: int) -> LeftoverOutcome:
        """What a reader found, of this process's pattern or another one's, as recorded."""
        return self.record.leftover_outcome(own=nonce == self.own_nonce, written=False)

    def close(self) -> None:
        """Nothing outlives a replayed context."""


@frozen
class DeviceModel:
    """The rules' parameters for one simulated device (bytes, blocks, threads), and its recording if any."""

    key: str  # the profile key, or "replay"
    name: str
    compute_capability: tuple[int, int]
    smem_per_sm_bytes: int
    optin_bytes: int  # the opt-in limit per block
    reserved_bytes: int
    granule_bytes: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    multiprocessor_count: int
    carveout_kib: tuple[int, ...] | None = None  # the supported carveout sizes
    fewer_blocks: int = 0  # every SM holds this many blocks fewer than the occupancy API predicts
    record: Recording | None = None

    @classmethod
    def from_profile(cls, p: ArchProfile, optin_bytes: int | None = None, smem_per_sm_bytes: int | None = None,
                     reserved_bytes: int | None = None, fewer_blocks: int = 0) -> DeviceModel:
        """A device as its published row says, with any of its limits overridden."""
        if reserved_bytes is None:
            reserved_bytes = p.reserved_smem_per_block_bytes
        if reserved_bytes is None:
            reserved_bytes = default_reserved_bytes(p.compute_capability)
        return cls(p.key, f"Simulated {p.key} ({p.example_parts})", p.compute_capability,
                   p.smem_per_sm_bytes if smem_per_sm_bytes is None else smem_per_sm_bytes,
                   p.max_smem_per_block_optin_bytes if optin_bytes is None else optin_bytes, reserved_bytes,
                   p.allocation_granularity_bytes, p.max_threads_per_sm, p.max_blocks_per_sm, p.multiprocessor_count,
                   p.carveout_kib, fewer_blocks)

    @classmethod
    def from_report(cls, dev: DeviceReport, path: str) -> DeviceModel:
        """A device as a saved report measured it; what the report lacks comes from its published row."""
        record = Recording.of(dev, path)
        m, driver = dev.measured, dev.reported.driver
        cc = parse_cc(str(dev.compute_capability))
        table = profile_for_cc(cc)

        def pick(*values: int | None) -> int:
            return next((v for v in values if v is not None), 0)

        return cls(
            "replay", dev.name or "replayed device", cc,
            pick(m.smem_per_sm_bytes, driver and driver.max_shared_memory_per_multiprocessor_bytes),
            pick(m.optin_dynamic_ceiling_bytes, driver and driver.max_shared_memory_per_block_optin_bytes),
            pick(m.reserved_bytes, driver and driver.reserved_shared_memory_per_block_bytes),
            pick(m.allocation_granularity_bytes, table and table.allocation_granularity_bytes, DEFAULT_GRANULE_BYTES),
            pick(driver and driver.max_threads_per_multiprocessor, table and table.max_threads_per_sm),
            pick(driver and driver.max_blocks_per_multiprocessor, table and table.max_blocks_per_sm),
            pick(driver and driver.multiprocessor_count, table and table.multiprocessor_count),
            table.carveout_kib if table else None, record=record)

    def static_footprint(self, static_bytes: int) -> int:
        """Bytes the static data takes before the dynamic array: as recorded, else the 16-byte rule."""
        recorded = self.record.static_footprint(static_bytes) if self.record else None
        return static_footprint(static_bytes) if recorded is None else recorded

    def dynamic_base_offset(self, static_bytes: int) -> int | None:
        """Where the dynamic array starts in the shared window beside ``static_bytes`` of static data: the
        reserved window and the static footprint (a replay's as recorded; None where it was not read)."""
        footprint = self.record.static_footprint(static_bytes) if self.record and static_bytes \
            else self.static_footprint(static_bytes)
        return None if footprint is None else self.reserved_bytes + footprint

    def default_ceiling(self, static_bytes: int) -> int:
        """The rules' largest dynamic size without opt-in: 48 KB less the static data, within the opt-in limit."""
        return min(max(DEFAULT_SMEM_PER_BLOCK_BYTES - static_bytes, 0), self.optin_bytes - self.static_footprint(
            static_bytes))

    def footprint(self, dynamic_bytes: int) -> int:
        """Shared memory one block takes on its SM: the request in whole granules, plus the reserved window."""
        return block_footprint(dynamic_bytes, self.granule_bytes, self.reserved_bytes)

    def carveout_capacity(self, percent: int | None, footprint: int) -> int:
        """The documented rule: the percentage of the per-SM capacity, rounded up to the next supported
        carveout, but never less than one block needs."""
        if percent is None or percent < 0 or not self.carveout_kib:
            return self.smem_per_sm_bytes
        sizes = sorted(k * KIB for k in self.carveout_kib)
        wanted = max(ceil_div(percent * self.smem_per_sm_bytes, 100), footprint)
        return next((s for s in sizes if s >= wanted), sizes[-1])

    def blocks_per_sm(self, dynamic_bytes: int, threads: int, capacity: int | None = None) -> int:
        """Blocks of ``dynamic_bytes`` that fit on one SM of ``capacity`` (default: the whole SM)."""
        blocks, _ = blocks_per_sm(self.footprint(dynamic_bytes), threads,
                                  self.smem_per_sm_bytes if capacity is None else capacity, self.max_blocks_per_sm,
                                  self.max_threads_per_sm)
        return blocks or 0


def load_replay(path: str, device: int = 0) -> DeviceModel:
    """Device ``device`` of a report or baseline file as a model; anything unusable is an error (exit 2)
    naming it."""
    saved = load_saved(Path(path), name=f"--simulate {path}")
    devices = saved.devices if isinstance(saved, Report) else (saved.device,)
    chosen = next((d for d in devices if d.index == device), None)
    if chosen is None:
        raise UsageError(f"--simulate {path}: no device {device} in it (devices: "
                         f"{', '.join(str(d.index) for d in devices) or 'none'})")
    if chosen.measured is None or chosen.compute_capability is None:
        raise UsageError(f"--simulate {path}: device {device} was not measured, so there is nothing to replay")
    parse_cc(chosen.compute_capability, f"--simulate {path}: the compute_capability of device {device}")
    return DeviceModel.from_report(chosen, str(path))
