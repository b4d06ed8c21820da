"""The ceilings: the default dynamic ceiling, the attribute's accept ceiling, the opt-in ceiling beside
each static size and block size (the static splits), and the PTX registers of running blocks (reserved
bytes and allocation granularity). The quick level is these steps.

Every ceiling is searched with bounds from galloping (core/search.py), never from the attribute it is
later compared with. A probe passes only when the kernel read back every byte it asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from bisect_smem.core.errors import MeasurementError, ProbeFault
from bisect_smem.core.frozen import frozen
from bisect_smem.core.levels import REFERENCE_THREADS, is_reference_split, split_search_name
from bisect_smem.core.model import Ceiling, StaticSplit
from bisect_smem.core.quantities import (
    ATTRIBUTE_CEILING,
    DEFAULT_API,
    DEFAULT_CEILING,
    GRANULARITY,
    OPTIN_CEILING,
    RESERVED,
)
from bisect_smem.core.records import REGISTERS, STATIC_SPLITS, Filled
from bisect_smem.devices.probes import Launch, ProbeKernel
from bisect_smem.experiments.context import StepContext
from bisect_smem.experiments.expect import NOTHING_TOO_BIG, expect
from bisect_smem.experiments.rounds import LaunchSearch, search_launches
from bisect_smem.experiments.steps import Step


@frozen
class DefaultCeiling(Step):
    """The largest dynamic size that launches without opt-in."""

    kind: ClassVar[str] = "default_ceiling"

    def run(self, ctx: StepContext) -> Ceiling:
        """The largest dynamic size that launches on a function whose attribute was never raised."""
        kernel = ProbeKernel(0, opt_in=False)
        (ceiling,) = search_launches([(ctx, LaunchSearch("default_dynamic_ceiling", kernel, REFERENCE_THREADS, False,
                                                         "default launch of {n} B"))])
        # The default function's attribute is never raised, so this is the API's answer before opt-in.
        return replace(ceiling, api_available_dynamic_bytes=ctx.session.available_dynamic_smem(kernel,
                                                                                               REFERENCE_THREADS))

    def contribute(self, value: Ceiling) -> tuple[Filled, ...]:
        """The default ceiling, and what cuOccupancyAvailableDynamicSMemPerBlock says beside it."""
        return DEFAULT_CEILING.filled(value.ceiling_bytes), DEFAULT_API.filled(value.api_available_dynamic_bytes)


@frozen
class AttributeAcceptCeiling(Step):
    """The largest value cudaFuncSetAttribute(MaxDynamicSharedMemorySize) accepts."""

    kind: ClassVar[str] = "attribute_accept_ceiling"

    def run(self, ctx: StepContext) -> Ceiling:
        """Search the attribute's ceiling."""
        kernel = ProbeKernel(0, opt_in=True)
        return ctx.search("attribute_accept_ceiling", lambda sizes: [
            expect(ctx.session.set_max_dynamic(kernel, n), f"attribute set to {n} B") for n in sizes])

    def contribute(self, value: Ceiling) -> tuple[Filled, ...]:
        """The attribute's ceiling."""
        return (ATTRIBUTE_CEILING.filled(value.ceiling_bytes),)


@frozen
class StaticSplitStep(Step):
    """The opt-in dynamic ceiling beside ``static_bytes`` of static data, in blocks of ``threads``. The
    splits of a device run together: their searches share rounds (rounds.py)."""

    static_bytes: int
    threads: int
    kind: ClassVar[str] = "static_split"
    timing_name: ClassVar[str | None] = "static_splits"
    group: ClassVar[str | None] = "static_splits"

    @property
    def key(self) -> str:
        """``static_split:<static bytes>:<threads>``."""
        return f"{self.kind}:{self.static_bytes}:{self.threads}"

    @property
    def is_reference(self) -> bool:
        """The reference split (core/levels.py) is the opt-in ceiling the later steps build on."""
        return is_reference_split(self.static_bytes, self.threads)

    def run(self, ctx: StepContext) -> StaticSplit:
        """Search the opt-in ceiling beside the static data."""
        (value,) = self.run_group([self], [ctx])
        if isinstance(value, Exception):
            raise value
        return value

    @classmethod
    def run_group(cls, steps: Sequence[Step], contexts: Sequence[StepContext]) -> list[Any]:
        """Every split's static footprint (one round), then their ceilings in shared rounds; each split's
        value, or the error that is its own (a sticky fault propagates: it ends them all)."""
        splits = [s for s in steps if isinstance(s, StaticSplitStep)]
        footprints = static_footprints(contexts[0], splits)
        searches = [(ctx, LaunchSearch(split_search_name(s.static_bytes, s.threads), ProbeKernel(s.static_bytes, True),
                                       s.threads, True, f"attribute set to and opt-in launch of {{n}} B + "
                                                        f"{s.static_bytes} B static, {s.threads} threads"))
                    for s, ctx in zip(splits, contexts, strict=True)]
        ceilings = search_launches([pair for pair, fp in zip(searches, footprints, strict=True)
                                    if not isinstance(fp, Exception)])
        found = iter(ceilings)
        values: list[Any] = []
        for s, ctx, footprint in zip(splits, contexts, footprints, strict=True):
            if isinstance(footprint, Exception):
                values.append(footprint)
                continue
            ceiling = next(found)
            values.append(StaticSplit(s.static_bytes, s.threads, ceiling.ceiling_bytes, ceiling.probes, footprint,
                                      available_after_optin(ctx, ProbeKernel(s.static_bytes, True), s.threads,
                                                            ceiling.ceiling_bytes)))
        return values

    def contribute(self, value: StaticSplit) -> tuple[Filled, ...]:
        """The split, and the opt-in ceiling where this is the reference split."""
        split = STATIC_SPLITS.filled((value,))
        return (split, OPTIN_CEILING.filled(value.dynamic_ceiling_bytes)) if self.is_reference else (split,)


