"""Byte-exact bisection of a ceiling over a monotone predicate. Pure Python; imports no CUDA.

The bounds come from galloping up from a small size to a hard cap, never from the attribute being
checked. The boundary is confirmed (the ceiling passes and ceiling + 1 fails, each seen ``confirm``
times), and monotonicity is spot-checked below the ceiling. Every probe is counted.

``find_ceiling_batched`` asks several sizes per round (a backend launches them all and synchronises
once): the gallop points together, the confirmations and the spot check together, and, while the probe
budget allows, several evenly spaced sizes per bisection round. It never exceeds the probe bound of a
one-size-at-a-time bisection, and with one size per round it probes exactly as that bisection does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Hashable, Mapping, Sequence
from dataclasses import field
from typing import Any, TypeVar

from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import ceil_div
from bisect_smem.core.levels import DEFAULT_CONFIRM

Predicate = Callable[[int], bool]
"""Answers True when ``n`` bytes fit, False when they are too big; raises for anything unexpected."""
BatchPredicate = Callable[[Sequence[int]], Sequence[bool]]
"""Answers a Predicate for each size, in order; a backend may launch them all before reading any."""

GALLOP_START_BYTES = 4096
EXTRA_PROBES = 6  # beyond ceil(log2(cap)): three gallop points, two confirmations, one spot check
DEFAULT_WIDTH = 4  # the most sizes one bisection round may put in flight


def probe_bound(cap_bytes: int, confirm: int = DEFAULT_CONFIRM) -> int:
    """The most probes one ceiling may take: ceil(log2(cap)) + 6, plus 2 per confirmation beyond two."""
    return math.ceil(math.log2(max(cap_bytes, 2))) + EXTRA_PROBES + 2 * max(confirm - 2, 0)


def gallop_points(start_bytes: int, cap_bytes: int) -> list[int]:
    """Start, the geometric middle of start and cap, and cap: three points bound any gallop's cost."""
    middle = math.isqrt(start_bytes * cap_bytes)
    return sorted({min(start_bytes, cap_bytes), min(max(middle, start_bytes), cap_bytes), cap_bytes})


@frozen
class SearchResult:
    """What a search found. ``ceiling_bytes`` is the largest size that passed (None: not even ``floor``)."""

    ceiling_bytes: int | None
    probes: int
    cap_bytes: int
    confirm: int = DEFAULT_CONFIRM
    at_cap: bool = False
    unstable_range: tuple[int, int] | None = None
    non_monotone_at: tuple[int, ...] = ()
    observations: dict[int, tuple[bool, ...]] = field(default_factory=dict, compare=False, repr=False)
    rounds: int = field(default=0, compare=False)  # synchronisations: one per size, or one per batch

    @property
    def trustworthy(self) -> bool:
        """True when the boundary was confirmed and no probe contradicted monotonicity."""
        return self.unstable_range is None and not self.non_monotone_at


def _unprobed_below(ceiling: int, floor_bytes: int, seen: dict[int, list[bool]]) -> int | None:
    """A size below the ceiling that the search has not probed: near three quarters of it."""
    candidate = floor_bytes + (ceiling - floor_bytes) * 3 // 4
    while candidate in seen and candidate > floor_bytes:
        candidate -= 1
    return None if candidate in seen else candidate


def _summarise(seen: dict[int, list[bool]], ceiling: int | None, hi: int | None, cap: int,
               confirm: int, rounds: int) -> SearchResult:
    passes = sorted(n for n, obs in seen.items() if any(obs))
    fails = sorted(n for n, obs in seen.items() if not all(obs))
    mixed = [n for n, obs in seen.items() if any(obs) and not all(obs)]
    unstable = None
    if mixed:
        unstable = (min(fails), max(passes))
    highest_pass = passes[-1] if passes else None
    non_monotone = tuple(n for n in fails if highest_pass is not None and n < highest_pass and n not in mixed)
    return SearchResult(
        ceiling_bytes=ceiling,
        probes=sum(len(obs) for obs in seen.values()),
        cap_bytes=cap,
        confirm=confirm,
        at_cap=hi is None,
        unstable_range=unstable,
        non_monotone_at=non_monotone,
        observations={n: tuple(obs) for n, obs in sorted(seen.items())},
        rounds=rounds,
    )


