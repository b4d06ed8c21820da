"""A library's shared-memory error, explained: what the kernel needed and, for Triton, the limit the
GPU it ran on gave."""

from __future__ import annotations

from bisect_smem.core.frozen import frozen


@frozen
class Explained:
    """A library's shared-memory error: what the kernel needs and, from Triton, the limit it met."""

    kind: str  # "triton" or "bytes"
    required_bytes: int
    hardware_limit_bytes: int | None
    limit_matches: tuple[str, ...]  # the published architectures whose opt-in limit that is
