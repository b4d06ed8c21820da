"""The bisection: exact for any monotone predicate, within its probe bound, and suspicious of anything else."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_smem.core.search import find_ceiling, gallop_points, probe_bound


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
    assert result.within_bound


@settings(max_examples=200, deadline=None)
@given(ceiling=st.integers(min_value=2000, max_value=300_000), data=st.data())
def test_a_hole_below_the_ceiling_is_detected(ceiling: int, data: st.DataObject) -> None:
    # Fail exactly at the spot-check size: a monotone search must not silently pass over it.
    spot = ceiling * 3 // 4
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
