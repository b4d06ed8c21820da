"""Options a hostile or careless user gives: each is refused in one line and exit 2 before anything is
measured, or does what it says."""

from __future__ import annotations

import pytest

from bisect_smem.core.errors import UsageError
from bisect_smem.core.sizes import parse_size
from tests.conftest import one_error
from tests.conftest import run_main as run


@pytest.mark.parametrize(("text", "plain"), [
    ("1.0", "1"), ("227.0K", "227K"), ("0.5K", "512"), ("0.0", "0"), ("1.00MiB", "1MiB"), ("0.25M", "262144"),
])
def test_a_needless_decimal_point_is_refused_with_the_plain_spelling(text: str, plain: str) -> None:
    with pytest.raises(UsageError, match=f"without a decimal point: {plain} "):
        parse_size(text)


@pytest.mark.parametrize(("text", "expected"), [("1.5KiB", 1536), ("2.25M", 2359296), ("227K", 232448)])
def test_a_part_of_a_unit_is_still_a_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_fit_refuses_a_size_with_a_point_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["fit", "227.0K", "--no-local"], capsys)
    assert (code, out) == (2, "") and "227K" in one_error(err)
