"""The CUTLASS builds whose shared storage is recorded: one case a row, over every collective family that
``fit`` models (sm_90 TMA warp-specialized cooperative and ping-pong, sm_100 UMMA 1SM and 2SM, dense and
block-scaled, sm_120 dense and block-scaled, and the grouped variant of each), with automatic and fixed
stage counts, and builds the library refuses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Case:
    """One build: arch (90, 100, 120), operand types (fit's names), the MMA tile and cluster, the schedule,
    C and D types (``void`` C: no source), grouped (ptr-array), and ``stages`` (0: StageCountAutoCarveout)."""

    arch: int
    a: str
    b: str
    tile: tuple[int, int, int]
    schedule: str = "auto"
    c: str = "bf16"
    d: str = "bf16"
    grouped: bool = False
    stages: int = 0
    cluster: tuple[int, int, int] = (1, 1, 1)
    # Compiled with its device code (cutlass::device_kernel<GemmKernel> instantiated for the arch), so the
    # kernel's own device-side static_asserts count too; refused cases always are.
    device: bool = False

    @property
    def name(self) -> str:
        """A readable id: ``sm120_nvfp4_128x256x128_auto_cbf16_dbf16`` and suffixes."""
        m, n, k = self.tile
        types = self.a if self.a == self.b else f"{self.a}-{self.b}"
        name = f"sm{self.arch}_{types}_{m}x{n}x{k}_{self.schedule}_c{self.c}_d{self.d}"
        if self.grouped:
            name += "_grouped"
        if self.stages:
            name += f"_stages{self.stages}"
        if self.cluster != (1, 1, 1):
            name += "_cluster" + "x".join(map(str, self.cluster))
        return name

    def as_dict(self) -> dict:
        """The case as committed beside its measured sizes."""
        return asdict(self) | {"name": self.name}


def _sm90() -> list[Case]:
    out = []
    for tile, sched in (((128, 128, 64), "cooperative"), ((128, 256, 64), "cooperative"), ((256, 128, 64), "cooperative"),
                        ((64, 128, 64), "pingpong"), ((128, 128, 64), "pingpong"), ((64, 256, 64), "pingpong"),
                        ((128, 128, 64), "auto"), ((128, 256, 64), "auto")):
        out.append(Case(90, "bf16", "bf16", tile, sched))
    out += [Case(90, "fp16", "fp16", (128, 128, 64), "cooperative", "fp16", "fp16"),
            Case(90, "bf16", "bf16", (128, 128, 64), "cooperative", "void", "bf16"),
            Case(90, "bf16", "bf16", (128, 128, 64), "cooperative", "fp32", "fp32"),
            Case(90, "e4m3", "e4m3", (128, 128, 128), "cooperative"),
            Case(90, "e4m3", "e4m3", (128, 256, 128), "pingpong", "fp16", "fp16"),
            Case(90, "e4m3", "e5m2", (128, 128, 128), "auto", "void", "bf16"),
            Case(90, "bf16", "bf16", (128, 128, 64), "cooperative", grouped=True),
            Case(90, "bf16", "bf16", (128, 128, 64), "pingpong", grouped=True),
            Case(90, "e4m3", "e4m3", (256, 128, 128), "cooperative", "fp16", "fp16", grouped=True),
            Case(90, "bf16", "bf16", (128, 256, 64), "cooperative", stages=5),
            Case(90, "bf16", "bf16", (128, 256, 64), "cooperative", stages=4)]
    return out


def _sm100() -> list[Case]:
    out = []
    for tile, sched, cluster in (((128, 256, 64), "1sm", (1, 1, 1)), ((128, 128, 64), "1sm", (1, 1, 1)),
                                 ((64, 128, 64), "1sm", (1, 1, 1)), ((256, 128, 64), "2sm", (2, 1, 1)),
                                 ((256, 256, 64), "2sm", (2, 1, 1)), ((128, 256, 64), "auto", (1, 1, 1))):
        out.append(Case(100, "bf16", "bf16", tile, sched, cluster=cluster))
    out += [Case(100, "e4m3", "e4m3", (128, 256, 128), "1sm"),
            Case(100, "e4m3", "e4m3", (256, 256, 128), "2sm", "void", "bf16", cluster=(2, 1, 1)),
            Case(100, "fp16", "fp16", (128, 128, 64), "1sm", "fp16", "fp16"),
            Case(100, "bf16", "bf16", (128, 256, 64), "1sm", "fp32", "fp32"),
            Case(100, "nvfp4", "nvfp4", (128, 256, 128), "1sm"),
            Case(100, "nvfp4", "nvfp4", (128, 128, 256), "1sm"),
            Case(100, "nvfp4", "nvfp4", (256, 256, 256), "2sm", cluster=(2, 1, 1)),
            Case(100, "mxfp8", "mxfp8", (128, 256, 128), "1sm"),
            Case(100, "mxfp4", "mxfp4", (128, 128, 256), "1sm"),
            Case(100, "mxfp6", "mxfp6", (128, 128, 128), "1sm"),
            Case(100, "bf16", "bf16", (128, 256, 64), "1sm", grouped=True),
            Case(100, "bf16", "bf16", (256, 128, 64), "2sm", grouped=True, cluster=(2, 1, 1)),
            Case(100, "nvfp4", "nvfp4", (128, 256, 128), "1sm", grouped=True),
            Case(100, "bf16", "bf16", (128, 128, 64), "1sm", grouped=True),
            Case(100, "fp16", "fp16", (64, 128, 64), "1sm", "fp16", "fp16", grouped=True),
            Case(100, "e4m3", "e4m3", (128, 256, 128), "1sm", grouped=True),
            Case(100, "e4m3", "e4m3", (256, 256, 128), "2sm", "void", "bf16", grouped=True, cluster=(2, 1, 1)),
            Case(100, "nvfp4", "nvfp4", (256, 256, 256), "2sm", grouped=True, cluster=(2, 1, 1)),
            Case(100, "mxfp8", "mxfp8", (128, 256, 128), "1sm", grouped=True),
            Case(100, "mxfp4", "mxfp4", (128, 128, 256), "1sm", grouped=True),
            Case(100, "bf16", "bf16", (128, 256, 64), "1sm", grouped=True, stages=4),
            Case(100, "bf16", "bf16", (128, 256, 64), "1sm", stages=4),
            Case(100, "nvfp4", "nvfp4", (128, 256, 128), "1sm", stages=6),
            # KernelScheduleAuto takes the 2-SM kernel for a cluster even along M; mxfp4 through MXF8F6F4.
            Case(100, "bf16", "bf16", (256, 128, 64), "auto", cluster=(2, 1, 1)),
            Case(100, "mxfp4-f8f6f4", "mxfp4-f8f6f4", (128, 128, 256), "1sm")]
    return out + _sm100_2sm_m128()


def _sm100_2sm_m128() -> list[Case]:
    """The 2-SM kernel with MMA tile M 128: each CTA holds 64 rows and its epilogue runs 2x2 warps."""
    out = [Case(100, "bf16", "bf16", (128, n, 64), "2sm", cluster=(2, 1, 1)) for n in (64, 128, 192, 256)]
    out += [Case(100, "fp16", "fp16", (128, 128, 64), "2sm", "fp16", "fp16", cluster=(4, 1, 1)),
            Case(100, "fp16", "fp16", (128, 256, 64), "2sm", "fp16", "fp16", cluster=(4, 1, 1)),
            Case(100, "bf16", "bf16", (128, 256, 64), "2sm", "fp32", "fp32", cluster=(2, 1, 1)),
            Case(100, "bf16", "bf16", (128, 128, 64), "2sm", "fp32", "fp32", cluster=(2, 1, 1)),
            Case(100, "e4m3", "e4m3", (128, 256, 128), "2sm", "void", "bf16", cluster=(2, 1, 1)),
            Case(100, "e4m3", "e4m3", (128, 128, 128), "2sm", cluster=(2, 1, 1)),
            Case(100, "e4m3", "e4m3", (128, 64, 128), "2sm", "void", "e4m3", cluster=(2, 1, 1)),
            Case(100, "bf16", "bf16", (128, 256, 64), "auto", cluster=(2, 1, 1)),
            Case(100, "bf16", "bf16", (128, 128, 64), "auto", cluster=(4, 1, 1)),
            Case(100, "bf16", "bf16", (128, 256, 64), "2sm", stages=4, cluster=(2, 1, 1)),
            Case(100, "e4m3", "e4m3", (128, 128, 128), "2sm", stages=3, cluster=(4, 1, 1)),
            Case(100, "bf16", "bf16", (128, 256, 64), "2sm", grouped=True, cluster=(2, 1, 1)),
            Case(100, "bf16", "bf16", (128, 128, 64), "2sm", grouped=True, cluster=(2, 1, 1))]
    return out


def _sm120() -> list[Case]:
    out = [Case(120, "nvfp4", "nvfp4", tile, sched) for tile, sched in (
        ((128, 256, 128), "auto"), ((128, 128, 128), "auto"), ((256, 128, 128), "auto"),
        ((128, 128, 256), "auto"), ((64, 128, 128), "pingpong"), ((128, 128, 128), "pingpong"),
        ((128, 128, 128), "cooperative"))]
    out += [Case(120, "mxfp4", "mxfp4", (128, 128, 128), "auto"),
            Case(120, "mxfp6", "mxfp6", (128, 128, 128), "auto"),
            Case(120, "mxfp8", "mxfp8", (128, 128, 128), "auto"),
            Case(120, "mxfp8", "mxfp6", (128, 128, 128), "auto"),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto", "void", "bf16"),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto", "fp16", "fp16"),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto", "fp32", "fp32"),
            Case(120, "e4m3", "e4m3", (128, 128, 128), "auto"),
            Case(120, "e4m3", "e4m3", (128, 128, 64), "pingpong"),
            Case(120, "e5m2", "e4m3", (128, 256, 64), "auto", "fp16", "fp16"),
            Case(120, "e2m1", "e2m1", (128, 128, 128), "auto"),
            Case(120, "e3m2", "e3m2", (128, 128, 128), "auto"),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto", stages=5),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto", stages=4),
            Case(120, "nvfp4", "nvfp4", (128, 256, 128), "auto", stages=4),
            Case(120, "nvfp4", "nvfp4", (256, 256, 128), "auto")]
    # Grouped (ptr-array), as CUTLASS's example 79d builds it: KernelScheduleAuto (cooperative) or the
    # explicit ptr-array schedules.
    out += [Case(120, "nvfp4", "nvfp4", tile, sched, grouped=True) for tile, sched in (
        ((128, 256, 128), "auto"), ((128, 128, 128), "auto"), ((128, 128, 128), "cooperative"), ((128, 128, 128), "pingpong"),
        ((256, 128, 128), "auto"), ((128, 256, 128), "pingpong"), ((64, 128, 128), "pingpong"))]
    out += [Case(120, "mxfp8", "mxfp8", (128, 128, 128), "auto", grouped=True),
            Case(120, "mxfp6", "mxfp6", (128, 128, 128), "cooperative", grouped=True),
            Case(120, "e4m3", "e4m3", (128, 128, 128), "cooperative", grouped=True),
            Case(120, "e4m3", "e4m3", (128, 128, 64), "pingpong", "fp16", "fp16", grouped=True),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto", "void", "bf16", grouped=True),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto", grouped=True, stages=5),
            Case(120, "nvfp4", "nvfp4", (128, 256, 128), "auto", grouped=True, stages=3)]
    return out


# Builds CUTLASS refuses: too big for two stages, or types the arch's builder does not take.
REFUSED = [Case(120, "bf16", "bf16", (128, 128, 64), "auto"),
           Case(90, "bf16", "bf16", (256, 256, 128), "cooperative"),
           Case(120, "e4m3", "e4m3", (256, 256, 128), "auto"),
           Case(120, "e3m2", "e3m2", (128, 128, 64), "auto"),
           # The builders' and kernels' own static_asserts: a grouped sm_90 kernel's schedule, sm_100's
           # 1-SM M, sm_120's block-scaled N, tiles no MMA divides, cooperative's M.
           Case(90, "bf16", "bf16", (128, 128, 64), "auto", grouped=True),
           Case(100, "bf16", "bf16", (256, 128, 64), "auto"),
           Case(100, "bf16", "bf16", (256, 128, 64), "2sm"),
           Case(100, "nvfp4", "nvfp4", (128, 256, 256), "2sm", cluster=(2, 1, 1)),
           Case(100, "mxfp8", "mxfp8", (128, 128, 128), "2sm", cluster=(2, 1, 1)),
           Case(120, "nvfp4", "nvfp4", (128, 192, 128), "auto"),
           Case(90, "fp16", "fp16", (1, 1, 1), "auto"),
           Case(90, "fp16", "fp16", (128, 128, 8), "cooperative"),
           Case(90, "bf16", "bf16", (64, 256, 64), "cooperative")]

CASES = _sm90() + _sm100() + _sm120()

# The rules a host-only build does not show, and the refusals CUTLASS words itself, each compiled with
# its device code: cooperative kernels (sm_90's and sm_120's) assert tile M >= 128 in their device code;
# sm_100's kernels assert SharedStorageSize <= the capacity there; mixed 16-bit operands; block-scaled K
# below one MMA; the 2-SM schedule without a 2-CTA cluster; sm_100's words for fewer than 2 stages. The last
# three build, device code and all.
RULES = [replace(c, device=True) for c in (
         Case(90, "bf16", "bf16", (64, 128, 64), "cooperative"),
         Case(90, "bf16", "bf16", (64, 128, 64), "cooperative", grouped=True),
         Case(120, "nvfp4", "nvfp4", (64, 128, 128), "auto"),
         Case(120, "nvfp4", "nvfp4", (64, 128, 128), "auto", grouped=True),
         Case(120, "e4m3", "e4m3", (64, 64, 64), "auto"),
         # The host builds of these three are in CASES; their device code asserts the capacity.
         Case(100, "bf16", "bf16", (128, 256, 64), "1sm", stages=4),
         Case(100, "bf16", "bf16", (128, 256, 64), "1sm", grouped=True, stages=4),
         Case(100, "nvfp4", "nvfp4", (128, 256, 128), "1sm", stages=6),
         Case(90, "fp16", "bf16", (128, 128, 64), "cooperative"),
         Case(100, "fp16", "bf16", (128, 128, 64), "1sm"),
         Case(100, "nvfp4", "nvfp4", (128, 128, 16), "1sm"),
         Case(100, "nvfp4", "nvfp4", (128, 128, 32), "1sm"),
         Case(120, "nvfp4", "nvfp4", (128, 128, 16), "auto"),
         Case(120, "nvfp4", "nvfp4", (128, 128, 32), "auto"),
         # sm_100's block-scaled CTA N is 64, 128, 192 or 256; sm_120's block-scaled M whole 128-row blocks.
         Case(100, "nvfp4", "nvfp4", (128, 32, 128), "1sm"),
         Case(120, "nvfp4", "nvfp4", (192, 128, 128), "pingpong"),
         Case(120, "nvfp4", "nvfp4", (128, 64, 128), "auto"),
         Case(120, "nvfp4", "nvfp4", (128, 32, 128), "auto", grouped=True),
         Case(100, "bf16", "bf16", (128, 128, 64), "2sm"),
         # sm_100 tiles too big for two stages: one stage (the mainloop's assert) or none (the builder's).
         Case(100, "bf16", "bf16", (128, 256, 256), "1sm"),
         Case(100, "bf16", "bf16", (128, 256, 512), "1sm"),
         Case(100, "nvfp4", "nvfp4", (128, 256, 1024), "1sm"),
         Case(100, "nvfp4", "nvfp4", (128, 256, 2048), "1sm"),
         Case(90, "bf16", "bf16", (128, 128, 64), "cooperative"),
         Case(100, "bf16", "bf16", (128, 256, 64), "1sm", stages=3),
         Case(120, "nvfp4", "nvfp4", (64, 128, 128), "pingpong"))]

# One small set compiled against every release from 4.4.1 on (truth.py --set releases): each case tells
# releases apart by one rule (sm_120's block-scaled capacity reservation and SFB rounding, its ptr-array MX
# schedules, N below 32 and dense ptr-array kernels; sm_100's 2-SM epilogue N), or is a control. Those some
# release refuses are compiled one a program.
RELEASES = [Case(120, "nvfp4", "nvfp4", (128, 64, 128), "auto", grouped=True),
            Case(120, "mxfp4", "mxfp4", (128, 128, 128), "auto", grouped=True),
            Case(120, "nvfp4", "nvfp4", (128, 128, 128), "auto"),
            Case(120, "nvfp4", "nvfp4", (128, 64, 128), "auto"),
            Case(100, "nvfp4", "nvfp4", (128, 256, 128), "1sm"),
            Case(100, "bf16", "bf16", (128, 256, 64), "1sm", grouped=True),
            Case(90, "bf16", "bf16", (128, 128, 64), "cooperative", grouped=True)]
RELEASES_REFUSED_BY_SOME = [Case(120, "nvfp4", "nvfp4", (128, 16, 128), "auto"),
                            Case(120, "mxfp8", "mxfp8", (128, 128, 128), "cooperative", grouped=True),
                            Case(120, "e4m3", "e4m3", (128, 128, 128), "cooperative", grouped=True),
                            Case(100, "bf16", "bf16", (128, 160, 64), "2sm", cluster=(2, 1, 1))]
