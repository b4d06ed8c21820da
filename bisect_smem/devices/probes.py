"""What one probe can come back with: its outcome class, the CUDA error classification, and the
result types of every kind of launch (probe, residency, cluster, march, leftover). Plain data, shared
by every backend and by the kernels' ABI; each is a ``ProbeResult`` (``outcome``, ``detail``, ``ok``)
with its own counts."""

from __future__ import annotations

from bisect_smem.core.frozen import frozen
from bisect_smem.core.integrity import SmMarch
from bisect_smem.core.outcomes import TOO_BIG, Outcome

# The classes are core facts; backends and experiments take them from here with the results.
__all__ = ["TOO_BIG", "Outcome"]


_ERROR_CLASSES: tuple[tuple[tuple[str, ...], Outcome], ...] = (
    (("CUDA_ERROR_INVALID_VALUE", "cudaErrorInvalidValue"), Outcome.INVALID_VALUE),
    (("CUDA_ERROR_OUT_OF_RESOURCES", "cudaErrorLaunchOutOfResources"), Outcome.OUT_OF_RESOURCES),
    (("CUDA_ERROR_NO_BINARY_FOR_GPU", "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_INVALID_IMAGE",
      "CUDA_ERROR_INVALID_PTX", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"), Outcome.NO_BINARY),
    (("CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES", "CUDA_ERROR_INVALID_CLUSTER_SIZE", "cudaErrorClusterOutOfResources",
      "cudaErrorInvalidClusterSize"), Outcome.CLUSTER_MISCONFIG),
    (("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_MISALIGNED_ADDRESS",
      "CUDA_ERROR_ILLEGAL_INSTRUCTION", "CUDA_ERROR_HARDWARE_STACK_ERROR", "cudaErrorIllegalAddress",
      "cudaErrorLaunchFailure", "cudaErrorMisalignedAddress"), Outcome.ILLEGAL_ADDRESS),
    (("CUDA_ERROR_LAUNCH_TIMEOUT", "cudaErrorLaunchTimeout"), Outcome.TIMEOUT),
)


def classify_cuda_error(message: str) -> Outcome:
    """Map a CUDA error name (or a message that contains one) to its Outcome class."""
    for names, outcome in _ERROR_CLASSES:
        if any(name in message for name in names):
            return outcome
    return Outcome.OTHER


@frozen
class SmemRegisters:
    """PTX special registers read by thread 0 of a probe block; None where the cc lacks the register."""

    dynamic_smem_size: int | None = None
    total_smem_size: int | None = None
    reserved_smem_offset_begin: int | None = None
    reserved_smem_offset_end: int | None = None
    reserved_smem_offset_cap: int | None = None
    aggr_smem_size: int | None = None

    @property
    def reserved_bytes(self) -> int | None:
        """The reserved window of the block: cap minus begin (dynamic memory starts at the cap)."""
        if self.reserved_smem_offset_cap is None or self.reserved_smem_offset_begin is None:
            return None
        return self.reserved_smem_offset_cap - self.reserved_smem_offset_begin


@frozen
class ProbeResult:
    """What every kind of launch comes back with: its outcome class and the driver's words. Each kind adds
    its own counts; only a verified success (``ok``) means the launch ran as asked."""

    outcome: Outcome
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Only a verified success counts (a march's or cluster's own bytes are checked separately)."""
        return self.outcome is Outcome.OK


@frozen
class LaunchOutcome(ProbeResult):
    """The result of one probe: an attribute call or a launch with its read-back check."""

    registers: SmemRegisters | None = None
    bytes_verified: int = 0
    dynamic_base_offset_bytes: int | None = None  # where the dynamic array starts in the shared window


@frozen
class ResidencyOutcome(ProbeResult):
    """How many blocks sat on each SM at once (peak per SM, min and max over SMs), and the API's answer."""

    blocks_per_sm_min: int | None = None
    blocks_per_sm_max: int | None = None
    api_blocks_per_sm: int | None = None


def residency_from_peaks(peaks: list[int], api_blocks_per_sm: int | None) -> ResidencyOutcome:
    """The outcome of a residency launch from its per-SM peak counters (SMs that ran nothing drop out)."""
    seen = [p for p in peaks if p]
    if not seen:
        return ResidencyOutcome(Outcome.OTHER, "no block reported its SM")
    return ResidencyOutcome(Outcome.OK, "", min(seen), max(seen), api_blocks_per_sm)


@frozen
class ClusterOutcome(ProbeResult):
    """One cluster launched with distributed shared memory checked across every block of it."""

    blocks_ran: int = 0
    bytes_checked: int = 0
    bytes_wrong: int = 0
    cluster_size_seen: int = 0

    def dsm_verified(self, cluster_size: int, dynamic_bytes: int) -> bool:
        """Every block ran, saw the cluster size asked for, and read all of its neighbour's bytes right."""
        return (self.ok and self.blocks_ran == cluster_size and self.cluster_size_seen == cluster_size
                and self.bytes_checked == cluster_size * dynamic_bytes and self.bytes_wrong == 0)


@frozen
class ClusterResidencyOutcome(ProbeResult):
    """How many clusters ran at once over the whole GPU, and the API's prediction."""

    active_clusters: int | None = None
    api_active_clusters: int | None = None


@frozen
class MarchOutcome(ProbeResult):
    """One launch of the march kernel: a slot per block that ran (blocks that never ran are left out)."""

    blocks: tuple[SmMarch, ...] = ()


@frozen
class LeftoverOutcome(ProbeResult):
    """One launch of a leftover kernel: per block, its SM, the words written or read, and matches."""

    sm_ids: tuple[int, ...] = ()
    words: int = 0
    matching_words: int = 0


@frozen
class ProbeKernel:
    """Which compiled probe: its static shared memory, and whether its attribute may ever be raised.

    A default-ceiling kernel (``opt_in=False``) is a separate function whose attribute is never
    raised, because the attribute belongs to the function and would make it no longer fresh.
    """

    static_bytes: int
    opt_in: bool
    hole_bytes: int | None = None  # test only: a 0-byte static opt-in probe that reads wrong at this size

    def __post_init__(self) -> None:
        if self.static_bytes < 0:
            raise ValueError(f"static bytes must be >= 0 (got {self.static_bytes})")
        if self.hole_bytes is not None and (self.static_bytes or not self.opt_in or self.hole_bytes < 1):
            raise ValueError(f"a hole is planted in the 0-byte static opt-in probe at a size >= 1 "
                             f"(got {self.static_bytes} B static, opt_in={self.opt_in}, hole {self.hole_bytes})")


@frozen
class MarchFault:
    """Test only: the word of SM ``sm_id`` holding byte ``byte`` has that byte's low bit flipped between the
    march's first write and first read (kernels/validate.cu, smem_march_fault)."""

    sm_id: int
    byte: int

    @property
    def word(self) -> int:
        """The 32-bit word index of the byte."""
        return self.byte // 4

    @property
    def mask(self) -> int:
        """The bit flipped in that word: the low bit of the byte (words are little-endian)."""
        return 1 << (8 * (self.byte % 4))


@frozen
class Launch:
    """One probe of a batch: ``kernel`` in one block of ``threads``, with ``dynamic_bytes`` of dynamic shared
    memory; with ``raise_limit`` the opt-in attribute is set to ``dynamic_bytes`` just before the launch
    (a launch checks the attribute when it is enqueued), and a refused attribute is the probe's outcome."""

    kernel: ProbeKernel
    dynamic_bytes: int
    threads: int
    raise_limit: bool = False
    sweep: bool = False  # one of the granule sweep's launches: a replay answers it as its report recorded the sweep


@frozen
class ResidencyProbe:
    """One residency probe of a batch: every SM filled with blocks of ``threads`` and ``dynamic_bytes``,
    held ``hold_ns``, under the carveout preference ``carveout_percent`` where one is given."""

    dynamic_bytes: int
    threads: int
    hold_ns: int
    carveout_percent: int | None = None
