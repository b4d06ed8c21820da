"""Would a launch fit? A kernel's shared memory against each architecture's published limits and against
the local devices' measured ones: without opt-in, with opt-in, or not at all, by how many bytes, and
how many such blocks fit on one SM."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import (
    DEFAULT_SMEM_PER_BLOCK_BYTES,
    MAX_THREADS_PER_BLOCK,
    STATIC_SMEM_COMPILE_CAP_BYTES,
    block_footprint,
    block_request_bytes,
    blocks_per_sm,
    default_reserved_bytes,
)
from bisect_smem.core.model import DeviceReport
from bisect_smem.core.profiles import ArchProfile

DTYPE_BYTES = {"fp32": Fraction(4), "tf32": Fraction(4), "fp16": Fraction(2), "bf16": Fraction(2),
               "fp8": Fraction(1), "int8": Fraction(1), "fp4": Fraction(1, 2)}
GRANULE_BYTES = 128  # the allocation unit where a report did not measure one


def tile_smem_bytes(tile: str, stages: int, dtype: str) -> int:
    """Shared memory of a multi-stage A/B tile pipeline: stages * (M*K + N*K) * bytes per element."""
    try:
        m, n, k = (int(x) for x in tile.lower().split("x"))
    except ValueError:
        raise UsageError(f"--tile must look like 128x256x64 (MxNxK; got {tile!r})") from None
    if min(m, n, k) < 1:
        raise UsageError(f"--tile dimensions must be >= 1 (got {tile!r})")
    if stages < 1:
        raise UsageError(f"--stages must be >= 1 (got {stages})")
    if dtype not in DTYPE_BYTES:
        raise UsageError(f"unknown --dtype {dtype!r}; valid: {', '.join(DTYPE_BYTES)}")
    total = stages * (m * k + n * k) * DTYPE_BYTES[dtype]
    if total.denominator != 1:
        raise UsageError(f"tile {tile} x {stages} stages of {dtype} is not a whole number of bytes")
    return int(total)


@dataclass(frozen=True)
class FitRequest:
    """The kernel: its dynamic and static shared memory (bytes) and its block size."""

    dynamic_bytes: int
    static_bytes: int = 0
    threads: int = 128
    source: str = ""

    def __post_init__(self) -> None:
        if self.dynamic_bytes < 0:
            raise UsageError(f"dynamic bytes must be >= 0 (got {self.dynamic_bytes})")
        if not 0 <= self.static_bytes <= STATIC_SMEM_COMPILE_CAP_BYTES:
            raise UsageError(f"static bytes must be in 0..{STATIC_SMEM_COMPILE_CAP_BYTES}, the compile-time cap "
                             f"(got {self.static_bytes})")
        if not 1 <= self.threads <= MAX_THREADS_PER_BLOCK:
            raise UsageError(f"threads must be in 1..{MAX_THREADS_PER_BLOCK} (got {self.threads})")

    @property
    def total_bytes(self) -> int:
        """What the block asks for: the dynamic bytes behind the 16-byte aligned static data."""
        return block_request_bytes(self.dynamic_bytes, self.static_bytes)


@dataclass(frozen=True)
class Target:
    """Limits to fit against, published for an architecture or measured on a device."""

    name: str
    kind: str  # "published" or "measured"
    default_limit_bytes: int | None
    optin_limit_bytes: int | None
    smem_per_sm_bytes: int | None
    reserved_bytes: int
    granule_bytes: int
    max_blocks_per_sm: int | None
    max_threads_per_sm: int | None

    @classmethod
    def from_profile(cls, p: ArchProfile) -> Target:
        reserved = p.reserved_smem_per_block_bytes
        if reserved is None:
            reserved = default_reserved_bytes(p.compute_capability)
        return cls(f"{p.key} ({p.example_parts})", "published", DEFAULT_SMEM_PER_BLOCK_BYTES,
                   p.max_smem_per_block_optin_bytes, p.smem_per_sm_bytes, reserved, p.allocation_granularity_bytes,
                   p.max_blocks_per_sm, p.max_threads_per_sm)

    @classmethod
    def from_report(cls, dev: DeviceReport) -> Target:
        m = dev.measured
        driver = dev.reported.get("driver", {})
        return cls(
            f"device {dev.index}: {dev.name} (cc {dev.compute_capability})", "measured",
            m.default_dynamic_ceiling_bytes if m else None, m.optin_dynamic_ceiling_bytes if m else None,
            (m.smem_per_sm_bytes if m and m.smem_per_sm_bytes else driver.get("max_shared_memory_per_multiprocessor_bytes")),
            (m.reserved_bytes if m and m.reserved_bytes is not None else 0),
            (m.allocation_granularity_bytes if m and m.allocation_granularity_bytes else GRANULE_BYTES),
            driver.get("max_blocks_per_multiprocessor"), driver.get("max_threads_per_multiprocessor"))


@dataclass(frozen=True)
class FitResult:
    target: str
    kind: str
    verdict: str  # "fits without opt-in", "fits with opt-in", "does not fit", "unknown"
    total_bytes: int
    optin_limit_bytes: int | None
    over_bytes: int | None  # total - opt-in limit: negative means bytes to spare
    blocks_per_sm: int | None

    @property
    def fits(self) -> bool:
        return self.verdict.startswith("fits")


def evaluate(request: FitRequest, target: Target) -> FitResult:
    total = request.total_bytes
    if target.optin_limit_bytes is None:
        return FitResult(target.name, target.kind, "unknown", total, None, None, None)
    over = total - target.optin_limit_bytes
    if target.default_limit_bytes is not None and total <= target.default_limit_bytes:
        verdict = "fits without opt-in"
    elif over <= 0:
        verdict = "fits with opt-in"
    else:
        verdict = "does not fit"
    blocks = None
    if verdict != "does not fit":
        footprint = block_footprint(total, target.granule_bytes, target.reserved_bytes)
        blocks, _ = blocks_per_sm(footprint, request.threads, target.smem_per_sm_bytes, target.max_blocks_per_sm,
                                  target.max_threads_per_sm)
    return FitResult(target.name, target.kind, verdict, total, target.optin_limit_bytes, over, blocks)
