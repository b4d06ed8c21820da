"""The experiments: what to probe and how to read the outcome. Talks only to a DeviceSession.

Every ceiling is searched with bounds from galloping (search.py), never from the attribute it is
later compared with. A probe passes only when the kernel read back every byte it asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from bisect_smem.backends.base import STICKY, TOO_BIG, DeviceSession, LaunchOutcome, ProbeKernel
from bisect_smem.clusters import ClusterExperiments
from bisect_smem.errors import MeasurementError
from bisect_smem.model import Ceiling, Measured, StaticSplit
from bisect_smem.profiles import STATIC_SMEM_COMPILE_CAP_BYTES, ArchProfile
from bisect_smem.residency import Limits, ResidencyMeasurement
from bisect_smem.search import find_ceiling, probe_bound

Progress = Callable[[str], None]

DEFAULT_STATIC_SIZES = (0, 1, 1024, 16 * 1024, 48 * 1024)
DEFAULT_THREADS = (32, 128, 1024)
HARD_CAP_BYTES = 1 << 20  # far above any per-SM capacity published so far (228 KB)
REFERENCE_THREADS = 128


@dataclass(frozen=True)
class MeasureConfig:
    """What to measure. Sizes in bytes."""

    static_sizes: tuple[int, ...] = DEFAULT_STATIC_SIZES
    threads: tuple[int, ...] = DEFAULT_THREADS
    cap_bytes: int = HARD_CAP_BYTES
    confirm: int = 2
    residency: bool = True
    carveout: bool = True
    clusters: bool = True

    def __post_init__(self) -> None:
        for s in self.static_sizes:
            if not 0 <= s <= STATIC_SMEM_COMPILE_CAP_BYTES:
                raise ValueError(f"static bytes must be in 0..{STATIC_SMEM_COMPILE_CAP_BYTES} (got {s})")
        for t in self.threads:
            if not 1 <= t <= 1024:
                raise ValueError(f"threads must be in 1..1024 (got {t})")
        if self.cap_bytes < 1:
            raise ValueError(f"cap bytes must be >= 1 (got {self.cap_bytes})")
        if self.confirm < 1:
            raise ValueError(f"confirm must be >= 1 (got {self.confirm})")
        if 0 not in self.static_sizes:
            raise ValueError("static sizes must include 0 (the reference kernel)")
        if REFERENCE_THREADS not in self.threads:
            raise ValueError(f"threads must include {REFERENCE_THREADS} (the reference block size)")


class ProbeFault(MeasurementError):
    """A probe ended in a class that is neither success nor "too big"."""

    def __init__(self, what: str, outcome: LaunchOutcome) -> None:
        super().__init__(f"{what}: unexpected {outcome.outcome.value} ({outcome.detail})")
        self.outcome = outcome

    @property
    def sticky(self) -> bool:
        return self.outcome.outcome in STICKY


def fits(outcome: LaunchOutcome, what: str) -> bool:
    """True for a verified success, False for a "too big" error; anything else is a fault."""
    if outcome.ok:
        return True
    if outcome.outcome in TOO_BIG:
        return False
    raise ProbeFault(what, outcome)


class DeviceMeasurement:
    """The experiments on one device. Each ``measure_*`` returns its result and records its probes."""

    def __init__(self, session: DeviceSession, config: MeasureConfig, progress: Progress | None = None,
                 reported: dict[str, Any] | None = None, profile: ArchProfile | None = None) -> None:
        """``reported`` (driver attributes by key) and ``profile`` only feed formulas and labels."""
        self.session = session
        self.config = config
        self.reported = reported or {}
        self.profile = profile
        self.progress = progress or (lambda _text: None)
        self.searches: dict[str, Ceiling] = {}
        self.timings_s: dict[str, float] = {}

    def _search(self, name: str, predicate: Callable[[int], bool]) -> Ceiling:
        """Run one ceiling search; an unexpected probe class becomes the ceiling's error, not a number."""
        count = 0

        def counted(n: int) -> bool:
            nonlocal count
            count += 1
            self.progress(f"{name}: probe {count} at {n} B")
            return predicate(n)

        bound = probe_bound(self.config.cap_bytes, self.config.confirm)
        try:
            result = find_ceiling(counted, cap_bytes=self.config.cap_bytes, confirm=self.config.confirm)
        except ProbeFault as fault:
            if fault.sticky:
                raise
            ceiling = Ceiling(None, count, bound, error=str(fault))
        else:
            ceiling = Ceiling(result.ceiling_bytes, result.probes, bound, result.at_cap, result.unstable_range,
                              result.non_monotone_at)
        self.searches[name] = ceiling
        return ceiling

    def measure_default_ceiling(self) -> Ceiling:
        """The largest dynamic size that launches on a function whose attribute was never raised."""
        kernel = ProbeKernel(0, opt_in=False)
        return self._search("default_dynamic_ceiling", lambda n: fits(
            self.session.launch(kernel, n, REFERENCE_THREADS), f"default launch of {n} B"))

    def measure_attribute_accept_ceiling(self) -> Ceiling:
        """The largest value cudaFuncSetAttribute(MaxDynamicSharedMemorySize) accepts."""
        kernel = ProbeKernel(0, opt_in=True)
        return self._search("attribute_accept_ceiling", lambda n: fits(
            self.session.set_max_dynamic(kernel, n), f"attribute set to {n} B"))

    def measure_static_split(self, static_bytes: int, threads: int) -> StaticSplit:
        """The opt-in dynamic ceiling beside ``static_bytes`` of static shared memory."""
        kernel = ProbeKernel(static_bytes, opt_in=True)
        footprint = self.static_footprint(kernel, threads)

        def predicate(n: int) -> bool:
            if not fits(self.session.set_max_dynamic(kernel, n), f"attribute set to {n} B ({static_bytes} B static)"):
                return False
            return fits(self.session.launch(kernel, n, threads),
                        f"opt-in launch of {n} B + {static_bytes} B static, {threads} threads")

        ceiling = self._search(f"optin_dynamic_ceiling/static={static_bytes}/threads={threads}", predicate)
        return StaticSplit(static_bytes, threads, ceiling.ceiling_bytes, ceiling.probes, footprint)

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

    def measure_block_registers(self, optin_ceiling: int | None) -> tuple[int | None, int | None, dict[str, Any] | None]:
        """Reserved bytes and allocation granularity as a running block sees them in PTX registers.

        The granularity is %total_smem_size for a 1-byte request, confirmed by the step after it.
        Returns (reserved, granularity, registers at the opt-in ceiling).
        """
        kernel = ProbeKernel(0, opt_in=True)
        fits(self.session.set_max_dynamic(kernel, 4096), "attribute set to 4096 B")
        one = self.session.launch(kernel, 1, REFERENCE_THREADS)
        fits(one, "launch of 1 B")
        regs = one.registers
        if regs is None or regs.total_smem_size is None:
            return None, None, None  # the registers need cc 8.0 or newer
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
        return regs.reserved_bytes, granule, at_ceiling

    def run(self) -> tuple[Measured, list[str]]:
        """Every experiment; a failed one leaves its quantity None and adds an error line."""
        errors: list[str] = []
        measured = Measured()

        def timed(name: str, fn: Callable[[], Any]) -> Any:
            start = time.perf_counter()
            try:
                return fn()
            except ProbeFault as fault:
                if fault.sticky:
                    raise
                errors.append(f"{name}: {fault}")
            except MeasurementError as exc:
                errors.append(f"{name}: {exc}")
            finally:
                self.timings_s[name] = round(time.perf_counter() - start, 6)
            return None

        default = timed("default_ceiling", self.measure_default_ceiling)
        accept = timed("attribute_accept_ceiling", self.measure_attribute_accept_ceiling)
        splits = timed("static_splits", lambda: tuple(
            self.measure_static_split(s, t) for s in self.config.static_sizes for t in self.config.threads)) or ()
        reference = next((s for s in splits if s.static_bytes == 0 and s.threads == REFERENCE_THREADS), None)
        optin = reference.dynamic_ceiling_bytes if reference else None
        block = timed("block_registers", lambda: self.measure_block_registers(optin)) or (None, None, None)
        limits = Limits(
            smem_per_sm_bytes=self.reported.get("max_shared_memory_per_multiprocessor_bytes"),
            max_blocks_per_sm=self.reported.get("max_blocks_per_multiprocessor"),
            max_threads_per_sm=self.reported.get("max_threads_per_multiprocessor"),
            granule_bytes=block[1] or (self.profile.allocation_granularity_bytes if self.profile else 1),
            reserved_bytes=block[0] if block[0] is not None else (
                self.reported.get("reserved_shared_memory_per_block_bytes") or 0))
        residency = ResidencyMeasurement(self.session, limits, self.progress)
        steps = (timed("residency", lambda: residency.staircase(optin)) or []) \
            if self.config.residency and optin is not None else []
        carveout = (timed("carveout", lambda: residency.carveout(
            optin, self.profile.carveout_kib if self.profile else None)) or []) \
            if self.config.carveout and optin is not None else []
        clusters: list = []
        clusters_skipped = None
        cluster_runs = ClusterExperiments(self.session, self.reported.get("multiprocessor_count") or 1,
                                          self.reported.get("max_blocks_per_multiprocessor") or 32, self.progress)
        if self.config.clusters and optin is not None:
            clusters_skipped = self.session.cluster_support()
            if clusters_skipped is None:
                clusters = timed("clusters", lambda: cluster_runs.measure(optin, limits.granule_bytes)) or []
        probes = {name: c.probes for name, c in self.searches.items()}
        if residency.probes:
            probes["residency_and_carveout"] = residency.probes
        if cluster_runs.probes:
            probes["clusters"] = cluster_runs.probes
        measured = replace(
            measured,
            default_dynamic_ceiling_bytes=default.ceiling_bytes if default else None,
            attribute_accept_ceiling_bytes=accept.ceiling_bytes if accept else None,
            optin_dynamic_ceiling_bytes=optin,
            static_splits=splits,
            reserved_bytes=block[0],
            allocation_granularity_bytes=block[1],
            registers_at_ceiling=block[2],
            residency=tuple(steps),
            smem_per_sm_bytes=ResidencyMeasurement.smem_per_sm(steps, limits) if steps else None,
            carveout=tuple(carveout),
            clusters=tuple(clusters),
            clusters_skipped=clusters_skipped,
            probes=probes,
            searches=dict(self.searches),
            timings_s=dict(self.timings_s),
        )
        return measured, errors