def available_after_optin(ctx: StepContext, kernel: ProbeKernel, threads: int, ceiling_bytes: int | None) -> int | None:
    """cuOccupancyAvailableDynamicSMemPerBlock at one block per SM with the attribute raised to the
    measured ceiling: the answer is capped by the attribute, so it is asked after opt-in."""
    if ceiling_bytes is None:
        return None
    if not ctx.session.set_max_dynamic(kernel, ceiling_bytes).ok:
        return None
    return ctx.session.available_dynamic_smem(kernel, threads)


def static_footprints(ctx: StepContext, splits: Sequence[StaticSplitStep]) -> list[int | None | ProbeFault]:
    """How many bytes each split's static data takes before the dynamic array, as the kernel sees
    addresses (None where the backend cannot tell): one round of launches with no dynamic memory, with
    and without the static data. A launch that does not run is that split's fault (a sticky one propagates)."""
    kernels = sorted({(k, s.threads) for s in splits for k in (0, s.static_bytes)})
    outcomes = ctx.session.launch_batch([Launch(ProbeKernel(k, True), 0, t) for k, t in kernels])
    seen = dict(zip(kernels, outcomes, strict=True))
    footprints: list[int | None | ProbeFault] = []
    for s in splits:
        try:
            bases = []
            for k in (0, s.static_bytes):
                expect(seen[(k, s.threads)], f"launch with {k} B static and no dynamic memory")
                bases.append(seen[(k, s.threads)].dynamic_base_offset_bytes)
        except ProbeFault as fault:
            if fault.sticky:
                raise
            footprints.append(fault)
            continue
        footprints.append(None if None in bases else bases[1] - bases[0])
    return footprints


@frozen
class BlockRegisters:
    """Reserved bytes and allocation granularity as a running block reads them (None below cc 8.0)."""

    reserved_bytes: int | None
    granule_bytes: int | None
    at_ceiling: dict[str, int | None] | None


@frozen
class BlockRegistersStep(Step):
    """Reserved bytes and granularity from the PTX registers, and the registers at the opt-in ceiling."""

    kind: ClassVar[str] = "block_registers"

    def run(self, ctx: StepContext) -> BlockRegisters:
        """Reserved bytes and allocation granularity as a running block sees them in PTX registers.

        The granularity is %total_smem_size for a 1-byte request, confirmed by the step after it.
        """
        session, kernel = ctx.session, ProbeKernel(0, opt_in=True)
        # A device that offers less than 4096 B refuses the attribute, and the launches below still run without
        # it. Those launches are a granule or two: one that fails, whatever the CUDA error, is a fault of this
        # step, never "too big" (which read as "no registers, below cc 8.0" and passed).
        expect(session.set_max_dynamic(kernel, 4096), "attribute set to 4096 B")
        one = session.launch(kernel, 1, REFERENCE_THREADS)
        expect(one, "launch of 1 B", NOTHING_TOO_BIG)
        regs = one.registers
        if regs is None or regs.total_smem_size is None:
            return BlockRegisters(None, None, None)  # the registers need cc 8.0 or newer
        granule = regs.total_smem_size
        for n, wanted in ((granule, granule), (granule + 1, 2 * granule)):
            got = session.launch(kernel, n, REFERENCE_THREADS)
            expect(got, f"launch of {n} B", NOTHING_TOO_BIG)
            seen = got.registers.total_smem_size if got.registers else None
            if seen != wanted:
                raise MeasurementError(f"%total_smem_size for {n} B was {seen}, expected {wanted}: "
                                       f"no granularity of {granule} B")
        return BlockRegisters(regs.reserved_bytes, granule, registers_at(ctx, kernel,
                                                                         ctx.earlier.optin_dynamic_ceiling_bytes))

    def contribute(self, value: BlockRegisters) -> tuple[Filled, ...]:
        """Reserved bytes, granularity and the registers at the ceiling."""
        return (RESERVED.filled(value.reserved_bytes), GRANULARITY.filled(value.granule_bytes),
                REGISTERS.filled(value.at_ceiling))


def registers_at(ctx: StepContext, kernel: ProbeKernel, optin_ceiling: int | None) -> dict[str, int | None] | None:
    """The PTX registers of a block at the opt-in ceiling (None where the ceiling was not measured)."""
    if optin_ceiling is None:
        return None
    expect(ctx.session.set_max_dynamic(kernel, optin_ceiling), f"attribute set to {optin_ceiling} B")
    launched = ctx.session.launch(kernel, optin_ceiling, REFERENCE_THREADS)
    expect(launched, f"launch at the ceiling, {optin_ceiling} B")
    return dict(vars(launched.registers)) if launched.registers else None
