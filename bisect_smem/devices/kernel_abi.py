"""The probe kernels' source, names and result layout, shared by every backend that compiles them."""

from __future__ import annotations

import enum
from importlib import resources
from pathlib import Path

from bisect_smem.devices.probes import LaunchOutcome, Outcome, SmemRegisters

PROBE_FILE = "probe.cu"
RESIDENCY_FILE = "residency.cu"
CLUSTER_FILE = "cluster.cu"
FAULT_FILE = "fault.cu"
VALIDATE_FILE = "validate.cu"
KERNEL_FILES = (PROBE_FILE, RESIDENCY_FILE, CLUSTER_FILE, FAULT_FILE, VALIDATE_FILE)
VALIDATE_NAMES = ("smem_march", "smem_leftover_write", "smem_leftover_read")
ILLEGAL_ACCESS_NAME = "smem_illegal_access<0>"
# Test only: the validation kernels with a planted fault, to prove on a GPU that the fault is found.
MARCH_FAULT_NAME = "smem_march_fault<0>"  # one word of one SM corrupted between the march's write and read
PROBE_HOLE_NAME = "smem_probe_hole<0>"  # the 0-byte static opt-in probe reading one byte wrong at one size
FAULT_VARIANT_NAMES = (MARCH_FAULT_NAME, PROBE_HOLE_NAME)
VALIDATION_KINDS = ("sm_march", "granule_sweep")
RESIDENCY_STAIRCASE, RESIDENCY_CARVEOUT = 0, 1
NVRTC_OPTIONS = ("-std=c++17",)


class ProbeWord(enum.IntEnum):
    """The probe kernels' result words (``out[...]`` in kernels/probe.cu and the numba probe)."""

    BYTES_WRONG = 0  # bytes that read back wrong
    BYTES_CHECKED = 1  # bytes read back and compared
    DYNAMIC_SMEM_SIZE = 2  # %dynamic_smem_size
    TOTAL_SMEM_SIZE = 3  # %total_smem_size
    RESERVED_OFFSET_BEGIN = 4  # %reserved_smem_offset_begin
    RESERVED_OFFSET_END = 5  # %reserved_smem_offset_end
    RESERVED_OFFSET_CAP = 6  # %reserved_smem_offset_cap
    AGGR_SMEM_SIZE = 7  # %aggr_smem_size
    LAST_DYNAMIC_BYTE = 8  # the last dynamic byte as read
    FLAGS = 9  # ProbeFlag bits: which registers the cc has
    DYNAMIC_BASE_OFFSET = 10  # shared-window offset where the dynamic array starts


class ProbeFlag(enum.IntFlag):
    """Bits of ``ProbeWord.FLAGS``."""

    SM80_REGISTERS = 1  # the %dynamic/%total/%reserved registers (cc 8.0+)
    AGGR_REGISTER = 2  # %aggr_smem_size (cc 9.0+)


class ClusterWord(enum.IntEnum):
    """The cluster DSM kernel's result words (kernels/cluster.cu)."""

    BYTES_WRONG = 0
    BYTES_CHECKED = 1
    BLOCKS_RAN = 2
    CLUSTER_SIZE_SEEN = 3  # %cluster_nctarank


class ResidencyWord(enum.IntEnum):
    """Per SM, two counter words (kernels/residency.cu): blocks there now, and the peak seen."""

    NOW = 0
    PEAK = 1


RESULT_WORDS = len(ProbeWord)
CLUSTER_RESULT_WORDS = len(ClusterWord)
MAX_SM_ID = 4096  # %smid is below this on every GPU so far
RESIDENCY_COUNTER_WORDS = len(ResidencyWord) * MAX_SM_ID


def kernel_path(filename: str) -> Path:
    """Where ``kernels/<filename>`` is: in the installed package or, uninstalled, the source tree."""
    try:
        installed = Path(str(resources.files("bisect_smem.kernels").joinpath(filename)))
    except ModuleNotFoundError:
        installed = None
    if installed is not None and installed.is_file():
        return installed
    return Path(__file__).resolve().parents[2] / "kernels" / filename


def read_kernel(filename: str) -> str:
    """The text of ``kernels/<filename>``."""
    return kernel_path(filename).read_text()


def module_source() -> str:
    """Every kernel file in one translation unit, so one NVRTC call compiles all variants."""
    return "\n".join(read_kernel(name) for name in KERNEL_FILES)


