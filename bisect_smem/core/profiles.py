"""Published per-architecture shared memory facts (CUDA C++ Programming Guide, "Compute Capabilities").

Data only. The simulated backend builds devices from these rows, and real measurements are
validated against them. KB = 1024 bytes. Rows marked ``confirmed=False`` come from CUTLASS / CuTe
constants or user reports rather than the guide.
"""

from __future__ import annotations

import re

from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import KIB, has_clusters


@frozen(kw_only=True)
class ArchProfile:
    """One row of the published table, plus the per-SM limits of the guide's specification table.

    ``allocation_granularity_bytes`` is the "shared memory allocation unit size" of NVIDIA's occupancy
    calculator. ``multiprocessor_count`` belongs to the example part named first, not to the cc.
    """

    key: str
    compute_capability: tuple[int, int]
    example_parts: str
    aliases: tuple[str, ...]
    smem_per_sm_bytes: int
    max_smem_per_block_optin_bytes: int
    reserved_smem_per_block_bytes: int | None
    carveout_kib: tuple[int, ...] | None
    max_threads_per_sm: int
    max_blocks_per_sm: int
    multiprocessor_count: int
    allocation_granularity_bytes: int = 128
    confirmed: bool = True

    @property
    def cc_string(self) -> str:
        """``9.0``."""
        return cc_text(self.compute_capability)

    @property
    def cluster_launch(self) -> bool:
        """Thread block clusters exist from cc 9.0 on."""
        return has_clusters(self.compute_capability)


def cc_text(cc: tuple[int, int]) -> str:
    """(9, 0) -> ``"9.0"``: how reports and tables spell a compute capability."""
    return f"{cc[0]}.{cc[1]}"


def parse_cc(text: str, what: str = "compute capability") -> tuple[int, int]:
    """``"9.0"`` -> (9, 0); anything else is a UsageError saying what (``what``) was received."""
    major, sep, minor = text.partition(".") if isinstance(text, str) else ("", "", "")
    if not (sep and major.isdigit() and minor.isdigit() and major.isascii() and minor.isascii()):
        raise UsageError(f"{what} must be MAJOR.MINOR, like 9.0 (got {text!r})")
    return int(major), int(minor)


_AMPERE_CARVEOUTS = (0, 8, 16, 32, 64, 100, 132, 164)
_CONSUMER_CARVEOUTS = (0, 8, 16, 32, 64, 100)
_HOPPER_CARVEOUTS = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)

