"""The bisection: exact for any monotone predicate, within its probe bound, and suspicious of anything else."""

from __future__ import annotations

import math
import random
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bisect_smem.core.search import (
    ceiling_search,
    find_ceiling_batched,
    gallop_points,
    probe_bound,
    search_together,
)
from tests.measure.sequential_search import find_ceiling


@settings(max_examples=400, deadline=None)
@given(cap=st.integers(min_value=1, max_value=1 << 22), data=st.data())
def test_exact_ceiling_within_bound_for_any_threshold(cap: int, data: st.DataObject) -> None:
    ceiling = data.draw(st.integers(min_value=-1, max_value=cap), label="ceiling")
    calls: list[int] = []

    def fits(n: int) -> bool:
        calls.append(n)
        return n <= ceiling

    result = find_ceiling(fits, cap_bytes=cap)
    assert result.ceiling_bytes == (ceiling if ceiling >= 0 else None)
    assert result.probes == len(calls)
    assert result.probes <= probe_bound(cap), (result.probes, probe_bound(cap))
    assert result.trustworthy
    assert result.at_cap == (ceiling == cap)
    assert all(0 <= n <= cap for n in calls)


@settings(max_examples=200, deadline=None)
@given(ceiling=st.integers(min_value=0, max_value=300_000), confirm=st.integers(min_value=1, max_value=5))
def test_boundary_is_seen_confirm_times(ceiling: int, confirm: int) -> None:
    result = find_ceiling(lambda n: n <= ceiling, cap_bytes=1 << 20, confirm=confirm)
    assert len(result.observations[ceiling]) >= confirm
    assert len(result.observations[ceiling + 1]) >= confirm
    assert result.probes <= probe_bound(result.cap_bytes, result.confirm)


@settings(max_examples=200, deadline=None)
@given(ceiling=st.integers(min_value=2000, max_value=300_000), data=st.data())
def test_a_hole_below_the_ceiling_is_detected(ceiling: int, data: st.DataObject) -> None:
    # Fail exactly at the spot-check size: a monotone search must not silently pass over it.
    spot = ceiling * 3 // 4
    # A hole the bisection itself steps on becomes the boundary it reports, and no probe above it can tell
    # (ceiling 2730: the first midpoint is 2047 = 2730 * 3 // 4); only a sweep of every size finds those.
    clean = find_ceiling(lambda n: n <= ceiling, cap_bytes=1 << 20, spot_check=False)
    assume(spot not in clean.observations)
    result = find_ceiling(lambda n: n <= ceiling and n != spot, cap_bytes=1 << 20)
    assert not result.trustworthy
    assert spot in result.non_monotone_at


def test_answers_that_change_are_unstable_not_averaged() -> None:
    answers = iter([True] * 1000)
    flips = {232449: iter([True, False, False, False])}

    def fits(n: int) -> bool:
        if n in flips:
            return next(flips[n])
        return n <= 232448 and next(answers)

    result = find_ceiling(fits, cap_bytes=1 << 20)
    assert result.unstable_range is not None
    assert result.unstable_range[0] <= 232449 <= result.unstable_range[1] + 1
    assert not result.trustworthy


def test_gallop_points_never_exceed_three() -> None:
    for cap in (1, 100, 4096, 5000, 1 << 20, 1 << 30):
        points = gallop_points(4096, cap)
        assert len(points) <= 3 and points[-1] == cap and points == sorted(set(points))


def test_probe_bound_formula() -> None:
    assert probe_bound(1 << 20) == 26
    assert probe_bound((1 << 20) + 1) == 27
    assert probe_bound(1 << 20, confirm=4) == 30
    assert probe_bound(262144) == math.ceil(math.log2(262144)) + 6


