"""Residency experiments: the blocks-per-SM staircase, the per-SM capacity, and carveout steps.

Residency is what the GPU did: blocks counted per SM while they were held there at the same time.
The occupancy API and the per-SM attribute are predictions; they are recorded beside it, never used
to steer a search. Steps are found by bisection on residency, trying granule boundaries first and
confirming each step to the byte.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import ClassVar

from bisect_smem.core.errors import MeasurementError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.levels import STAIRCASE_THREADS
from bisect_smem.core.model import CarveoutPoint, ResidencyStep
from bisect_smem.core.quantities import PER_SM
from bisect_smem.core.records import CARVEOUT, RESIDENCY, Filled
from bisect_smem.core.search import search_together
from bisect_smem.devices.backends.base import DeviceSession
from bisect_smem.devices.backends.families import Carveout, Residency
from bisect_smem.devices.probes import ResidencyOutcome, ResidencyProbe
from bisect_smem.experiments.context import Limits, StepContext
from bisect_smem.experiments.expect import NOTHING_TOO_BIG, expect
from bisect_smem.experiments.steps import Step

THREAD_LIMIT_THREADS = (1024, 96)  # extra plateaus where the thread limit binds
HOLD_NS = 20_000  # long enough for every co-resident block to overlap, short enough to stay cheap
CARVEOUT_PERCENTS = (-1, *range(0, 101))
PROBES = "residency_and_carveout"  # the key of these experiments' probes in Measured.probes


def split_point(lo: int, hi: int, granule: int) -> int:
    """A size strictly between lo and hi: a granule boundary while one is there, then lo + 1 (where a
    step sits if the granule is right), then the byte midpoint."""
    if hi - lo <= granule and lo % granule == 0 and lo + 1 < hi:
        return lo + 1
    mid = (lo + hi) // 2
    for aligned in (mid - mid % granule, mid - mid % granule + granule):
        if lo < aligned < hi:
            return aligned
    return mid


class ResidencyMeasurement:
    """The residency experiments on one device. Their probes go in rounds: the probes of a round run one
    after another on the device and are read with one synchronisation (``blocks_many``)."""

    def __init__(self, session: DeviceSession, progress: Callable[[str], None], hold_ns: int = HOLD_NS,
                 probes: int = 0) -> None:
        """``probes``: how many this device's residency experiments made before (progress counts on)."""
        self.session = session
        self.progress = progress
        self.hold_ns = hold_ns
        self.probes = probes
        self.rounds = 0

    def blocks_many(self, asked: Sequence[tuple[int, int, int | None]]) -> list[ResidencyOutcome]:
        """One round of residency probes, each (dynamic bytes, threads, carveout percent or None); a
        too-big answer or a fault is an error, not a count."""
        if not asked:
            return []
        self.probes += len(asked)
        self.rounds += 1
        whats = [f"residency at {n} B, {threads} threads" + (f", carveout {percent}%" if percent is not None else "")
                 for n, threads, percent in asked]
        self.progress(f"{whats[-1]} (probe {self.probes})")
        outcomes = self.session.residency_batch([ResidencyProbe(n, threads, self.hold_ns, percent)
                                                 for n, threads, percent in asked])
        for what, got in zip(whats, outcomes, strict=True):
            if not expect(got, what):
                raise MeasurementError(f"{what}: too big, {got.outcome.value} ({got.detail})")
        return outcomes

    def blocks(self, dynamic_bytes: int, threads: int, carveout_percent: int | None = None) -> ResidencyOutcome:
        """One residency probe, a round of its own."""
        return self.blocks_many([(dynamic_bytes, threads, carveout_percent)])[0]

    @staticmethod
    def _entry(dynamic_bytes: int, threads: int, got: ResidencyOutcome, limits: Limits) -> ResidencyStep:
        formula, limited_by = limits.formula(dynamic_bytes, threads)
        return ResidencyStep(dynamic_bytes, threads, got.blocks_per_sm_min, got.blocks_per_sm_max,
                             got.api_blocks_per_sm, formula, limited_by)

    def staircase(self, ceiling_bytes: int, limits: Limits) -> list[ResidencyStep]:
        """Every size in [0, ceiling] where the blocks per SM drop, with the plateau that starts there;
        ``limits`` give each step's formula and the granule its search tries first. The stretches still
        open are split all at once: a round probes the split point of each, so the staircase takes as many
        rounds as its deepest stretch, and probes the same sizes as splitting them one by one would."""
        seen: dict[int, ResidencyOutcome] = {}
        first = self.blocks_many([(0, STAIRCASE_THREADS, None), (ceiling_bytes, STAIRCASE_THREADS, None),
                                  *((0, t, None) for t in THREAD_LIMIT_THREADS)])
        seen[0], seen[ceiling_bytes] = first[0], first[1]
        extra = first[2:]

        def at(n: int) -> tuple[int, int]:
            return seen[n].blocks_per_sm_min, seen[n].blocks_per_sm_max

        steps, open_stretches = [], [(0, ceiling_bytes)]
        while open_stretches:
            splits = []
            for lo, hi in open_stretches:
                if at(lo) == at(hi):
                    continue  # residency never rises with size, so equal ends mean a flat stretch
                if hi - lo == 1:
                    steps.append(hi)
                    continue
                splits.append((lo, split_point(lo, hi, limits.granule_bytes), hi))
            new = sorted({mid for _, mid, _ in splits} - set(seen))
            seen.update(zip(new, self.blocks_many([(n, STAIRCASE_THREADS, None) for n in new]), strict=True))
            open_stretches = [part for lo, mid, hi in splits for part in ((lo, mid), (mid, hi))]
        entries = [self._entry(n, STAIRCASE_THREADS, seen[n], limits) for n in [0, *sorted(steps)]]
        entries += [self._entry(0, threads, got, limits) for threads, got in zip(THREAD_LIMIT_THREADS, extra,
                                                                                strict=True)]
        return entries

    @staticmethod
    def smem_per_sm(steps: list[ResidencyStep], limits: Limits) -> int | None:
        """Twice the footprint of the largest size at which two blocks still co-reside."""
        staircase = [s for s in steps if s.threads == STAIRCASE_THREADS]
        for prev, step in zip(staircase, staircase[1:], strict=False):
            if prev.blocks_per_sm_min >= 2 and step.blocks_per_sm_max == 1:
                return 2 * limits.footprint(step.dynamic_bytes - 1)
        return None

    def carveout(self, ceiling_bytes: int, published_kib: tuple[int, ...] | None,
                 limits: Limits) -> list[CarveoutPoint]:
        """Residency of fixed-size blocks under each carveout preference, and the size it proves."""
        size = limits.carveout_probe_bytes()
        self.probes += len(CARVEOUT_PERCENTS)
        self.rounds += 1
        self.progress(f"carveout sweep at {size} B ({len(CARVEOUT_PERCENTS)} settings)")
        sweep = self.session.carveout_sweep(size, STAIRCASE_THREADS, self.hold_ns, CARVEOUT_PERCENTS)
        for got in sweep:
            expect(got, f"carveout sweep at {size} B", NOTHING_TOO_BIG)
        results = dict(zip(CARVEOUT_PERCENTS, sweep, strict=True))
        # Settings where the API predicts differently may use different carveouts even where the count
        # at this size is the same, so each (count, prediction) pair gets its own refinement; the
        # refinements are independent, so their probes share rounds.
        firsts: dict[tuple[int, int | None], int] = {}
        for percent, got in results.items():
            firsts.setdefault((got.blocks_per_sm_min, got.api_blocks_per_sm), percent)
        plans = {key: self._capacity_search(key[0], size, ceiling_bytes, limits) for key in firsts}

        def ask(sizes: dict[tuple[int, int | None], list[int]]) -> dict[tuple[int, int | None], list[int]]:
            asked = [(key, n) for key, ns in sizes.items() for n in ns]
            counts = self.blocks_many([(n, STAIRCASE_THREADS, firsts[key]) for key, n in asked])
            answers: dict[tuple[int, int | None], list[int]] = {key: [] for key in sizes}
            for (key, _), got in zip(asked, counts, strict=True):
                answers[key].append(got.blocks_per_sm_min)
            return answers

        ranges = search_together(plans, ask)
        published = sorted(k * 1024 for k in published_kib) if published_kib else []
        points = []
        for percent, got in results.items():
            lo, hi = ranges[(got.blocks_per_sm_min, got.api_blocks_per_sm)]
            inside = [s for s in published if lo <= s < hi]
            points.append(CarveoutPoint(percent, got.blocks_per_sm_min, got.api_blocks_per_sm,
                                        inside[0] if len(inside) == 1 else None, (lo, hi)))
        return points

    @staticmethod
    def _capacity_search(n: int, size: int, ceiling_bytes: int,
                         limits: Limits) -> Generator[list[int], Sequence[int], tuple[int, int]]:
        """[low, high) for the carveout that holds ``n`` blocks, as a plan of rounds (sent the blocks per SM
        at each size it asks): the largest size at which ``n`` still fit bounds it. One block only proves
        that one fit, since the driver grows a carveout to fit one."""
        fp = limits.footprint
        if n <= 1:
            return fp(size), 2 * fp(size)
        lo, hi = size, ceiling_bytes + 1  # n blocks fit at lo; hi stands for "does not"
        while hi - lo > 1:
            mid = split_point(lo, hi, limits.granule_bytes)
            (count,) = yield [mid]
            if count >= n:
                lo = mid
            else:
                hi = mid
        return n * fp(lo), n * fp(lo + 1)