def find_ceiling_batched(fits_many: BatchPredicate, *, cap_bytes: int, floor_bytes: int = 0,
                         confirm: int = DEFAULT_CONFIRM, start_bytes: int = GALLOP_START_BYTES,
                         spot_check: bool = True, width: int = DEFAULT_WIDTH) -> SearchResult:
    """The bisection with several sizes per round, within the same probe bound and the same confirmations.

    ``width`` is the most sizes one bisection round asks; with 1 it probes exactly as a
    one-size-at-a-time bisection (the tests keep that reference).
    """
    return drive(ceiling_search(cap_bytes=cap_bytes, floor_bytes=floor_bytes, confirm=confirm,
                                start_bytes=start_bytes, spot_check=spot_check, width=width), fits_many)


def ceiling_search(*, cap_bytes: int, floor_bytes: int = 0, confirm: int = DEFAULT_CONFIRM,
                   start_bytes: int = GALLOP_START_BYTES, spot_check: bool = True,
                   width: int = DEFAULT_WIDTH) -> Search:
    """The batched search as a plan of rounds: it yields each round's sizes, is sent their answers (one
    bool per size, in order), and returns its SearchResult. ``drive`` runs one plan; ``search_together``
    runs several in shared rounds."""
    if cap_bytes < floor_bytes:
        raise ValueError(f"cap must be >= floor (got cap {cap_bytes}, floor {floor_bytes})")
    if confirm < 1:
        raise ValueError(f"confirm must be >= 1 (got {confirm})")
    if width < 1:
        raise ValueError(f"width must be >= 1 (got {width})")
    return _plan(cap_bytes, floor_bytes, confirm, start_bytes, spot_check, width)


def _plan(cap_bytes: int, floor_bytes: int, confirm: int, start_bytes: int, spot_check: bool, width: int) -> Search:
    run = _Rounds()
    bound = probe_bound(cap_bytes, confirm)
    tail = 2 * (confirm - 1) + int(spot_check)  # the most the confirmations and the spot check can take
    lo, hi = yield from _gallop_batched(run, gallop_points(max(start_bytes, floor_bytes), cap_bytes),
                                        floor_bytes - 1, bound - tail, width)
    while hi is not None and hi - lo > 1:
        points = _spread(lo, hi, _round_size(hi - lo, width, bound - tail - run.probes))
        answers = yield from run.ask(points)
        for n, ok in zip(points, answers, strict=True):
            if not ok:
                hi = n
                break
            lo = n
    ceiling = lo if lo >= floor_bytes else None
    last = [n for n in (ceiling, hi) if n is not None for _ in range(confirm - len(run.seen[n]))]
    if spot_check and ceiling is not None and ceiling > floor_bytes:
        fresh = _unprobed_below(ceiling, floor_bytes, run.seen)
        last += [fresh] if fresh is not None else []
    if last:
        yield from run.ask(last)
    return _summarise(run.seen, ceiling, hi, cap_bytes, confirm, run.rounds)


Search = Generator[list[int], Sequence[bool], SearchResult]
"""A search as a plan of rounds (``ceiling_search``): yields sizes, is sent their answers, returns its result."""


def drive(search: Search, fits_many: BatchPredicate) -> SearchResult:
    """Run one search to its end, each round answered by ``fits_many`` (whose exceptions propagate)."""
    try:
        sizes = next(search)
        while True:
            sizes = search.send(fits_many(sizes))
    except StopIteration as done:
        return done.value


K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
Plan = Generator[list[int], Sequence[Any], R]
"""Any search as a plan of rounds: yields the sizes it asks next, is sent one answer per size, returns R."""


def search_together(searches: Mapping[K, Plan[R]],
                    ask: Callable[[dict[K, list[int]]], Mapping[K, Sequence[Any] | Exception]]) -> dict[K, R | Exception]:
    """Run independent searches in shared rounds: each round asks ``ask`` once for the sizes of every
    search still open (a backend launches them all and synchronises once), so together they take as many
    rounds as the longest of them; a ceiling search keeps its own probe bound and confirmations.

    ``ask`` answers each search's sizes, or gives an exception for a search that cannot go on (a probe
    that was neither a fit nor too big): that search ends with the exception and the others go on. An
    exception ``ask`` raises ends them all."""
    results: dict[K, R | Exception] = {}
    open_rounds: dict[K, list[int]] = {}
    for key, search in searches.items():
        try:
            open_rounds[key] = next(search)
        except StopIteration as done:
            results[key] = done.value
    while open_rounds:
        answers = ask(dict(open_rounds))
        following: dict[K, list[int]] = {}
        for key in open_rounds:
            got = answers[key]
            if isinstance(got, Exception):
                searches[key].close()
                results[key] = got
                continue
            try:
                following[key] = searches[key].send(got)
            except StopIteration as done:
                results[key] = done.value
        open_rounds = following
    return {key: results[key] for key in searches}


