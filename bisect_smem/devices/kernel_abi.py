"""The probe kernels' source, names and result layout, shared by every backend that compiles them."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from bisect_smem.devices.backends.base import LaunchOutcome, Outcome, SmemRegisters

PROBE_FILE = "probe.cu"
RESIDENCY_FILE = "residency.cu"
CLUSTER_FILE = "cluster.cu"
FAULT_FILE = "fault.cu"
KERNEL_FILES = (PROBE_FILE, RESIDENCY_FILE, CLUSTER_FILE, FAULT_FILE)
ILLEGAL_ACCESS_NAME = "smem_illegal_access<0>"
CLUSTER_RESULT_WORDS = 4
RESIDENCY_COUNTER_WORDS = 2 * 4096  # two words per %smid, which is below 4096 on every GPU so far
RESIDENCY_STAIRCASE, RESIDENCY_CARVEOUT = 0, 1
RESULT_WORDS = 11
FLAG_SM80_REGISTERS = 1
FLAG_AGGR_REGISTER = 2
NVRTC_OPTIONS = ("-std=c++17",)


def read_kernel(filename: str) -> str:
    """The text of ``kernels/<filename>``, from the installed package or, uninstalled, the source tree."""
    try:
        return resources.files("bisect_smem.kernels").joinpath(filename).read_text()
    except (ModuleNotFoundError, FileNotFoundError):
        return (Path(__file__).resolve().parents[2] / "kernels" / filename).read_text()


def module_source() -> str:
    """Every kernel file in one translation unit, so one NVRTC call compiles all variants."""
    return "\n".join(read_kernel(name) for name in KERNEL_FILES)


def residency_name(variant: int) -> str:
    return f"smem_residency<{variant}>"


def cluster_dsm_name(nonportable: bool) -> str:
    return f"smem_cluster_dsm<{int(nonportable)}>"


def cluster_residency_name(nonportable: bool) -> str:
    return f"smem_cluster_residency<{int(nonportable)}>"


def module_name_expressions(static_sizes: tuple[int, ...]) -> list[str]:
    """Every kernel instantiation the module needs."""
    return (probe_name_expressions(static_sizes)
            + [residency_name(RESIDENCY_STAIRCASE), residency_name(RESIDENCY_CARVEOUT)]
            + [cluster_dsm_name(v) for v in (False, True)] + [cluster_residency_name(v) for v in (False, True)]
            + [ILLEGAL_ACCESS_NAME])


def probe_name(static_bytes: int, opt_in: bool) -> str:
    """The C++ name expression of one probe instantiation."""
    return f"smem_probe<{static_bytes}u, {int(opt_in)}>"


def probe_name_expressions(static_sizes: tuple[int, ...]) -> list[str]:
    return [probe_name(s, o) for s in static_sizes for o in (False, True)]


def pattern_byte(index: int, seed: int) -> int:
    """The byte the kernel writes at ``index`` (mirror of smem_pattern in probe.cu)."""
    return (((index ^ (index >> 8) ^ (index >> 16)) * 151 + seed) & 0xFFFFFFFF) & 0xFF


def decode_probe_result(words: list[int], static_bytes: int, dynamic_bytes: int, seed: int) -> LaunchOutcome:
    """Turn the kernel's result words into an outcome: OK only if every byte was read back correctly."""
    bad, checked = words[0], words[1]
    flags = words[9]
    sm80 = bool(flags & FLAG_SM80_REGISTERS)
    registers = SmemRegisters(
        dynamic_smem_size=words[2] if sm80 else None,
        total_smem_size=words[3] if sm80 else None,
        reserved_smem_offset_begin=words[4] if sm80 else None,
        reserved_smem_offset_end=words[5] if sm80 else None,
        reserved_smem_offset_cap=words[6] if sm80 else None,
        aggr_smem_size=words[7] if flags & FLAG_AGGR_REGISTER else None,
    )
    expected = dynamic_bytes + static_bytes
    problems = []
    if checked != expected:
        problems.append(f"read back {checked} of {expected} B")
    if bad:
        problems.append(f"{bad} B wrong")
    if dynamic_bytes and words[8] != pattern_byte(dynamic_bytes - 1, seed):
        problems.append(f"last byte {words[8]:#04x}, expected {pattern_byte(dynamic_bytes - 1, seed):#04x}")
    if problems:
        return LaunchOutcome(Outcome.VERIFY_FAILED, "; ".join(problems), registers, checked - bad, words[10])
    return LaunchOutcome(Outcome.OK, "", registers, checked, words[10])
