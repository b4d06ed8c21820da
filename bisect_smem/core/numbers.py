"""Whole numbers and probabilities as a person types them on the command line: ASCII digits only, so
``²``, ``٣``, ``1_0``, ``0x10`` and ``inf`` are refused rather than read, and at most MAX_DIGITS of them,
so no value can take Python's int() past its own limit. Each refusal is a UsageError naming the value."""

from __future__ import annotations

import re

from bisect_smem.core.errors import UsageError

MAX_DIGITS = 18  # every count the tool takes fits in a 64-bit integer
_WHOLE = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?|\.[0-9]+")


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")


def whole_number(text: str, what: str) -> int:
    """``text`` as a whole number >= 0 written in ASCII digits; a UsageError naming ``what`` otherwise."""
    value = text.strip()
    if not _WHOLE.fullmatch(value):
        raise UsageError(f"{what} must be a whole number like 3 (got {_shown(text)})")
    if len(value.lstrip("0")) > MAX_DIGITS:
        raise UsageError(f"{what} must be a whole number of at most {MAX_DIGITS} digits (got {_shown(text)})")
    return int(value)


def decimal(text: str, what: str) -> float:
    """``text`` as a plain decimal number >= 0 (``0.25``, ``3``); no exponent, no ``inf`` or ``nan``."""
    value = text.strip()
    if not _DECIMAL.fullmatch(value) or len(value) > 2 * MAX_DIGITS:
        raise UsageError(f"{what} must be a number like 0.25 (got {_shown(text)})")
    return float(value)
