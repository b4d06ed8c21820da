"""What to measure: the static sizes and block sizes of the splits, the search's cap and confirmations,
which standard experiments run, the level, and (test only) faults the validation kernels plant. Sizes in
bytes."""

from __future__ import annotations

from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import MAX_THREADS_PER_BLOCK, STATIC_SMEM_COMPILE_CAP_BYTES
from bisect_smem.core.levels import DEFAULT_LEVEL, REFERENCE_THREADS, level_rank
from bisect_smem.core.search import DEFAULT_CONFIRM
from bisect_smem.devices.probes import MarchFault

DEFAULT_STATIC_SIZES = (0, 1, 1024, 16 * 1024, 48 * 1024)
DEFAULT_THREADS = (32, 128, 1024)
HARD_CAP_BYTES = 1 << 20  # far above any per-SM capacity published so far (228 KB)


@frozen
class PlantedFaults:
    """Test only: faults planted in the validation kernels, to prove on a real device that they are found.
    ``march``: that SM's word holding that byte is corrupted between the march's write and read;
    ``sweep_hole_bytes``: the granule sweep's launch of exactly that size reads a byte wrong."""

    march: MarchFault | None = None
    sweep_hole_bytes: int | None = None


@frozen
class MeasureConfig:
    """What to measure. Sizes in bytes."""

    static_sizes: tuple[int, ...] = DEFAULT_STATIC_SIZES
    threads: tuple[int, ...] = DEFAULT_THREADS
    cap_bytes: int = HARD_CAP_BYTES
    confirm: int = DEFAULT_CONFIRM
    residency: bool = True
    carveout: bool = True
    clusters: bool = True
    level: str = DEFAULT_LEVEL
    planted: PlantedFaults = PlantedFaults()  # test only: faults the validation kernels plant

    def __post_init__(self) -> None:
        level_rank(self.level)
        for s in self.static_sizes:
            if not 0 <= s <= STATIC_SMEM_COMPILE_CAP_BYTES:
                raise ValueError(f"static bytes must be in 0..{STATIC_SMEM_COMPILE_CAP_BYTES} (got {s})")
        for t in self.threads:
            if not 1 <= t <= MAX_THREADS_PER_BLOCK:
                raise ValueError(f"threads must be in 1..{MAX_THREADS_PER_BLOCK} (got {t})")
        if self.cap_bytes < 1:
            raise ValueError(f"cap bytes must be >= 1 (got {self.cap_bytes})")
        if self.confirm < 1:
            raise ValueError(f"confirm must be >= 1 (got {self.confirm})")
        if 0 not in self.static_sizes:
            raise ValueError("static sizes must include 0 (the reference kernel)")
        if REFERENCE_THREADS not in self.threads:
            raise ValueError(f"threads must include {REFERENCE_THREADS} (the reference block size)")
