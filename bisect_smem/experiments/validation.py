"""Validating the shared memory itself (--level full): every SM and every byte (a march test per SM),
every granule (a launch at each allocation-granule multiple up to the ceiling), and nothing left
behind (what an earlier kernel, or an earlier process, left in shared memory).

Coverage is proven, not assumed: each block reads %smid, and a launch that missed an SM is repeated
(at most MAX_MARCH_LAUNCHES times) before the missing SMs are named.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import ClassVar

from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.core.frozen import frozen
from bisect_smem.core.integrity import GranuleSweep, Leftovers, MarchResult, SmMarch
from bisect_smem.core.records import GRANULE_SWEEP, LEFTOVERS, MARCH, Filled
from bisect_smem.devices.backends.base import DeviceSession
from bisect_smem.devices.backends.families import Integrity
from bisect_smem.devices.probes import TOO_BIG, Launch, ProbeKernel
from bisect_smem.experiments.config import PlantedFaults
from bisect_smem.experiments.context import StepContext, WriteElsewhere
from bisect_smem.experiments.expect import NOTHING_TOO_BIG, expect
from bisect_smem.experiments.steps import Step

MAX_MARCH_LAUNCHES = 4
MARCH_THREADS = 512
SWEEP_THREADS = 1024
LEFTOVER_THREADS = 512  # the block size of the leftover kernels, the other process's writer included


def word_bytes(ceiling_bytes: int) -> int:
    """The part of the ceiling the 32-bit-word kernels cover (every ceiling seen so far is a multiple of 16)."""
    return ceiling_bytes - ceiling_bytes % 4


def sweep_sizes(ceiling_bytes: int, granule_bytes: int) -> tuple[int, ...]:
    """Every granule multiple from 0 to the ceiling, the ceiling itself, and the byte after it (last)."""
    if granule_bytes < 1:
        raise ValueError(f"granule bytes must be >= 1 (got {granule_bytes})")
    sizes = list(range(0, ceiling_bytes + 1, granule_bytes))
    if sizes[-1] != ceiling_bytes:
        sizes.append(ceiling_bytes)
    return (*sizes, ceiling_bytes + 1)


class Validation:
    """The validation experiments on one device, with one block per SM."""

    def __init__(self, session: DeviceSession, sm_count: int | None, progress: Callable[[str], None],
                 write_elsewhere: WriteElsewhere | None = None, planted: PlantedFaults | None = None) -> None:
        """``write_elsewhere`` runs the leftover writer in another process (None: leftovers not measurable);
        ``planted`` (test only) are faults the kernels plant."""
        self.session = session
        self.sm_count = sm_count
        self.progress = progress
        self.write_elsewhere = write_elsewhere
        self.planted = planted or PlantedFaults()

    def _blocks(self) -> int:
        if not self.sm_count:
            raise MeasurementError("needs the SM count (driver attribute 16), which the device did not report")
        return self.sm_count

    def march(self, ceiling_bytes: int) -> MarchResult:
        """The march test on every SM at the opt-in ceiling; a failure on any launch is kept."""
        blocks, dynamic = self._blocks(), word_bytes(ceiling_bytes)
        fault = self.planted.march
        if fault is not None and not (fault.sm_id < blocks and fault.byte < dynamic):
            raise MeasurementError(f"the planted fault at SM {fault.sm_id}, byte {fault.byte} is outside the march "
                                   f"(SMs 0..{blocks - 1}, bytes 0..{dynamic - 1})")
        by_sm: dict[int, SmMarch] = {}
        launches = 0
        while launches < MAX_MARCH_LAUNCHES:
            launches += 1
            self.progress(f"march test: launch {launches}, {blocks} blocks of {dynamic} B")
            outcome = self.session.march(dynamic, MARCH_THREADS, blocks, secrets.randbits(32), fault)
            expect(outcome, f"march test at {dynamic} B", NOTHING_TOO_BIG)
            for block in outcome.blocks:
                if block.sm_id not in by_sm or by_sm[block.sm_id].passed:
                    by_sm[block.sm_id] = block
            if len(by_sm) >= blocks:
                break
        failures = tuple(sorted((b for b in by_sm.values() if not b.passed), key=lambda b: b.sm_id))
        return MarchResult(dynamic, MARCH_THREADS, self.sm_count, tuple(sorted(by_sm)), launches, failures)

    def granule_sweep(self, ceiling_bytes: int, granule_bytes: int) -> GranuleSweep:
        """Launch and verify the 0-byte static probe at every granule multiple, and at the ceiling + 1 B."""
        kernel = ProbeKernel(0, opt_in=True, hole_bytes=self.planted.sweep_hole_bytes)
        over = ceiling_bytes + 1
        # The attribute is raised as far as it goes, so that the byte over is refused by the launch itself
        # where the attribute would allow it.
        if not expect(self.session.set_max_dynamic(kernel, over), f"attribute set to {over} B"):
            expect(self.session.set_max_dynamic(kernel, ceiling_bytes), f"attribute set to {ceiling_bytes} B",
                   NOTHING_TOO_BIG)
        sizes = sweep_sizes(ceiling_bytes, granule_bytes)
        self.progress(f"granule sweep: {len(sizes)} sizes in flight")
        outcomes = self.session.launch_batch([Launch(kernel, n, SWEEP_THREADS, sweep=True) for n in sizes])
        failing, detail = [], ""
        for n, outcome in zip(sizes, outcomes, strict=True):
            if outcome.ok:
                continue
            fault = ProbeFault(f"granule sweep at {n} B", outcome.outcome, outcome.detail)
            if fault.sticky:
                raise fault
            if n < over:
                failing.append(n)
                detail = detail or f"{n} B: {outcome.outcome.value} ({outcome.detail})"
        last = outcomes[-1]
        return GranuleSweep(granule_bytes, ceiling_bytes, len(sizes), tuple(failing), detail,
                            over_ceiling_failed=last.outcome in TOO_BIG)

    def leftovers(self, ceiling_bytes: int) -> Leftovers:
        """What an earlier process, then an earlier kernel of this one, left in shared memory for a kernel
        that reads it without writing it."""
        if self.write_elsewhere is None:
            raise MeasurementError("needs a writer in another process, which this run was not given")
        blocks, dynamic = self._blocks(), word_bytes(ceiling_bytes)
        nonce = secrets.randbits(64)
        written = self.write_elsewhere(dynamic, blocks, nonce)
        expect(written, "another process writing the leftover pattern", NOTHING_TOO_BIG)
        across = self.session.leftover_read(dynamic, LEFTOVER_THREADS, blocks, nonce)
        expect(across, "reading what another process left", NOTHING_TOO_BIG)
        own = secrets.randbits(64)
        expect(self.session.leftover_write(dynamic, LEFTOVER_THREADS, blocks, own), "writing the leftover pattern",
               NOTHING_TOO_BIG)
        within = self.session.leftover_read(dynamic, LEFTOVER_THREADS, blocks, own)
        expect(within, "reading what this process left", NOTHING_TOO_BIG)
        return Leftovers(dynamic, within.words, within.matching_words, across.words, across.matching_words,
                         writer_sms=len(set(written.sm_ids)), reader_sms=len(set(across.sm_ids)))


# The steps of --level full (plan.py appends them after the standard steps).


def _validation(ctx: StepContext) -> Validation:
    return Validation(ctx.session, ctx.facts.reported.multiprocessor_count, ctx.progress, ctx.write_elsewhere,
                      ctx.config.planted)


@frozen
class SmMarchStep(Step):
    """The march test on every SM at the opt-in ceiling."""

    kind: ClassVar[str] = "sm_march"
    family: ClassVar[type] = Integrity

    def run(self, ctx: StepContext) -> MarchResult:
        """March over every SM's whole dynamic shared memory."""
        return _validation(ctx).march(ctx.prior.require_optin())

    def contribute(self, value: MarchResult) -> tuple[Filled, ...]:
        """The march result."""
        return (MARCH.filled(value),)


