"""A GEMM tile as the user writes it: ``128x256x64`` (M x N x K elements)."""

from __future__ import annotations

import re

from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen

MAX_TILE_DIM = 1 << 16
# ASCII digits only, at most 6 of them: a tile dimension is never longer, and int() of a long or
# non-ASCII digit string is refused before it is converted.
_TILE = re.compile(r"^\s*([0-9]{1,6})\s*x\s*([0-9]{1,6})\s*x\s*([0-9]{1,6})\s*$", re.IGNORECASE | re.ASCII)


@frozen
class Tile:
    """A GEMM CTA-cluster tile, M x N x K elements."""

    m: int
    n: int
    k: int

    def __post_init__(self) -> None:
        for name, value in (("M", self.m), ("N", self.n), ("K", self.k)):
            if not 1 <= value <= MAX_TILE_DIM:
                raise UsageError(f"tile {name} must be in 1..{MAX_TILE_DIM} (got {value} in {self})")

    def __str__(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @classmethod
    def parse(cls, text: str) -> Tile:
        """``128x256x64`` -> Tile(128, 256, 64); anything else is a UsageError naming the text."""
        match = _TILE.match(text)
        if not match:
            raise UsageError(f"--tile must look like 128x256x64 (MxNxK, each 1..{MAX_TILE_DIM}; got {text[:40]!r})")
        m, n, k = (int(g) for g in match.groups())
        return cls(m, n, k)