@frozen
class ResidencyResult:
    """The residency staircase and the per-SM capacity it proves."""

    steps: tuple[ResidencyStep, ...]
    smem_per_sm_bytes: int | None


@frozen
class CarveoutResult:
    """Residency under every carveout preference."""

    points: tuple[CarveoutPoint, ...]


def _runs(ctx: StepContext) -> ResidencyMeasurement:
    return ResidencyMeasurement(ctx.session, ctx.progress, probes=ctx.probes[PROBES])


@frozen
class ResidencyStaircase(Step):
    """Blocks resident per SM from 0 B to the opt-in ceiling, and the per-SM capacity."""

    kind: ClassVar[str] = "residency"
    family: ClassVar[type] = Residency

    def run(self, ctx: StepContext) -> ResidencyResult:
        """The blocks-per-SM staircase up to the opt-in ceiling, and the per-SM capacity it proves."""
        optin, limits = ctx.prior.require_optin(), ctx.prior.limits
        runs = _runs(ctx)
        try:
            steps = runs.staircase(optin, limits)
        finally:
            ctx.probes[PROBES] = runs.probes
        return ResidencyResult(tuple(steps), ResidencyMeasurement.smem_per_sm(steps, limits))

    def contribute(self, value: ResidencyResult) -> tuple[Filled, ...]:
        """The staircase and the per-SM capacity."""
        return RESIDENCY.filled(value.steps), PER_SM.filled(value.smem_per_sm_bytes)


@frozen
class CarveoutSweep(Step):
    """Residency under every carveout preference."""

    kind: ClassVar[str] = "carveout"
    family: ClassVar[type] = Carveout

    def run(self, ctx: StepContext) -> CarveoutResult:
        """Residency under every carveout preference, and the carveout each gives."""
        optin = ctx.prior.require_optin()
        published = ctx.facts.profile.carveout_kib if ctx.facts.profile else None
        runs = _runs(ctx)
        try:
            return CarveoutResult(tuple(runs.carveout(optin, published, ctx.prior.limits)))
        finally:
            ctx.probes[PROBES] = runs.probes

    def contribute(self, value: CarveoutResult) -> tuple[Filled, ...]:
        """The carveout points."""
        return (CARVEOUT.filled(value.points),)
