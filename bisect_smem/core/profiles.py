"""Published per-architecture shared memory facts (CUDA C++ Programming Guide, "Compute Capabilities").

Data only. The simulated backend builds devices from these rows, and real measurements are
validated against them. KB = 1024 bytes. Rows marked ``confirmed=False`` come from CUTLASS / CuTe
constants or user reports rather than the guide.
"""

from __future__ import annotations

from dataclasses import dataclass

from bisect_smem.core.errors import UsageError
from bisect_smem.core.hardware import KIB


@dataclass(frozen=True)
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
    def arch(self) -> str:
        """The NVRTC architecture name, e.g. ``sm_90``."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    @property
    def cluster_launch(self) -> bool:
        """Thread block clusters exist from cc 9.0 on."""
        return self.compute_capability >= (9, 0)


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
    ArchProfile("sm_70", (7, 0), "V100", ("v100", "volta"), 96 * KIB, 98304, 0,
                (0, 8, 16, 32, 64, 96), 2048, 32, 80),
    ArchProfile("sm_75", (7, 5), "T4, RTX 20xx", ("t4", "turing"), 64 * KIB, 65536, 0,
                (32, 64), 1024, 16, 40),
    ArchProfile("sm_80", (8, 0), "A100", ("a100", "ampere"), 164 * KIB, 166912, KIB,
                _AMPERE_CARVEOUTS, 2048, 32, 108),
    ArchProfile("sm_86", (8, 6), "RTX 30xx, A10, A40", ("a10", "a40", "rtx-3090"), 100 * KIB, 101376, KIB,
                _CONSUMER_CARVEOUTS, 1536, 16, 84),
    ArchProfile("sm_87", (8, 7), "Jetson Orin", ("orin",), 164 * KIB, 166912, KIB,
                _AMPERE_CARVEOUTS, 1536, 16, 16),
    ArchProfile("sm_89", (8, 9), "L4, L40S, RTX 40xx", ("l4", "l40s", "ada"), 100 * KIB, 101376, KIB,
                _CONSUMER_CARVEOUTS, 1536, 24, 142),
    ArchProfile("sm_90", (9, 0), "H100, H200, GH200", ("h100", "h200", "gh200", "hopper"), 228 * KIB, 232448, KIB,
                _HOPPER_CARVEOUTS, 2048, 32, 132),
    ArchProfile("sm_100", (10, 0), "B200, GB200", ("b200", "gb200", "blackwell"), 228 * KIB, 232448, KIB,
                _HOPPER_CARVEOUTS, 2048, 32, 148),
    ArchProfile("sm_103", (10, 3), "B300", ("b300",), 228 * KIB, 232448, KIB,
                None, 2048, 32, 148, confirmed=False),
    ArchProfile("sm_110", (11, 0), "Thor", ("thor",), 228 * KIB, 232448, None,
                None, 2048, 32, 20, confirmed=False),
    ArchProfile("sm_120", (12, 0), "RTX PRO 6000 Blackwell, RTX 50xx", ("rtx-pro-6000", "rtx-5090"),
                100 * KIB, 101376, KIB, _CONSUMER_CARVEOUTS, 1536, 24, 188),
    ArchProfile("sm_121", (12, 1), "GB10 / DGX Spark", ("gb10", "dgx-spark"), 100 * KIB, 101376, KIB,
                None, 1536, 24, 48, confirmed=False),
)


def profile_names() -> list[str]:
    """Every accepted profile name: the keys (``sm_90``), the cc strings (``9.0``) and the aliases."""
    names: list[str] = []
    for p in PROFILES:
        names += [p.key, p.cc_string, *p.aliases]
    return names


def find_profile(name: str) -> ArchProfile | None:
    """The profile called ``name`` (key, cc string or alias, case-insensitive), or None."""
    wanted = name.strip().lower()
    for p in PROFILES:
        if wanted in (p.key, p.cc_string, *p.aliases):
            return p
    return None


def profile_for_cc(cc: tuple[int, int]) -> ArchProfile | None:
    """The published row for a compute capability, or None when the table does not know it."""
    for p in PROFILES:
        if p.compute_capability == tuple(cc):
            return p
    return None