def residency_name(variant: int) -> str:
    """The residency kernel's name expression (staircase or carveout variant)."""
    return f"smem_residency<{variant}>"


def cluster_dsm_name(nonportable: bool) -> str:
    """The cluster distributed-shared-memory kernel, portable or not."""
    return f"smem_cluster_dsm<{int(nonportable)}>"


def cluster_residency_name(nonportable: bool) -> str:
    """The co-resident cluster counting kernel, portable or not."""
    return f"smem_cluster_residency<{int(nonportable)}>"


def module_name_expressions(static_sizes: tuple[int, ...], step_kinds: frozenset[str] | None = None) -> list[str]:
    """Every kernel instantiation the module needs for steps of ``step_kinds`` (None: every kind): fewer
    instantiations, less for NVRTC to compile on a cold node."""

    def wanted(kind: str) -> bool:
        return step_kinds is None or kind in step_kinds

    names = probe_name_expressions(static_sizes)
    names += [residency_name(variant) for kind, variant in (("residency", RESIDENCY_STAIRCASE),
                                                            ("carveout", RESIDENCY_CARVEOUT)) if wanted(kind)]
    if wanted("clusters"):
        names += [cluster_dsm_name(v) for v in (False, True)] + [cluster_residency_name(v) for v in (False, True)]
    names += [ILLEGAL_ACCESS_NAME, *VALIDATE_NAMES]  # validation kernels: small, always there
    return names + (list(FAULT_VARIANT_NAMES) if any(wanted(kind) for kind in VALIDATION_KINDS) else [])


def probe_name(static_bytes: int, opt_in: bool) -> str:
    """The C++ name expression of one probe instantiation."""
    return f"smem_probe<{static_bytes}u, {int(opt_in)}>"


def probe_name_expressions(static_sizes: tuple[int, ...]) -> list[str]:
    """A default and an opt-in probe per static size."""
    return [probe_name(s, o) for s in static_sizes for o in (False, True)]


def pattern_byte(index: int, seed: int) -> int:
    """The byte the kernel writes at ``index`` (mirror of smem_pattern in probe.cu)."""
    return (((index ^ (index >> 8) ^ (index >> 16)) * 151 + seed) & 0xFFFFFFFF) & 0xFF


def decode_probe_result(words: list[int], static_bytes: int, dynamic_bytes: int, seed: int) -> LaunchOutcome:
    """Turn the kernel's result words into an outcome: OK only if every byte was read back correctly."""
    w = ProbeWord
    bad, checked = words[w.BYTES_WRONG], words[w.BYTES_CHECKED]
    flags = ProbeFlag(words[w.FLAGS] & (ProbeFlag.SM80_REGISTERS | ProbeFlag.AGGR_REGISTER))
    sm80 = ProbeFlag.SM80_REGISTERS in flags
    registers = SmemRegisters(
        dynamic_smem_size=words[w.DYNAMIC_SMEM_SIZE] if sm80 else None,
        total_smem_size=words[w.TOTAL_SMEM_SIZE] if sm80 else None,
        reserved_smem_offset_begin=words[w.RESERVED_OFFSET_BEGIN] if sm80 else None,
        reserved_smem_offset_end=words[w.RESERVED_OFFSET_END] if sm80 else None,
        reserved_smem_offset_cap=words[w.RESERVED_OFFSET_CAP] if sm80 else None,
        aggr_smem_size=words[w.AGGR_SMEM_SIZE] if ProbeFlag.AGGR_REGISTER in flags else None,
    )
    expected = dynamic_bytes + static_bytes
    problems = []
    if checked != expected:
        problems.append(f"read back {checked} of {expected} B")
    if bad:
        problems.append(f"{bad} B wrong")
    last = words[w.LAST_DYNAMIC_BYTE]
    if dynamic_bytes and last != pattern_byte(dynamic_bytes - 1, seed):
        problems.append(f"last byte {last:#04x}, expected {pattern_byte(dynamic_bytes - 1, seed):#04x}")
    base = words[w.DYNAMIC_BASE_OFFSET]
    if problems:
        return LaunchOutcome(Outcome.VERIFY_FAILED, "; ".join(problems), registers, checked - bad, base)
    return LaunchOutcome(Outcome.OK, "", registers, checked, base)