@frozen
class GranuleSweepStep(Step):
    """A launch at every allocation-granule multiple up to the opt-in ceiling, and one byte over."""

    kind: ClassVar[str] = "granule_sweep"
    family: ClassVar[type] = Integrity

    def run(self, ctx: StepContext) -> GranuleSweep:
        """Sweep with the measured granularity (the published one below cc 8.0)."""
        return _validation(ctx).granule_sweep(ctx.prior.require_optin(), ctx.prior.granule_bytes)

    def contribute(self, value: GranuleSweep) -> tuple[Filled, ...]:
        """The sweep."""
        return (GRANULE_SWEEP.filled(value),)


@frozen
class LeftoversStep(Step):
    """What an earlier process and an earlier kernel left in shared memory."""

    kind: ClassVar[str] = "leftovers"
    family: ClassVar[type] = Integrity

    def run(self, ctx: StepContext) -> Leftovers:
        """Another process writes and exits; this one reads without writing."""
        return _validation(ctx).leftovers(ctx.prior.require_optin())

    def contribute(self, value: Leftovers) -> tuple[Filled, ...]:
        """The leftovers."""
        return (LEFTOVERS.filled(value),)


VALIDATION_STEPS: tuple[Step, ...] = (SmMarchStep(), GranuleSweepStep(), LeftoversStep())
