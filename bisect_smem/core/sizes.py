"""Human sizes: ``110592``, ``108KiB``, ``99K``, ``1.5MiB``. K, KB and KiB all mean 1024 bytes here, as in
NVIDIA's tables. A decimal point only writes a part of a K or an M (``1.5KiB``), never a byte count
(``1.0``), a whole unit (``227.0K``) or less than one unit (``0.5K``: that is 512). Digits are ASCII digits only, at most MAX_DIGITS of them before and after the point: no
hexadecimal, no ``1_0``, no ``inf``, no superscript or other scripts' digits, and nothing long enough
to make int() refuse."""

from __future__ import annotations

import re

from bisect_smem.core.errors import UsageError

MAX_DIGITS = 24  # far beyond any byte count; int() of a long digit string is refused before it is tried
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}
_PATTERN = re.compile(rf"^\s*([0-9]{{1,{MAX_DIGITS}}}(?:\.[0-9]{{1,{MAX_DIGITS}}})?)\s*([a-z]*)\s*$",
                      re.IGNORECASE | re.ASCII)
SHOWN_CHARS = 40


def shown(text: str) -> str:
    """``text`` as an error message quotes it: repr, cut to SHOWN_CHARS with its length when longer."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text)} characters)"


def parse_size(text: str, what: str = "size") -> int:
    """Bytes in ``text``; raises UsageError naming the value for anything that is not a whole byte count."""
    match = _PATTERN.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise UsageError(f"{what} must be a byte count like 110592, 108KiB or 99K (got {shown(text)})")
    # Exact in integers (fractions would import decimal, a cost every command line would pay): digits over 10**d.
    whole, _, part = match.group(1).partition(".")
    scaled, denominator = int(whole + part) * _UNITS[match.group(2).lower()], 10 ** len(part)
    if scaled % denominator:
        raise UsageError(f"{what} must be a whole number of bytes (got {shown(text)} = {scaled / denominator} B)")
    _refuse_needless_point(match.group(1), match.group(2), scaled // denominator, what, text)
    return scaled // denominator


def _refuse_needless_point(number: str, unit: str, value: int, what: str, text: str) -> None:
    """A decimal point is for a part of a unit: ``1.0``, ``227.0K`` and ``0.5K`` say what ``1``, ``227K``
    and ``512`` say, and are refused with that spelling, as every other byte count is ASCII digits."""
    if "." not in number:
        return
    whole, fraction = number.split(".")
    scale = _UNITS[unit.lower()]
    if scale == 1 or int(fraction) == 0 or int(whole) == 0:
        plain = f"{value // scale}{unit}" if value % scale == 0 and int(whole) else str(value)
        raise UsageError(f"{what} must be written without a decimal point: {plain} (got {shown(text)})")


def parse_count(text: str, what: str) -> int:
    """A whole number of ASCII digits (at most MAX_DIGITS), such as a thread count; UsageError naming it."""
    if not re.fullmatch(rf"\s*[0-9]{{1,{MAX_DIGITS}}}\s*", text, re.ASCII):
        raise UsageError(f"{what} must be a whole number in ASCII digits (got {shown(text)})")
    return int(text)
