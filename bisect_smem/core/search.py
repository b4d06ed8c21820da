"""Byte-exact bisection of a ceiling over a monotone predicate. Pure Python; imports no CUDA.

The bounds come from galloping up from a small size to a hard cap, never from the attribute being
checked. The boundary is confirmed (the ceiling passes and ceiling + 1 fails, each seen ``confirm``
times), and monotonicity is spot-checked below the ceiling. Every probe is counted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

Predicate = Callable[[int], bool]
"""Answers True when ``n`` bytes fit, False when they are too big; raises for anything unexpected."""

GALLOP_START_BYTES = 4096
EXTRA_PROBES = 6  # beyond ceil(log2(cap)): three gallop points, two confirmations, one spot check


def probe_bound(cap_bytes: int, confirm: int = 2) -> int:
    """The most probes one ceiling may take: ceil(log2(cap)) + 6, plus 2 per confirmation beyond two."""
    return math.ceil(math.log2(max(cap_bytes, 2))) + EXTRA_PROBES + 2 * max(confirm - 2, 0)


def gallop_points(start_bytes: int, cap_bytes: int) -> list[int]:
    """Start, the geometric middle of start and cap, and cap: three points bound any gallop's cost."""
    middle = math.isqrt(start_bytes * cap_bytes)
    return sorted({min(start_bytes, cap_bytes), min(max(middle, start_bytes), cap_bytes), cap_bytes})


@dataclass(frozen=True)
class SearchResult:
    """What a search found. ``ceiling_bytes`` is the largest size that passed (None: not even ``floor``)."""

    ceiling_bytes: int | None
    probes: int
    cap_bytes: int
    confirm: int = 2
    at_cap: bool = False
    unstable_range: tuple[int, int] | None = None
    non_monotone_at: tuple[int, ...] = ()
    observations: dict[int, tuple[bool, ...]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def trustworthy(self) -> bool:
        """True when the boundary was confirmed and no probe contradicted monotonicity."""
        return self.unstable_range is None and not self.non_monotone_at

    @property
    def within_bound(self) -> bool:
        return self.probes <= probe_bound(self.cap_bytes, self.confirm)


def find_ceiling(fits: Predicate, *, cap_bytes: int, floor_bytes: int = 0, confirm: int = 2,
                 start_bytes: int = GALLOP_START_BYTES, spot_check: bool = True) -> SearchResult:
    """Find the largest n in [floor_bytes, cap_bytes] with ``fits(n)``, assuming monotonicity and checking it.

    ``confirm`` is how many times the ceiling and ceiling + 1 must each be seen (at least 1).
    """
    if cap_bytes < floor_bytes:
        raise ValueError(f"cap must be >= floor (got cap {cap_bytes}, floor {floor_bytes})")
    if confirm < 1:
        raise ValueError(f"confirm must be >= 1 (got {confirm})")
    seen: dict[int, list[bool]] = {}

    def probe(n: int) -> bool:
        ok = bool(fits(n))
        seen.setdefault(n, []).append(ok)
        return ok

    lo = floor_bytes - 1  # largest size known to pass; floor - 1 stands for "none yet"
    hi: int | None = None  # smallest size known to fail
    for x in gallop_points(max(start_bytes, floor_bytes), cap_bytes):
        if probe(x):
            lo = x
        else:
            hi = x
            break
    if hi is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if probe(mid):
                lo = mid
            else:
                hi = mid
    ceiling = lo if lo >= floor_bytes else None

    for n in (ceiling, hi):
        if n is not None:
            while len(seen[n]) < confirm:
                probe(n)
    if spot_check and ceiling is not None and ceiling > floor_bytes:
        fresh = _unprobed_below(ceiling, floor_bytes, seen)
        if fresh is not None:
            probe(fresh)

    return _summarise(seen, ceiling, hi, cap_bytes, confirm)


def _unprobed_below(ceiling: int, floor_bytes: int, seen: dict[int, list[bool]]) -> int | None:
    """A size below the ceiling that the search has not probed: near three quarters of it."""
    candidate = floor_bytes + (ceiling - floor_bytes) * 3 // 4
    while candidate in seen and candidate > floor_bytes:
        candidate -= 1
    return None if candidate in seen else candidate


def _summarise(seen: dict[int, list[bool]], ceiling: int | None, hi: int | None, cap: int,
               confirm: int) -> SearchResult:
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
    )
