"""The experiments: what to probe and how to read the outcome. Talks only to a DeviceSession.

Every ceiling is searched with bounds from galloping (search.py), never from the attribute it is
later compared with. A probe passes only when the kernel read back every byte it asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.core.hardware import MAX_THREADS_PER_BLOCK, STATIC_SMEM_COMPILE_CAP_BYTES
from bisect_smem.core.levels import DEFAULT_LEVEL, REFERENCE_THREADS, level_rank, split_search_name
from bisect_smem.core.model import Ceiling, StaticSplit
from bisect_smem.core.profiles import ArchProfile, profile_for_cc
from bisect_smem.core.search import DEFAULT_CONFIRM, find_ceiling_batched, probe_bound
from bisect_smem.devices.backends.base import DeviceSession
from bisect_smem.devices.device_info import DeviceInfo
from bisect_smem.devices.probes import TOO_BIG, LaunchOutcome, ProbeKernel
from bisect_smem.experiments.clusters import ClusterExperiments
from bisect_smem.experiments.residency import Limits, ResidencyMeasurement
from bisect_smem.experiments.steps import (
    BlockRegisters,
    CarveoutResult,
    ClusterResult,
    Done,
    ResidencyResult,
    Step,
    StepResult,
    StepValue,
    block_registers,
    granule_bytes,
)
from bisect_smem.experiments.validation import Validation, WriteElsewhere

Progress = Callable[[str], None]

DEFAULT_STATIC_SIZES = (0, 1, 1024, 16 * 1024, 48 * 1024)
DEFAULT_THREADS = (32, 128, 1024)
HARD_CAP_BYTES = 1 << 20  # far above any per-SM capacity published so far (228 KB)


@dataclass(frozen=True)
class MeasureConfig:
    """What to measure. Sizes in bytes."""

    static_sizes: tuple[int, ...] = DEFAULT_STATIC_SIZES
    threads: tuple[int, ...] = DEFAULT_THREADS
    cap_bytes: int = HARD_CAP_BYTES
    confirm: int = DEFAULT_CONFIRM
    residency: bool = True
    carveout: bool = True
    clusters: bool = True
    level: str = DEFAULT_LEVEL

    def __post_init__(self) -> None:
        level_rank(self.level)
        for s in self.static_sizes:
            if not 0 <= s <= STATIC_SMEM_COMPILE_CAP_BYTES:
                raise ValueError(f"static bytes must be in 0..{STATIC_SMEM_COMPILE_CAP_BYTES} (got {s})")
        for t in self.threads:
            if not 1 <= t <= MAX_THREADS_PER_BLOCK:
                raise ValueError(f"threads must be in 1..{MAX_THREADS_PER_BLOCK} (got {t})")
        if self.cap_bytes < 1:
            raise ValueError(f"cap bytes must be >= 1 (got {self.cap_bytes})")
        if self.confirm < 1:
            raise ValueError(f"confirm must be >= 1 (got {self.confirm})")
        if 0 not in self.static_sizes:
            raise ValueError("static sizes must include 0 (the reference kernel)")
        if REFERENCE_THREADS not in self.threads:
            raise ValueError(f"threads must include {REFERENCE_THREADS} (the reference block size)")


def fits(outcome: LaunchOutcome, what: str) -> bool:
    """True for a verified success, False for a "too big" error; anything else is a fault."""
    if outcome.ok:
        return True
    if outcome.outcome in TOO_BIG:
        return False
    raise ProbeFault(what, outcome.outcome, outcome.detail)


class DeviceMeasurement:
    """The experiments on one device. Each ``measure_*`` returns its result and records its probes."""

    def __init__(self, session: DeviceSession, config: MeasureConfig, progress: Progress | None = None,
                 reported: dict[str, Any] | None = None, profile: ArchProfile | None = None,
                 write_elsewhere: WriteElsewhere | None = None) -> None:
        """``reported`` (driver attributes by key) and ``profile`` only feed formulas and labels;
        ``write_elsewhere`` runs the leftover writer in another process (validation.py)."""
        self.session = session
        self.config = config
        self.reported = reported or {}
        self.profile = profile
        self.progress = progress or (lambda _text: None)
        self.searches: dict[str, Ceiling] = {}
        self.residency_runs = ResidencyMeasurement(session, self.progress)
        self.validation = Validation(session, self.reported.get("multiprocessor_count"), self.progress,
                                     write_elsewhere)
        self.cluster_runs = ClusterExperiments(session, self.reported.get("multiprocessor_count") or 1,
                                               self.reported.get("max_blocks_per_multiprocessor") or 32, self.progress)

    @classmethod
    def for_device(cls, session: DeviceSession, info: DeviceInfo, config: MeasureConfig,
                   progress: Progress | None = None, write_elsewhere: WriteElsewhere | None = None) -> DeviceMeasurement:
        """The experiments on an opened device, fed by what it reports and its published row."""
        return cls(session, config, progress, info.reported.driver, profile_for_cc(info.identity.compute_capability),
                   write_elsewhere)

    def _search(self, name: str, predicate: Callable[[list[int]], list[bool]]) -> Ceiling:
        """Run one ceiling search, several sizes per round; an unexpected probe class becomes the
        ceiling's error, not a number."""
        count = 0

        def counted(sizes: list[int]) -> list[bool]:
            nonlocal count
            for n in sizes:
                count += 1
                self.progress(f"{name}: probe {count} at {n} B")
            return predicate(sizes)

        bound = probe_bound(self.config.cap_bytes, self.config.confirm)
        try:
            result = find_ceiling_batched(counted, cap_bytes=self.config.cap_bytes, confirm=self.config.confirm)
        except ProbeFault as fault:
            if fault.sticky:
                raise
            ceiling = Ceiling(None, count, bound, error=str(fault))
        else:
            ceiling = Ceiling(result.ceiling_bytes, result.probes, bound, result.at_cap, result.unstable_range,
                              result.non_monotone_at, rounds=result.rounds)
        self.searches[name] = ceiling
        return ceiling

    def measure_default_ceiling(self) -> Ceiling:
        """The largest dynamic size that launches on a function whose attribute was never raised."""
        kernel = ProbeKernel(0, opt_in=False)
        ceiling = self._search("default_dynamic_ceiling", lambda sizes: [
            fits(got, f"default launch of {n} B")
            for n, got in zip(sizes, self.session.launch_many(kernel, sizes, REFERENCE_THREADS), strict=True)])
        # The default function's attribute is never raised, so this is the API's answer before opt-in.
        return replace(ceiling, api_available_dynamic_bytes=self.session.available_dynamic_smem(kernel, REFERENCE_THREADS))

    def measure_attribute_accept_ceiling(self) -> Ceiling:
        """The largest value cudaFuncSetAttribute(MaxDynamicSharedMemorySize) accepts."""
        kernel = ProbeKernel(0, opt_in=True)
        return self._search("attribute_accept_ceiling", lambda sizes: [
            fits(self.session.set_max_dynamic(kernel, n), f"attribute set to {n} B") for n in sizes])

    def measure_static_split(self, static_bytes: int, threads: int) -> StaticSplit:
        """The opt-in dynamic ceiling beside ``static_bytes`` of static shared memory."""
        kernel = ProbeKernel(static_bytes, opt_in=True)
        footprint = self.static_footprint(kernel, threads)

        def predicate(sizes: list[int]) -> list[bool]:
            # The attribute is set to each size just before its launch: a refused attribute is "too big".
            launched = self.session.launch_many(kernel, sizes, threads, raise_limit=True)
            return [fits(got, f"attribute set to and opt-in launch of {n} B + {static_bytes} B static, "
                              f"{threads} threads") for n, got in zip(sizes, launched, strict=True)]

        ceiling = self._search(split_search_name(static_bytes, threads), predicate)
        return StaticSplit(static_bytes, threads, ceiling.ceiling_bytes, ceiling.probes, footprint,
                           self.available_after_optin(kernel, threads, ceiling.ceiling_bytes))

    def available_after_optin(self, kernel: ProbeKernel, threads: int, ceiling_bytes: int | None) -> int | None:
        """cuOccupancyAvailableDynamicSMemPerBlock at one block per SM with the attribute raised to the
        measured ceiling: the answer is capped by the attribute, so it is asked after opt-in."""
        if ceiling_bytes is None:
            return None
        if not self.session.set_max_dynamic(kernel, ceiling_bytes).ok:
            return None
        return self.session.available_dynamic_smem(kernel, threads)

    def static_footprint(self, kernel: ProbeKernel, threads: int) -> int | None:
        """How many bytes the static data takes before the dynamic array, as the kernel sees addresses."""
        bases = []
        for k in (ProbeKernel(0, kernel.opt_in), kernel):
            got = self.session.launch(k, 0, threads)
            fits(got, f"launch with {k.static_bytes} B static and no dynamic memory")
            bases.append(got.dynamic_base_offset_bytes)
        if None in bases:
            return None
        return bases[1] - bases[0]

    def measure_block_registers(self, optin_ceiling: int | None) -> BlockRegisters:
        """Reserved bytes and allocation granularity as a running block sees them in PTX registers.

        The granularity is %total_smem_size for a 1-byte request, confirmed by the step after it.
        """
        kernel = ProbeKernel(0, opt_in=True)
        fits(self.session.set_max_dynamic(kernel, 4096), "attribute set to 4096 B")
        one = self.session.launch(kernel, 1, REFERENCE_THREADS)
        fits(one, "launch of 1 B")
        regs = one.registers
        if regs is None or regs.total_smem_size is None:
            return BlockRegisters(None, None, None)  # the registers need cc 8.0 or newer
        granule = regs.total_smem_size
        for n, expect in ((granule, granule), (granule + 1, 2 * granule)):
            got = self.session.launch(kernel, n, REFERENCE_THREADS)
            fits(got, f"launch of {n} B")
            seen = got.registers.total_smem_size if got.registers else None
            if seen != expect:
                raise MeasurementError(f"%total_smem_size for {n} B was {seen}, expected {expect}: "
                                       f"no granularity of {granule} B")
        at_ceiling = None
        if optin_ceiling is not None:
            fits(self.session.set_max_dynamic(kernel, optin_ceiling), f"attribute set to {optin_ceiling} B")
            launched = self.session.launch(kernel, optin_ceiling, REFERENCE_THREADS)
            fits(launched, f"launch at the ceiling, {optin_ceiling} B")
            at_ceiling = dict(vars(launched.registers)) if launched.registers else None
        return BlockRegisters(regs.reserved_bytes, granule, at_ceiling)

    def measure_residency(self, optin: int, done: Done) -> ResidencyResult:
        """The blocks-per-SM staircase up to the opt-in ceiling, and the per-SM capacity it proves."""
        limits = self.limits(done)
        steps = self.residency_runs.staircase(optin, limits)
        return ResidencyResult(tuple(steps), ResidencyMeasurement.smem_per_sm(steps, limits))

    def measure_carveout(self, optin: int, done: Done) -> CarveoutResult:
        """Residency under every carveout preference, and the carveout each gives."""
        published = self.profile.carveout_kib if self.profile else None
        return CarveoutResult(tuple(self.residency_runs.carveout(optin, published, self.limits(done))))

    def measure_clusters(self, optin: int, done: Done) -> ClusterResult:
        """Thread block clusters, or why they cannot be measured here."""
        reason = self.session.cluster_support()
        if reason is not None:
            return ClusterResult(skipped=reason)
        return ClusterResult(tuple(self.cluster_runs.measure(optin, granule_bytes(done, self.profile))))

    def run_step(self, step: Step, done: Done) -> StepResult:
        """Run one step. A sticky fault propagates (only a new process recovers); any other error becomes
        the step's error, and the quantities it would have measured stay None."""
        before = dict(self.searches)
        probes_before = self.extra_probes()
        start = time.perf_counter()
        value: StepValue | None = None
        error = None
        try:
            value = step.run(self, done)
        except ProbeFault as fault:
            if fault.sticky:
                raise
            error = f"{step.key}: {fault}"
        except MeasurementError as exc:
            error = f"{step.key}: {exc}"
        searches = {k: v for k, v in self.searches.items() if before.get(k) is not v}
        extra = {k: v - probes_before.get(k, 0) for k, v in self.extra_probes().items() if v - probes_before.get(k, 0)}
        return StepResult(step, value, searches, extra, error, round(time.perf_counter() - start, 6))

    def extra_probes(self) -> dict[str, int]:
        """Probes that are not ceiling searches, by experiment."""
        return {"residency_and_carveout": self.residency_runs.probes, "clusters": self.cluster_runs.probes}

    def limits(self, done: Done) -> Limits:
        """The residency formula's inputs: reported per-SM limits and the measured block footprint."""
        reserved = block_registers(done).reserved_bytes
        if reserved is None:
            reserved = self.reported.get("reserved_shared_memory_per_block_bytes") or 0
        return Limits(
            smem_per_sm_bytes=self.reported.get("max_shared_memory_per_multiprocessor_bytes"),
            max_blocks_per_sm=self.reported.get("max_blocks_per_multiprocessor"),
            max_threads_per_sm=self.reported.get("max_threads_per_multiprocessor"),
            granule_bytes=granule_bytes(done, self.profile), reserved_bytes=reserved)

    def each_step(self, steps: list[Step], done: Done,
                  starting: Callable[[Step], None] = lambda _step: None) -> Iterator[tuple[Step, StepResult]]:
        """Run the steps not in ``done``, in order, each after ``starting(step)``; each result is added to
        ``done`` and yielded. A sticky fault propagates: the caller decides what a lost context ends."""
        for step in steps:
            if step in done:
                continue
            starting(step)
            done[step] = result = self.run_step(step, done)
            yield step, result

    def run(self, steps: list[Step]) -> tuple[Done, str | None]:
        """Every step in this process, in order, with no restarts: a sticky fault ends the run, and is
        returned as the error beside the steps done before it."""
        done: Done = {}
        started: list[Step] = []
        try:
            for _step_and_result in self.each_step(steps, done, started.append):
                pass
        except ProbeFault as fault:
            return done, f"{started[-1].key}: {fault}; the context is lost, and an inline run cannot restart (drop --inline)"
        return done, None