PROFILES: tuple[ArchProfile, ...] = (
    ArchProfile(key="sm_70", compute_capability=(7, 0), example_parts="V100", aliases=("v100", "volta"),
                smem_per_sm_bytes=96 * KIB, max_smem_per_block_optin_bytes=98304, reserved_smem_per_block_bytes=0,
                carveout_kib=(0, 8, 16, 32, 64, 96), max_threads_per_sm=2048, max_blocks_per_sm=32,
                multiprocessor_count=80),
    ArchProfile(key="sm_75", compute_capability=(7, 5), example_parts="T4, RTX 20xx", aliases=("t4", "turing"),
                smem_per_sm_bytes=64 * KIB, max_smem_per_block_optin_bytes=65536, reserved_smem_per_block_bytes=0,
                carveout_kib=(32, 64), max_threads_per_sm=1024, max_blocks_per_sm=16, multiprocessor_count=40),
    ArchProfile(key="sm_80", compute_capability=(8, 0), example_parts="A100", aliases=("a100", "ampere"),
                smem_per_sm_bytes=164 * KIB, max_smem_per_block_optin_bytes=166912, reserved_smem_per_block_bytes=KIB,
                carveout_kib=_AMPERE_CARVEOUTS, max_threads_per_sm=2048, max_blocks_per_sm=32,
                multiprocessor_count=108),
    ArchProfile(key="sm_86", compute_capability=(8, 6), example_parts="RTX 30xx, A10, A40",
                aliases=("a10", "a40", "rtx-3090"), smem_per_sm_bytes=100 * KIB,
                max_smem_per_block_optin_bytes=101376, reserved_smem_per_block_bytes=KIB,
                carveout_kib=_CONSUMER_CARVEOUTS, max_threads_per_sm=1536, max_blocks_per_sm=16,
                multiprocessor_count=84),
    ArchProfile(key="sm_87", compute_capability=(8, 7), example_parts="Jetson Orin", aliases=("orin",),
                smem_per_sm_bytes=164 * KIB, max_smem_per_block_optin_bytes=166912, reserved_smem_per_block_bytes=KIB,
                carveout_kib=_AMPERE_CARVEOUTS, max_threads_per_sm=1536, max_blocks_per_sm=16,
                multiprocessor_count=16),
    ArchProfile(key="sm_89", compute_capability=(8, 9), example_parts="L4, L40S, RTX 40xx",
                aliases=("l4", "l40s", "ada"), smem_per_sm_bytes=100 * KIB, max_smem_per_block_optin_bytes=101376,
                reserved_smem_per_block_bytes=KIB, carveout_kib=_CONSUMER_CARVEOUTS, max_threads_per_sm=1536,
                max_blocks_per_sm=24, multiprocessor_count=142),
    ArchProfile(key="sm_90", compute_capability=(9, 0), example_parts="H100, H200, GH200",
                aliases=("h100", "h200", "gh200", "hopper"), smem_per_sm_bytes=228 * KIB,
                max_smem_per_block_optin_bytes=232448, reserved_smem_per_block_bytes=KIB,
                carveout_kib=_HOPPER_CARVEOUTS, max_threads_per_sm=2048, max_blocks_per_sm=32,
                multiprocessor_count=132),
    ArchProfile(key="sm_100", compute_capability=(10, 0), example_parts="B200, GB200",
                aliases=("b200", "gb200", "blackwell"), smem_per_sm_bytes=228 * KIB,
                max_smem_per_block_optin_bytes=232448, reserved_smem_per_block_bytes=KIB,
                carveout_kib=_HOPPER_CARVEOUTS, max_threads_per_sm=2048, max_blocks_per_sm=32,
                multiprocessor_count=148),
    ArchProfile(key="sm_103", compute_capability=(10, 3), example_parts="B300", aliases=("b300",),
                smem_per_sm_bytes=228 * KIB, max_smem_per_block_optin_bytes=232448, reserved_smem_per_block_bytes=KIB,
                carveout_kib=None, max_threads_per_sm=2048, max_blocks_per_sm=32, multiprocessor_count=148,
                confirmed=False),
    ArchProfile(key="sm_110", compute_capability=(11, 0), example_parts="Thor", aliases=("thor",),
                smem_per_sm_bytes=228 * KIB, max_smem_per_block_optin_bytes=232448,
                reserved_smem_per_block_bytes=None, carveout_kib=None, max_threads_per_sm=2048,
                max_blocks_per_sm=32, multiprocessor_count=20, confirmed=False),
    ArchProfile(key="sm_120", compute_capability=(12, 0), example_parts="RTX PRO 6000 Blackwell, RTX 50xx",
                aliases=("rtx-pro-6000", "rtx-5090"), smem_per_sm_bytes=100 * KIB,
                max_smem_per_block_optin_bytes=101376, reserved_smem_per_block_bytes=KIB,
                carveout_kib=_CONSUMER_CARVEOUTS, max_threads_per_sm=1536, max_blocks_per_sm=24,
                multiprocessor_count=188),
    ArchProfile(key="sm_121", compute_capability=(12, 1), example_parts="GB10 / DGX Spark",
                aliases=("gb10", "dgx-spark"), smem_per_sm_bytes=100 * KIB, max_smem_per_block_optin_bytes=101376,
                reserved_smem_per_block_bytes=KIB, carveout_kib=None, max_threads_per_sm=1536, max_blocks_per_sm=24,
                multiprocessor_count=48, confirmed=False),
)


def profile_names() -> list[str]:
    """Every accepted profile name: the keys (``sm_90``), the cc strings (``9.0``) and the aliases."""
    names: list[str] = []
    for p in PROFILES:
        names += [p.key, p.cc_string, *p.aliases]
    return names


# CUTLASS builds name the architecture-specific target (sm_90a, sm_100a, sm_120f): the same limits.
_ARCH_SUFFIX = re.compile(r"(?<=\d)[af]$")


def find_profile(name: str) -> ArchProfile | None:
    """The profile called ``name`` (key, cc string or alias, case-insensitive, with or without CUTLASS's
    a/f suffix), or None."""
    wanted = name.strip().lower()
    for candidate in dict.fromkeys((wanted, _ARCH_SUFFIX.sub("", wanted))):
        for p in PROFILES:
            if candidate in (p.key, p.cc_string, *p.aliases):
                return p
    return None


def profile_for_cc(cc: tuple[int, int]) -> ArchProfile | None:
    """The published row for a compute capability, or None when the table does not know it."""
    for p in PROFILES:
        if p.compute_capability == tuple(cc):
            return p
    return None