class _Rounds:
    """Asks for each round's answers and records every answer, per size, and how many rounds it took."""

    def __init__(self) -> None:
        self.seen: dict[int, list[bool]] = {}
        self.rounds = 0
        self.probes = 0

    def ask(self, sizes: list[int]) -> Generator[list[int], Sequence[bool], list[bool]]:
        answers = [bool(ok) for ok in (yield list(sizes))]
        if len(answers) != len(sizes):
            raise ValueError(f"a batch predicate must answer every size (asked {len(sizes)}, got {len(answers)})")
        self.rounds += 1
        self.probes += len(sizes)
        for n, ok in zip(sizes, answers, strict=True):
            self.seen.setdefault(n, []).append(ok)
        return answers


def _cost(width: int) -> int:
    """Probes a one-at-a-time bisection needs to close (lo, hi) with hi - lo = width: ceil(log2(width))."""
    return (width - 1).bit_length() if width > 1 else 0


def _spread(lo: int, hi: int, k: int) -> list[int]:
    """``k`` sizes strictly between lo and hi, evenly spaced; k = 1 is the bisection's midpoint."""
    return [lo + i * (hi - lo) // (k + 1) for i in range(1, k + 1)]


def _round_size(gap: int, width: int, budget: int) -> int:
    """How many sizes to ask in a round over ``gap``: more than one only where the probes still fit in
    ``budget`` (what is left before the confirmations) whatever the answers, and cheapest per round saved."""
    best, best_price = 1, math.inf
    for k in range(2, min(width, gap - 1) + 1):
        worst = k + _cost(ceil_div(gap, k + 1))
        if worst > budget:
            continue
        extra = worst - _cost(gap)  # probes beyond the bisection's
        saved = _cost(gap) - 1 - _cost(ceil_div(gap, k + 1))  # rounds fewer than the bisection's
        if saved <= 0:
            continue
        price = extra / saved
        if price < best_price or (price == best_price and k > best):
            best, best_price = k, price
    return best


def _gallop_batched(run: _Rounds, points: list[int], lo: int, budget: int,
                    width: int) -> Generator[list[int], Sequence[bool], tuple[int, int | None]]:
    """The gallop: its points (the cap among them) in one round where the probes fit in ``budget`` whatever
    the answers, the widest bracket between them split further while they still fit (``_first_round``);
    else one point per round, as a one-size-at-a-time bisection does. Returns (largest pass below the first
    fail, first fail); later answers of the round are only recorded."""
    together = _first_round(points, lo, budget, width)
    for group in ([together] if together else [[n] for n in points]):
        answers = yield from run.ask(group)
        for n, ok in zip(group, answers, strict=True):
            if not ok:
                return lo, n
            lo = n
    return lo, None


def _first_round(points: list[int], lo: int, budget: int, width: int) -> list[int] | None:
    """The gallop points and up to ``width - 1`` more sizes, each the midpoint of the bracket that would
    cost the most to bisect, while the round's probes plus the dearest bracket's bisection stay within
    ``budget``; None when batching is off (width 1), or the points alone would not fit."""

    def worst(sizes: list[int]) -> int:
        bounds = [lo, *sizes]
        return len(sizes) + max(_cost(b - a) for a, b in zip(bounds, bounds[1:], strict=False))

    if width < 2 or len(points) < 2 or worst(points) > budget:
        return None
    sizes = list(points)
    for _ in range(width - 1):
        bounds = [lo, *sizes]
        a, b = max(zip(bounds, bounds[1:], strict=False), key=lambda ab: (_cost(ab[1] - ab[0]), ab[0]))
        wider = sorted({*sizes, (a + b) // 2})
        if b - a < 2 or len(wider) == len(sizes) or worst(wider) > budget:
            break
        sizes = wider
    return sizes
