"""One probe scheduler for the ceilings searched by launches: the searches of a step, or of the steps run
together, share rounds. Each round launches the sizes of every search still open in one batch and
synchronises once, so the searches together take about as many synchronisations as the longest of them;
each keeps its own probe bound, confirmations and verification (core/search.py plans each one's rounds).
"""

from __future__ import annotations

from collections.abc import Sequence

from bisect_smem.core.errors import ProbeFault
from bisect_smem.core.frozen import frozen
from bisect_smem.core.model import Ceiling
from bisect_smem.core.search import SearchResult, ceiling_search, probe_bound, search_together
from bisect_smem.devices.probes import Launch, ProbeKernel
from bisect_smem.experiments.context import StepContext
from bisect_smem.experiments.expect import expect


@frozen
class LaunchSearch:
    """A ceiling searched by launches: each size is one block of ``kernel`` and ``threads``, with the
    opt-in attribute set to the size just before it where ``raise_limit``. ``what`` names a probe in a
    fault, with ``{n}`` for its size."""

    name: str
    kernel: ProbeKernel
    threads: int
    raise_limit: bool
    what: str


def search_launches(searches: Sequence[tuple[StepContext, LaunchSearch]]) -> list[Ceiling]:
    """Search each ceiling, all of them in shared rounds, and record each in its step's context. A probe
    that is neither a fit nor too big becomes its ceiling's error, not a number; a sticky one propagates
    (only a new process recovers)."""
    if not searches:
        return []
    config = searches[0][0].config
    cap, confirm = config.cap_bytes, config.confirm
    bound = probe_bound(cap, confirm)
    counts = [0] * len(searches)

    def ask(sizes: dict[int, list[int]]) -> dict[int, list[bool] | Exception]:
        order = [(i, n) for i, ns in sizes.items() for n in ns]
        for i, n in order:
            counts[i] += 1
            ctx, search = searches[i]
            ctx.progress(f"{search.name}: probe {counts[i]} at {n} B")
        outcomes = searches[0][0].session.launch_batch(
            [Launch(searches[i][1].kernel, n, searches[i][1].threads, searches[i][1].raise_limit) for i, n in order])
        answers: dict[int, list[bool] | Exception] = {i: [] for i in sizes}
        for (i, n), got in zip(order, outcomes, strict=True):
            so_far = answers[i]
            if isinstance(so_far, Exception):
                continue
            try:
                so_far.append(expect(got, searches[i][1].what.format(n=n)))
            except ProbeFault as fault:
                if fault.sticky:
                    raise
                answers[i] = fault
        return answers

    plans = {i: ceiling_search(cap_bytes=cap, confirm=confirm) for i in range(len(searches))}
    results = search_together(plans, ask)
    ceilings = []
    for i, (ctx, search) in enumerate(searches):
        ceiling = _ceiling(results[i], counts[i], bound)
        ctx.searches[search.name] = ceiling
        ceilings.append(ceiling)
    return ceilings


def _ceiling(result: SearchResult | Exception, probes: int, bound: int) -> Ceiling:
    if isinstance(result, Exception):
        return Ceiling(None, probes, bound, error=str(result))
    return Ceiling(result.ceiling_bytes, result.probes, bound, result.at_cap, result.unstable_range,
                   result.non_monotone_at, rounds=result.rounds)
