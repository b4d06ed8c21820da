"""fit's tests read its answers line by line, as the library's words: they run at a width no answer reaches,
so that a line is never wrapped under them. How fit's text fits a terminal is tested apart, at 80 columns and
at the 100 of no terminal (test_fit_width.py)."""

from __future__ import annotations

import pytest

UNWRAPPED_COLUMNS = "100000"


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", UNWRAPPED_COLUMNS)
