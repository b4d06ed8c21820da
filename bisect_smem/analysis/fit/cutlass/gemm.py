"""What a CUTLASS GEMM kernel is asked to be (tile, types, schedule, stages) and what the library makes of
it: the stage count, every storage's bytes, and whether it builds at all."""

from __future__ import annotations

from dataclasses import field

from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION, check_version
from bisect_smem.analysis.fit.cutlass.types import Operand, operand, output_bits
from bisect_smem.core.errors import UsageError
from bisect_smem.core.frozen import frozen

SCHEDULES = ("auto", "cooperative", "pingpong", "1sm", "2sm")
# The MoE launcher's sm_100 epilogues: PtrArrayTmaWarpSpecialized{1,2}Sm, or PtrArrayNoSmemWarpSpecialized{1,2}Sm
# (registers straight to global memory, D aligned to 256 bits).
EPILOGUE_SCHEDULES = ("tma", "nosmem")
MIN_STAGES = 2  # "Specialization requires Stages set to value 2 or more."
MAX_CLUSTER = 16  # the most CTAs a cluster may have (non-portable; 8 portable)


@frozen
class GemmKernel:
    """The kernel: CTA-cluster tile M x N x K (the MMA tile; a 2-SM tile spans two CTAs), operand types,
    C and D types (C ``void``: no source), schedule, grouped (ptr-array), ``stages`` (None: auto) and
    ``epilogue_bytes`` (None: the default epilogue's storage)."""

    m: int
    n: int
    k: int
    a: str
    b: str
    c: str = "bf16"
    d: str = "bf16"
    schedule: str = "auto"
    grouped: bool = False
    stages: int | None = None
    epilogue_bytes: int | None = None
    launcher: str | None = None  # a library's kernel launcher whose type choices these are (launchers.py)
    fusion: str = "none"  # the launcher's epilogue fusion: none, or finalize (scatter, router scales, bias)
    swap_ab: bool = False  # A and B swapped: the kernel computes D^T, so C and D are column-major
    cutlass_version: str = CUTLASS_VERSION  # the release whose builders count it (CUTLASS_VERSIONS)
    cluster: tuple[int, int, int] = (1, 1, 1)  # the cluster shape, CTAs along M, N, K
    # The launcher's sm_100 epilogue: "tma" (PtrArrayTmaWarpSpecialized1Sm/2Sm) or "nosmem" (no shared memory).
    epilogue_schedule: str = "tma"

    def __post_init__(self) -> None:
        operand(self.a, "--dtype-a")
        operand(self.b, "--dtype-b")
        output_bits(self.c, "--c-dtype")
        output_bits(self.d, "--d-dtype")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"unknown --schedule {self.schedule!r}; valid: {', '.join(SCHEDULES)}")
        check_version(self.cutlass_version)
        if any(not 1 <= c <= MAX_CLUSTER for c in self.cluster) or self.cluster[0] * self.cluster[1] * self.cluster[2] > \
                MAX_CLUSTER:
            raise UsageError(f"--cluster {'x'.join(map(str, self.cluster))}: a cluster has at most {MAX_CLUSTER} CTAs "
                             "(8 portable)")
        if self.epilogue_schedule not in EPILOGUE_SCHEDULES:
            raise UsageError(f"unknown --epilogue-schedule {self.epilogue_schedule!r}; valid: "
                             f"{', '.join(EPILOGUE_SCHEDULES)}")
        if self.stages is not None and self.stages < 1:
            raise UsageError(f"--stages must be >= 1 (got {self.stages})")

    @property
    def op_a(self) -> Operand:
        """A's operand type."""
        return operand(self.a)

    @property
    def op_b(self) -> Operand:
        """B's operand type."""
        return operand(self.b)

    @property
    def c_bits(self) -> int:
        """Bits of a C element (0 for void)."""
        return output_bits(self.c, "--c-dtype")

    @property
    def d_bits(self) -> int:
        """Bits of a D element."""
        return output_bits(self.d, "--d-dtype")

    @property
    def block_scaled(self) -> bool:
        """Are the operands block-scaled (nvfp4, mxfp4, mxfp6, mxfp8)?"""
        return self.op_a.block_scaled or self.op_b.block_scaled


@frozen
class Build:
    """What CUTLASS makes of a GemmKernel for one family. ``builds`` is False with ``reason`` when the
    library refuses it; the byte counts are then those of the build that was refused (where there is
    one). ``parts`` names where every byte of the kernel's storage goes."""

    family: str
    builds: bool
    reason: str | None = None
    stages: int | None = None
    stage_bytes: int | None = None
    capacity_bytes: int | None = None  # the builder's capacity less the kernel storage it reserves
    carveout_bytes: int | None = None
    mainloop_bytes: int | None = None  # sizeof(CollectiveMainloop::SharedStorage)
    epilogue_bytes: int | None = None  # sizeof(CollectiveEpilogue::SharedStorage)
    kernel_bytes: int | None = None  # what the kernel holds besides mainloop and epilogue storage
    shared_storage_bytes: int | None = None  # GemmKernel::SharedStorageSize, what the launch asks for
    parts: tuple[tuple[str, int], ...] = field(default=())
    modelled: bool = True  # False: the library may build it, but this rule does not model it (reason says why)
    hint: str | None = None  # what would build instead, in the tool's words beside the library's reason
    device_only: bool = False  # refused by the kernel's device code alone: a host-only build of it passes

    @property
    def explained(self) -> str | None:
        """The library's reason, and the hint after it where there is one."""
        return f"{self.reason} (hint: {self.hint})" if self.reason and self.hint else self.reason

    def overflows(self, capacity: int) -> bool:
        """Did the builder's automatic stage count give a kernel larger than the builder's own capacity?"""
        return self.builds and self.shared_storage_bytes is not None and self.shared_storage_bytes > capacity


def auto_stage_count(capacity: int, carveout: int, stage: int) -> int:
    """(capacity - carveout) // stage, as the builders compute it (never below 0)."""
    return max(0, (capacity - carveout) // stage)