@pytest.mark.parametrize("kwargs, message", [
    ({"cap_bytes": 10, "floor_bytes": 11}, "cap must be >= floor"),
    ({"cap_bytes": 10, "confirm": 0}, "confirm must be >= 1 (got 0)"),
])
def test_bad_arguments_say_what_was_received(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        find_ceiling(lambda n: True, **kwargs)


# The batched search: the same ceilings, bound and confirmations, in fewer rounds.

def monotone(ceiling: int) -> tuple[list[list[int]], object]:
    """A batch predicate for ``n <= ceiling`` that records each batch it was asked."""
    batches: list[list[int]] = []

    def fits_many(sizes: list[int]) -> list[bool]:
        batches.append(list(sizes))
        return [n <= ceiling for n in sizes]

    return batches, fits_many


@settings(max_examples=400, deadline=None)
@given(cap=st.integers(min_value=1, max_value=1 << 22), confirm=st.integers(min_value=1, max_value=4),
       width=st.integers(min_value=1, max_value=16), data=st.data())
def test_batched_finds_the_bisection_ceiling_within_its_bound(cap: int, confirm: int, width: int,
                                                             data: st.DataObject) -> None:
    ceiling = data.draw(st.integers(min_value=-1, max_value=cap), label="ceiling")
    batches, fits_many = monotone(ceiling)
    result = find_ceiling_batched(fits_many, cap_bytes=cap, confirm=confirm, width=width)
    reference = find_ceiling(lambda n: n <= ceiling, cap_bytes=cap, confirm=confirm)
    assert result.ceiling_bytes == reference.ceiling_bytes == (ceiling if ceiling >= 0 else None)
    assert result.at_cap == reference.at_cap and result.trustworthy
    assert result.probes == sum(map(len, batches)) <= probe_bound(cap, confirm)
    assert result.rounds == len(batches) <= reference.rounds
    assert all(0 <= n <= cap for batch in batches for n in batch)
    for n in (ceiling, ceiling + 1):
        if 0 <= n <= cap:
            assert len(result.observations[n]) >= confirm


@pytest.mark.parametrize("ceiling", [49152, 232448, 232432, 101376, 0, 1 << 20])
def test_batched_takes_fewer_rounds_at_real_ceilings(ceiling: int) -> None:
    _, fits_many = monotone(ceiling)
    result = find_ceiling_batched(fits_many, cap_bytes=1 << 20)
    reference = find_ceiling(lambda n: n <= ceiling, cap_bytes=1 << 20)
    assert result.ceiling_bytes == reference.ceiling_bytes
    assert result.rounds <= reference.rounds - 2, (result.rounds, reference.rounds)
    assert result.probes <= probe_bound(1 << 20)


def island_predicate(data: st.DataObject, cap: int) -> tuple[set[int], object]:
    """A deterministic, possibly non-monotone predicate: true on a few random intervals."""
    edges = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=cap + 1), max_size=8), label="edges"))
    passing = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=False)]

    def fits(n: int) -> bool:
        return any(a <= n < b for a, b in passing)

    return set(), fits


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(min_value=1, max_value=1 << 21), data=st.data())
def test_one_size_per_round_probes_exactly_as_the_bisection(cap: int, data: st.DataObject) -> None:
    _, fits = island_predicate(data, cap)
    order: list[int] = []
    reference_order: list[int] = []
    batched = find_ceiling_batched(lambda ns: [order.append(n) or fits(n) for n in ns], cap_bytes=cap, width=1)
    reference = find_ceiling(lambda n: reference_order.append(n) or fits(n), cap_bytes=cap)
    assert order == reference_order
    assert batched == reference


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(min_value=1, max_value=1 << 21), confirm=st.integers(min_value=1, max_value=3),
       width=st.integers(min_value=2, max_value=8), flaky=st.booleans(), data=st.data())
def test_batched_stays_within_bound_and_honest_on_any_predicate(cap: int, confirm: int, width: int, flaky: bool,
                                                                data: st.DataObject) -> None:
    _, fits = island_predicate(data, cap)
    rng = random.Random(data.draw(st.integers(min_value=0, max_value=1000), label="seed"))
    answer = (lambda n: fits(n) != (rng.random() < 0.2)) if flaky else fits
    result = find_ceiling_batched(lambda ns: [answer(n) for n in ns], cap_bytes=cap, confirm=confirm, width=width)
    assert result.probes <= probe_bound(cap, confirm)
    obs = result.observations
    if result.ceiling_bytes is not None:
        assert len(obs[result.ceiling_bytes]) >= confirm and any(obs[result.ceiling_bytes])
    if not result.at_cap:
        top = (result.ceiling_bytes + 1) if result.ceiling_bytes is not None else min(obs)
        assert len(obs[top]) >= confirm and not all(obs[top])
    mixed = [n for n, seen in obs.items() if any(seen) and not all(seen)]
    assert (result.unstable_range is not None) == bool(mixed)
    passes = [n for n, seen in obs.items() if all(seen)]
    fails_below_a_pass = [n for n, seen in obs.items() if not any(seen) and passes and n < max(passes)]
    if fails_below_a_pass:
        assert not result.trustworthy and set(fails_below_a_pass) <= set(result.non_monotone_at)
    if not flaky and result.trustworthy and result.ceiling_bytes is not None and not result.at_cap:
        assert fits(result.ceiling_bytes) and not fits(result.ceiling_bytes + 1)


