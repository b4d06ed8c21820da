"""The bisection one size at a time: the reference the batched search (core/search.py) is held to. With one
size per round the batched search must probe exactly as this does, and within the same bound."""

from __future__ import annotations

from bisect_smem.core.search import DEFAULT_CONFIRM, GALLOP_START_BYTES, Predicate, SearchResult, gallop_points
from bisect_smem.core.search import _summarise as summarise
from bisect_smem.core.search import _unprobed_below as unprobed_below


def find_ceiling(fits: Predicate, *, cap_bytes: int, floor_bytes: int = 0, confirm: int = DEFAULT_CONFIRM,
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
        fresh = unprobed_below(ceiling, floor_bytes, seen)
        if fresh is not None:
            probe(fresh)

    return summarise(seen, ceiling, hi, cap_bytes, confirm, sum(len(obs) for obs in seen.values()))
