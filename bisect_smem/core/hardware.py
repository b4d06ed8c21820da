"""The hardware rules every layer applies, each written once: limits, rounding, alignment, the block
footprint and the blocks-per-SM formula, what each compute capability has (the cc gates), and the
driver's attribute ids.

The simulator models a device with these rules, ``fit`` predicts launches with them, the residency
experiment records their prediction beside what the GPU did, and the verdicts compare against them.
Sizes are bytes; KiB = 1024 bytes.
"""

from __future__ import annotations

import enum

KIB = 1024
MAX_THREADS_PER_BLOCK = 1024
MAX_REGISTERS_PER_BLOCK = 64 * KIB  # 32-bit registers one block may hold, every cc from 3.0 on
WARP_SIZE = 32
REGISTER_ALLOCATION_UNIT = 256  # registers are given to a warp in units of this many (cc 3.0 on)
DEFAULT_SMEM_PER_BLOCK_BYTES = 48 * KIB  # without opt-in, static + dynamic must fit in 48 KiB
STATIC_SMEM_COMPILE_CAP_BYTES = 48 * KIB  # ptxas: "uses too much shared data (..., 0xc000 max)"
# The dynamic array starts 16-byte aligned after the static data, so 1 B of static data costs 16 B of
# the opt-in budget (measured on an H200: 232432 B dynamic beside 1 B static).
DYNAMIC_ALIGNMENT_BYTES = 16
PORTABLE_CLUSTER_SIZE = 8  # the largest cluster every cc 9.0+ device must launch
NONPORTABLE_CLUSTER_SIZE = 16  # the largest with cudaFuncAttributeNonPortableClusterSizeAllowed
SMEM_REGISTERS_FROM_CC = (8, 0)  # the reserved per-block window and the PTX registers that show it
AGGR_REGISTER_FROM_CC = (9, 0)  # %aggr_smem_size
CLUSTERS_FROM_CC = (9, 0)  # thread block clusters and distributed shared memory
B200_CC = (10, 0)  # B200 and GB200; cc 10.3 (B300) takes other kernel branches in the libraries
# Clusters are scheduled within one GPC; the simulator gives every GPC this many SMs (the last one the rest).
SMS_PER_GPC = 16
DEFAULT_RESERVED_BYTES = KIB  # the reserved window from cc 8.0 on, where a table leaves it unconfirmed
# The occupancy calculator's shared memory allocation unit: the granule where neither a measurement nor
# the published table gives one.
DEFAULT_GRANULE_BYTES = 128


class DriverAttribute(enum.IntEnum):
    """``CUdevice_attribute`` ids this tool reads with cuDeviceGetAttribute."""

    MAX_SHARED_MEMORY_PER_BLOCK = 8
    MULTIPROCESSOR_COUNT = 16
    MAX_THREADS_PER_MULTIPROCESSOR = 39
    COMPUTE_CAPABILITY_MAJOR = 75
    COMPUTE_CAPABILITY_MINOR = 76
    MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
    MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    MAX_BLOCKS_PER_MULTIPROCESSOR = 106
    RESERVED_SHARED_MEMORY_PER_BLOCK = 111
    CLUSTER_LAUNCH = 120


