"""Human sizes: ``110592``, ``108KiB``, ``99K``, ``1.5MiB``. K, KB and KiB all mean 1024 bytes here, as in
NVIDIA's tables."""

from __future__ import annotations

import re
from fractions import Fraction

from bisect_smem.core.errors import UsageError

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str, what: str = "size") -> int:
    """Bytes in ``text``; raises UsageError naming the value for anything that is not a whole byte count."""
    match = _PATTERN.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise UsageError(f"{what} must be a byte count like 110592, 108KiB or 99K (got {text!r})")
    value = Fraction(match.group(1)) * _UNITS[match.group(2).lower()]
    if value.denominator != 1:
        raise UsageError(f"{what} must be a whole number of bytes (got {text!r} = {float(value)} B)")
    return int(value)