@settings(max_examples=200, deadline=None)
@given(ceiling=st.integers(min_value=2000, max_value=300_000), width=st.integers(min_value=1, max_value=8))
def test_batched_detects_a_hole_at_the_spot_check(ceiling: int, width: int) -> None:
    spot = ceiling * 3 // 4
    # A hole where the bisection itself looks is a ceiling of spot - 1 to any search: only a hole the
    # search of a sound device would not probe can be told apart, by the spot check.
    rounds: list[list[int]] = []
    find_ceiling_batched(lambda ns: rounds.append(list(ns)) or [n <= ceiling for n in ns], cap_bytes=1 << 20,
                         width=width)
    assume(all(spot not in batch for batch in rounds[:-1]))  # the last round holds the spot check itself
    result = find_ceiling_batched(lambda ns: [n <= ceiling and n != spot for n in ns], cap_bytes=1 << 20,
                                  width=width)
    assert not result.trustworthy
    assert spot in result.non_monotone_at


def test_confirmations_and_spot_check_share_the_last_round() -> None:
    batches, fits_many = monotone(232448)
    find_ceiling_batched(fits_many, cap_bytes=1 << 20, confirm=3)
    last = sorted(batches[-1])
    assert last.count(232448) == 2 and last.count(232449) == 2 and len(last) == 5
    assert all(n < 232448 for n in last if n not in (232448, 232449))


@pytest.mark.parametrize("kwargs, message", [
    ({"cap_bytes": 10, "width": 0}, "width must be >= 1 (got 0)"),
    ({"cap_bytes": 10, "floor_bytes": 11}, "cap must be >= floor"),
    ({"cap_bytes": 10, "confirm": 0}, "confirm must be >= 1 (got 0)"),
])
def test_batched_bad_arguments_say_what_was_received(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        find_ceiling_batched(lambda ns: [True] * len(ns), **kwargs)


def test_a_batch_predicate_that_skips_sizes_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"asked \d+, got 1"):
        find_ceiling_batched(lambda ns: [True], cap_bytes=1 << 20)


# The shared scheduler: searches run together give each the result it gives alone, within its bound.

@settings(max_examples=200, deadline=None)
@given(cap=st.integers(min_value=1, max_value=1 << 21), confirm=st.integers(min_value=1, max_value=3),
       width=st.integers(min_value=1, max_value=6), data=st.data())
def test_searches_run_together_find_what_each_finds_alone(cap: int, confirm: int, width: int,
                                                          data: st.DataObject) -> None:
    ceilings = data.draw(st.lists(st.integers(min_value=-1, max_value=cap), min_size=1, max_size=8), label="ceilings")
    failing = data.draw(st.sets(st.integers(min_value=0, max_value=len(ceilings) - 1), max_size=2), label="failing")
    rounds: list[dict[int, list[int]]] = []

    def ask(sizes: dict[int, list[int]]) -> dict[int, list[bool] | Exception]:
        rounds.append(sizes)
        return {i: RuntimeError(f"search {i} faulted") if i in failing and len(rounds) > 1
                else [n <= ceilings[i] for n in ns] for i, ns in sizes.items()}

    plans = {i: ceiling_search(cap_bytes=cap, confirm=confirm, width=width) for i in range(len(ceilings))}
    together = search_together(plans, ask)
    alone = [find_ceiling_batched(lambda ns, c=c: [n <= c for n in ns], cap_bytes=cap, confirm=confirm, width=width)
             for c in ceilings]
    assert len(rounds) <= max(r.rounds for r in alone)
    for i, result in together.items():
        if i in failing and alone[i].rounds > 1:
            assert isinstance(result, RuntimeError)
            continue
        assert result == alone[i] and result.rounds == alone[i].rounds
        assert result.ceiling_bytes == (ceilings[i] if ceilings[i] >= 0 else None)
        assert result.probes <= probe_bound(cap, confirm)
    assert all(len(ns) > 0 for sizes in rounds for ns in sizes.values())


def test_an_exception_raised_by_the_round_ends_every_search() -> None:
    def ask(sizes: dict[int, list[int]]) -> dict[int, list[bool]]:
        raise RuntimeError("the context is lost")

    with pytest.raises(RuntimeError, match="context is lost"):
        search_together({0: ceiling_search(cap_bytes=1 << 20), 1: ceiling_search(cap_bytes=1 << 20)}, ask)


@pytest.mark.parametrize("ceiling", [232448, 232432, 183296, 101376])
def test_the_first_round_asks_the_cap_and_splits_the_widest_bracket(ceiling: int) -> None:
    batches, fits_many = monotone(ceiling)
    result = find_ceiling_batched(fits_many, cap_bytes=1 << 20)
    assert batches[0] == [4096, 65536, (65536 + (1 << 20)) // 2, 1 << 20]
    assert result.rounds == 21 and result.probes == probe_bound(1 << 20)