def ceil_div(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` rounded up (denominator >= 1)."""
    if denominator < 1:
        raise ValueError(f"denominator must be >= 1 (got {denominator})")
    return -(-numerator // denominator)


def round_up(value: int, multiple: int) -> int:
    """``value`` rounded up to a whole number of ``multiple`` (both >= 0, multiple >= 1)."""
    if multiple < 1:
        raise ValueError(f"multiple must be >= 1 (got {multiple})")
    return ceil_div(value, multiple) * multiple


def round_down(value: int, multiple: int) -> int:
    """``value`` rounded down to a whole number of ``multiple``."""
    if multiple < 1:
        raise ValueError(f"multiple must be >= 1 (got {multiple})")
    return value // multiple * multiple


def block_registers(registers_per_thread: int, threads: int) -> int:
    """The registers a block of ``threads`` holds: each warp's rounded up to the allocation unit."""
    return round_up(registers_per_thread * WARP_SIZE, REGISTER_ALLOCATION_UNIT) * ceil_div(threads, WARP_SIZE)


def static_footprint(static_bytes: int) -> int:
    """Bytes the static data takes before the dynamic array starts (its alignment included)."""
    return round_up(static_bytes, DYNAMIC_ALIGNMENT_BYTES)


def block_request_bytes(dynamic_bytes: int, static_bytes: int) -> int:
    """What one block asks of the per-block limit: the dynamic bytes behind the aligned static data."""
    return dynamic_bytes + static_footprint(static_bytes)


def has_smem_registers(cc: tuple[int, int]) -> bool:
    """cc 8.0+: a block has a reserved window, and %dynamic_smem_size, %total_smem_size and
    %reserved_smem_offset_* show what it got."""
    return tuple(cc) >= SMEM_REGISTERS_FROM_CC


def has_aggr_register(cc: tuple[int, int]) -> bool:
    """cc 9.0+: %aggr_smem_size (the block's whole shared memory, reserved window included)."""
    return tuple(cc) >= AGGR_REGISTER_FROM_CC


def has_tma(cc: tuple[int, int]) -> bool:
    """cc 9.0+: the Tensor Memory Accelerator, which Triton's tensor descriptors load through."""
    return tuple(cc) >= (9, 0)


def has_clusters(cc: tuple[int, int]) -> bool:
    """cc 9.0+: thread block clusters, with distributed shared memory between their blocks."""
    return tuple(cc) >= CLUSTERS_FROM_CC


def default_reserved_bytes(compute_capability: tuple[int, int]) -> int:
    """The reserved per-block window where nothing better is known: 1 KiB from cc 8.0 on, else none."""
    return DEFAULT_RESERVED_BYTES if has_smem_registers(compute_capability) else 0


def block_footprint(request_bytes: int, granule_bytes: int, reserved_bytes: int) -> int:
    """Shared memory one block takes on its SM: the request in whole granules, plus the reserved window."""
    return round_up(request_bytes, granule_bytes) + reserved_bytes


def blocks_per_sm(footprint_bytes: int, threads: int, smem_per_sm_bytes: int | None,
                  max_blocks_per_sm: int | None, max_threads_per_sm: int | None) -> tuple[int | None, str | None]:
    """floor(smem_per_SM / footprint), capped by the block and thread limits, and which limit binds
    (``blocks``, ``threads``, ``smem`` or a ``+``-joined tie). A block with no footprint has no smem limit.
    None where no limit is known."""
    candidates = {
        "blocks": max_blocks_per_sm,
        "threads": max_threads_per_sm // threads if max_threads_per_sm else None,
        "smem": smem_per_sm_bytes // footprint_bytes if smem_per_sm_bytes and footprint_bytes else None,
    }
    known = {k: v for k, v in candidates.items() if v is not None}
    if not known:
        return None, None
    blocks = min(known.values())
    return blocks, "+".join(k for k, v in known.items() if v == blocks)


def portable_cluster_limit(potential_size: int | None) -> int | None:
    """The largest portable cluster given cuOccupancyMaxPotentialClusterSize's answer."""
    return None if potential_size is None else min(potential_size, PORTABLE_CLUSTER_SIZE)


# CUTLASS 3.x/4.x collective families: the architectures with TMA warp-specialized GEMM builders.
SM90_FAMILY, SM100_FAMILY, SM120_FAMILY = (9, 0), (10, 0), (12, 0)


def gemm_family(compute_capability: tuple[int, int] | None) -> str | None:
    """The CUTLASS collective family of an architecture: 'sm90' (cc 9.x), 'sm100' (10.x, 11.x), 'sm120'
    (12.x), or None before sm_90 (CUTLASS's multistage sm_80 kernels are another model) and when unknown."""
    if compute_capability is None or compute_capability < SM90_FAMILY:
        return None
    if compute_capability < SM100_FAMILY:
        return "sm90"
    return "sm100" if compute_capability < SM120_FAMILY else "sm120"


# Triton 3.6's NVIDIA matmul by architecture (AccelerateMatmul's getMMAVersionSafe, TargetInfo).
MMA_SYNC_FROM, LDMATRIX_FROM, FP8_E4M3_FROM, WGMMA_CC, TCGEN05_CC = (8, 0), (7, 5), (8, 9), (9, 0), (10, 0)
MMA_SYNC_12X = 12  # sm_120 and sm_121 (GeForce and workstation Blackwell) use mma.sync


def tensor_core_mma(compute_capability: tuple[int, int] | None) -> str | None:
    """The tensor-core MMA a GEMM's dot compiles to (Triton's, by AccelerateMatmul): 'mma.sync' on cc 8.x
    and 12.x, 'wgmma' on cc 9.x (mma.sync where wgmma does not take the shapes), 'tcgen05' on cc 10.x;
    None before sm_80, on cc 11.x (whose compile cannot be checked here) and when unknown."""
    if compute_capability is None or compute_capability < MMA_SYNC_FROM:
        return None
    return {MMA_SYNC_FROM[0]: "mma.sync", WGMMA_CC[0]: "wgmma", TCGEN05_CC[0]: "tcgen05",
            MMA_SYNC_12X: "mma.sync"}.get(compute_capability[0])


def has_ldmatrix(compute_capability: tuple[int, int]) -> bool:
    """ldmatrix (shared memory to registers by 8x8 matrices): cc 7.5 on."""
    return compute_capability >= LDMATRIX_FROM


def has_stmatrix(compute_capability: tuple[int, int]) -> bool:
    """stmatrix (registers to shared memory by 8x8 matrices): cc 9.0 on."""
    return compute_capability >= WGMMA_CC


def has_fp8_e4m3(compute_capability: tuple[int, int]) -> bool:
    """float8_e4m3fn tensors (Triton's fp8e4nv): cc 8.9 on."""
    return compute_capability >= FP8_E4M3_FROM


NATIVE_FP8_MMA_SYNC = ((8, 9), (12, 0))  # AccelerateMatmul's mmav2SupportsFp8Operands


def has_native_fp8_mma_sync(compute_capability: tuple[int, int]) -> bool:
    """mma.sync on fp8 operands in hardware (sm_89, sm_120); elsewhere Triton upcasts them to fp16."""
    return compute_capability in NATIVE_FP8_MMA_SYNC
