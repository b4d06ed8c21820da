"""How many pipeline stages of a GEMM tile fit in a block's shared memory, counted the way CUTLASS's
collective builders count them when a kernel asks for ``StageCountAutoCarveout``.

Two rules, by architecture:

- sm_90 (cutlass/include/cutlass/gemm/collective/builders/sm90_gmma_builder.inl,
  ``compute_stage_count_or_override``): a stage is the A and B tiles rounded up to 128 B plus the
  mainloop pipeline's shared storage (``PipelineTmaAsync<1>``: one full and one empty 8-byte
  barrier); the capacity is rounded down to 128 B and the carveout up to 128 B.
- sm_100 and sm_120 (sm100_umma_builder.inl, ``sm100_compute_stage_count_or_override``, which
  sm120_mma_builder.inl calls with ``sm120_smem_capacity_bytes``): a stage is the A and B tiles plus
  ``PipelineTmaUmmaAsync<1>``'s two barriers, with no rounding of stage, carveout or capacity.

Architectures before sm_90 have no such builder; they get the sm_90 rule, the stricter of the two.
What the rules leave out, and this module models only where asked: block-scaled sm_120 kernels
declare their operand buffers ``alignas(1024)`` (``align_bytes`` pads each operand tile), and the
epilogue's shared storage is the carveout (``epilogue_bytes``). Kernel-level storage the builders
subtract themselves (tile-scheduler pipelines, tensor maps of grouped GEMMs) is not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import ceil_div, round_down, round_up

DTYPE_BITS = {"fp4": 4, "fp6": 6, "fp8": 8, "int8": 8, "fp16": 16, "bf16": 16, "tf32": 32, "fp32": 32}
PIPELINE_BARRIER_BYTES = 16  # one full and one empty 64-bit mbarrier per stage
SM90_ROUNDING_BYTES = 128
RULE_SM90, RULE_SM100 = "sm90", "sm100"
MAX_TILE_DIM = 1 << 16
_TILE = re.compile(r"^\s*(-?\d+)\s*x\s*(-?\d+)\s*x\s*(-?\d+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Tile:
    """A GEMM CTA tile, M x N x K elements."""

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
            raise UsageError(f"--tile must look like 128x256x64 (MxNxK; got {text!r})")
        m, n, k = (int(g) for g in match.groups())
        if min(m, n, k) < 1:
            raise UsageError(f"--tile dimensions must be >= 1 (got {text!r})")
        return cls(m, n, k)


def dtype_bits(name: str, option: str = "--dtype") -> int:
    """Bits per element of an operand type; an unknown name lists the valid ones."""
    if name not in DTYPE_BITS:
        raise UsageError(f"unknown {option} {name!r}; valid: {', '.join(DTYPE_BITS)}")
    return DTYPE_BITS[name]


@dataclass(frozen=True)
class GemmSpec:
    """A tile, its operand types, the epilogue's shared storage and the operand buffers' alignment (bytes)."""

    tile: Tile
    dtype_a: str
    dtype_b: str
    epilogue_bytes: int = 0
    align_bytes: int = 1

    def __post_init__(self) -> None:
        dtype_bits(self.dtype_a, "--dtype-a")
        dtype_bits(self.dtype_b, "--dtype-b")
        if self.epilogue_bytes < 0:
            raise UsageError(f"--epilogue must be >= 0 bytes (got {self.epilogue_bytes})")
        if self.align_bytes < 1 or self.align_bytes & (self.align_bytes - 1):
            raise UsageError(f"--align must be a power of two (got {self.align_bytes})")

    @property
    def operand_bytes(self) -> tuple[int, int]:
        """Bytes of one stage's A and B tiles: whole bytes per operand (as cutlass::bits_to_bytes), then padded."""
        t = self.tile
        a = ceil_div(DTYPE_BITS[self.dtype_a] * t.m * t.k, 8)
        b = ceil_div(DTYPE_BITS[self.dtype_b] * t.n * t.k, 8)
        return round_up(a, self.align_bytes), round_up(b, self.align_bytes)

    def fixed_bytes(self, stages: int) -> int:
        """Dynamic bytes of ``stages`` stages the simple way: stages * (A + B) + epilogue, no barriers."""
        if stages < 1:
            raise UsageError(f"--stages must be >= 1 (got {stages})")
        a, b = self.operand_bytes
        return stages * (a + b) + self.epilogue_bytes


def rule_for(compute_capability: tuple[int, int] | None) -> str:
    """The stage rule of an architecture: sm_100's from cc 10.0 on, sm_90's before (and when unknown)."""
    return RULE_SM100 if compute_capability is not None and compute_capability >= (10, 0) else RULE_SM90


@dataclass(frozen=True)
class StagePlan:
    """The largest stage count that fits ``capacity_bytes``, with what one stage and the carveout take.

    ``used_bytes`` is carveout + stages * stage; with 0 stages it is what a single stage would need,
    so ``capacity_bytes - used_bytes`` is then negative: by how much even one stage is over.
    """

    rule: str
    stages: int
    stage_bytes: int
    carveout_bytes: int
    capacity_bytes: int
    used_bytes: int

    @property
    def left_bytes(self) -> int:
        """Capacity less what the stages and the carveout use; negative when even one stage is over."""
        return self.capacity_bytes - self.used_bytes


def auto_stages(spec: GemmSpec, capacity_bytes: int, rule: str) -> StagePlan:
    """CUTLASS's StageCountAutoCarveout: the most stages of ``spec`` in ``capacity_bytes`` under ``rule``."""
    if capacity_bytes < 0:
        raise UsageError(f"capacity must be >= 0 bytes (got {capacity_bytes})")
    a, b = spec.operand_bytes
    if rule == RULE_SM90:
        stage = round_up(a + b, SM90_ROUNDING_BYTES) + PIPELINE_BARRIER_BYTES
        carveout = round_up(spec.epilogue_bytes, SM90_ROUNDING_BYTES)
        usable = round_down(capacity_bytes, SM90_ROUNDING_BYTES)
    elif rule == RULE_SM100:
        stage = a + b + PIPELINE_BARRIER_BYTES
        carveout = spec.epilogue_bytes
        usable = capacity_bytes
    else:
        raise UsageError(f"unknown stage rule {rule!r}; valid: {RULE_SM90}, {RULE_SM100}")
    stages = max(0, (usable - carveout) // stage)
    return StagePlan(rule, stages, stage, carveout, capacity_bytes, carveout + max(stages, 1) * stage)
