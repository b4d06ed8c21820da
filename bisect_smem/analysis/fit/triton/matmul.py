"""Triton's matmul (the tutorial kernel: A row-major, B row-major so N is contiguous, C = A @ B stored
in C's type) as Triton 3.6 compiles it for NVIDIA GPUs, and the shared memory it asks for
(``kernel.metadata.shared``), from the compiler's own rules:

- AccelerateMatmul picks the MMA: wgmma (v3) on sm_90 when K >= 256 / bits, M % 64 == 0, N % 8 == 0
  and the warps come in warp groups; tcgen05 (v5, its accumulator in tensor memory) on the sm_100
  family when M % 64 == 0, N % 16 == 0, the dot has 4 or 8 warps and its operands are not int8; else
  mma.sync (v2). Its instruction shape and warp tiling
  (mmaVersionToInstrShape, warpsPerTileV2/V3).
- The software pipeliner turns the loads of A and B into shared-memory buffers: wgmma and tcgen05 read
  their operands from shared memory until they complete, so ``num_stages`` buffers (tcgen05 adds its
  completion barriers); mma.sync copies them to registers first, so one fewer (at least one). An 8-bit operand that is not K-major (B here) cannot
  feed wgmma by an asynchronous copy: it is loaded into registers and written to one buffer in the
  loop. ``num_stages`` = 1 does not pipeline: one buffer each, written in the loop.
- The epilogue converts the accumulator from the MMA layout (for tcgen05, the layout it is loaded from
  tensor memory in) to the store's coalesced blocked layout through shared memory (swizzle.py), in C's
  type, after the loop.
- The allocator (allocation.py) places the buffers; the mainloop's are dead by the epilogue.
"""

from __future__ import annotations

from bisect_smem.analysis.fit.triton import swizzle
from bisect_smem.analysis.fit.triton.allocation import Buffer, allocate
from bisect_smem.analysis.fit.triton.layouts import COLUMNS_FIRST, Layout, blocked, mma, tmem_load
from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import ceil_div

THREADS_PER_WARP = 32
# Operand bits and C's bits for each operand type of the kernel (fp8 products are stored as fp16; int8
# products accumulate and are stored as int32).
DTYPES = {"fp16": (16, 16), "bf16": (16, 16), "fp32": (32, 32), "fp8e4m3": (8, 16), "int8": (8, 32)}
WGMMA_N = tuple(range(256, 0, -8))  # the instruction N values wgmma takes for these types, largest first
NVMMA_ALIGNMENT, SWIZZLED_ALIGNMENT, SCRATCH_ALIGNMENT = 1024, 16, 128
MBARRIER_BYTES = 8


@frozen
class Matmul:
    """One launch configuration: BLOCK_M x BLOCK_N x BLOCK_K, the operand type, num_stages, num_warps."""

    m: int
    n: int
    k: int
    dtype: str
    stages: int
    warps: int = 4
    b_k_major: bool = False  # B stored N x K with K contiguous (Triton's fp8 examples), else K x N

    @property
    def bits(self) -> int:
        """Bits of an A or B element."""
        return DTYPES[self.dtype][0]

    @property
    def out_bits(self) -> int:
        """Bits of a C element."""
        return DTYPES[self.dtype][1]


@frozen
class MmaChoice:
    """The MMA the compiler picked: version 2 (mma.sync) or 3 (wgmma), instruction N, warps per CTA."""

    version: int
    instr_n: int
    warps: tuple[int, int]

    @property
    def name(self) -> str:
        """As Triton's IR prints it."""
        if self.version == 5:
            return f"tcgen05 (tensor memory, num_warps {self.warps[0] * self.warps[1]})"
        return f"mma v{self.version} ({'wgmma' if self.version == 3 else 'mma.sync'}, warps {list(self.warps)})"

    @property
    def from_shared(self) -> bool:
        """Does the MMA read its operands from shared memory until it completes (wgmma, tcgen05)?"""
        return self.version in {3, 5}


def uses_wgmma(g: Matmul) -> bool:
    """supportMMA(dot, 3): the shapes and types wgmma takes."""
    return g.k >= 256 // g.bits and g.m % 64 == 0 and g.n % 8 == 0 and g.warps % 4 == 0


def warps_v2(g: Matmul) -> tuple[int, int]:
    """warpsPerTileV2: balance the 16x8 repetitions of M and N, ties to M."""
    warps, reps = [1, 1], [max(1, ceil_div(g.m, 16)), max(1, ceil_div(g.n, 8))]
    while warps[0] * warps[1] < g.warps:
        if reps[0] >= reps[1]:
            warps[0] *= 2
            reps[0] = reps[0] // 2 if reps[0] != 1 else 1
        else:
            warps[1] *= 2
            reps[1] //= 2
    return warps[0], warps[1]


TCGEN05_WARPS = frozenset({4, 8})  # the num_warps Triton gives tcgen05 a dot with; others fall back to mma.sync


def uses_tcgen05(g: Matmul) -> bool:
    """supportMMA(dot, 5): the shapes and types tcgen05 takes (64 or 128 rows a block, N a multiple of
    16, 4 or 8 warps; not int8, which Triton leaves to mma.sync there)."""
    return (g.k >= 256 // g.bits and g.m % 64 == 0 and g.n % 16 == 0 and g.warps in TCGEN05_WARPS
            and g.dtype != "int8")


def choose_mma(g: Matmul, wgmma: bool, tcgen05: bool = False) -> MmaChoice:
    """AccelerateMatmul's MMA for the dot (``wgmma``, ``tcgen05``: the target has it)."""
    if tcgen05 and uses_tcgen05(g):
        return MmaChoice(5, g.n, (g.warps, 1))
    if not (wgmma and uses_wgmma(g)):
        return MmaChoice(2, 8, warps_v2(g))
    m_warps = max(g.m // 16, 1)
    max_n = max(g.n // max(g.warps // m_warps, 1), 8)
    instr_n = next(n for n in WGMMA_N if g.n % n == 0 and n <= max_n)
    warps = [4, 1]
    while warps[0] * warps[1] < g.warps:
        if g.m > 16 * warps[0]:
            warps[0] *= 2
        else:
            warps[1] *= 2
    return MmaChoice(3, instr_n, (warps[0], warps[1]))


def store_layout(g: Matmul) -> Layout:
    """The Coalesce pass's layout for storing C: 16 B per thread along N (fewer when the tile has fewer
    elements than threads have room for), lanes then warps along N first (BlockedEncodingAttr::get)."""
    threads = g.warps * THREADS_PER_WARP
    per_thread = min(128 // g.out_bits, g.n, max(g.m * g.n // threads, 1))
    size = (1, per_thread)
    lanes_n = min(max(1, g.n // per_thread), THREADS_PER_WARP)
    warps_n = min(max(1, min(threads, max(1, g.n // per_thread)) // lanes_n), g.warps)
    lanes, warps = (THREADS_PER_WARP // lanes_n, lanes_n), (g.warps // warps_n, warps_n)
    return blocked(size, lanes, warps, COLUMNS_FIRST, (g.m, g.n))


def load_vector_bits(g: Matmul, rows: int, cols: int) -> int:
    """Bits one thread loads at once from a row-major ``rows`` x ``cols`` operand tile (Coalesce)."""
    threads = g.warps * THREADS_PER_WARP
    return min(128 // g.bits, cols, max(rows * cols // threads, 1)) * g.bits


def pipelined(g: Matmul, rows: int, cols: int) -> bool:
    """Does the pipeliner give this operand's load shared-memory buffers (canBeConvertedToAsyncLoad:
    cp.async moves at least 4 bytes a thread)?"""
    return g.stages > 1 and load_vector_bits(g, rows, cols) >= 32


@frozen
class Operand:
    """One operand's shared memory: ``count`` buffers of ``tile`` bytes, before the loop (pipelined) or
    written in it."""

    name: str
    tile: int
    count: int
    in_loop: bool
    why: str

    @property
    def label(self) -> str:
        """Where the bytes go, as the breakdown prints it."""
        return f"{self.name}: {self.count} x {self.tile} B, {self.why}"


def whole_row_fp8_b(g: Matmul, choice: MmaChoice) -> bool:
    """An fp8 B under mma.sync whose load gives each thread a whole row of 16 elements: the pipeliner
    leaves it in registers and it is written to shared memory in the loop."""
    return choice.version == 2 and g.bits == 8 and g.n * g.bits == load_vector_bits(g, g.k, g.n) == 128


def operands(g: Matmul, choice: MmaChoice, native_fp8: bool = True) -> tuple[Operand, Operand]:
    """The buffers of A and B: wgmma keeps num_stages, mma.sync num_stages - 1; an 8-bit B (not K-major)
    under wgmma is written in the loop. ``native_fp8``: mma.sync takes fp8 as it is (else Triton
    upcasts it to fp16, and a B written in the loop is written upcast)."""
    found = []
    b = ("B", g.n, g.k, True) if g.b_k_major else ("B", g.k, g.n, False)
    for name, rows, cols, k_major in (("A", g.m, g.k, True), b):
        tile = rows * cols * g.bits // 8
        if choice.version == 3 and g.bits == 8 and not k_major:
            found.append(Operand(name, tile, 1, True, "written in the loop (8-bit and N-major: no asynchronous "
                                                      "copy into wgmma's layout)"))
        elif not k_major and g.stages > 1 and whole_row_fp8_b(g, choice):
            upcast = "" if native_fp8 else ", upcast to fp16"
            found.append(Operand(name, tile * (1 if native_fp8 else 2), 1, True,
                                 f"written in the loop (a whole 16-element row a thread: not pipelined{upcast})"))
        elif pipelined(g, rows, cols):
            count = g.stages if choice.from_shared else max(1, g.stages - 1)
            mma_name = "wgmma" if choice.version == 3 else "tcgen05"
            why = (f"num_stages buffers ({mma_name} reads them until it completes)" if choice.from_shared else
                   "num_stages - 1 buffers (mma.sync copies them to registers)")
            found.append(Operand(name, tile, count, False, why))
        else:
            why = "num_stages 1: not pipelined" if g.stages == 1 else "its load is under 4 B a thread: not pipelined"
            # Under tcgen05 a pipelined loop writes such an operand to two buffers, one per MMA in flight.
            count = 2 if choice.version == 5 and g.stages > 1 else 1
            found.append(Operand(name, tile, count, True, f"written in the loop ({why})"))
    return found[0], found[1]


@frozen
class MatmulBuild:
    """What the compiler makes of a Matmul: the MMA, the operands' buffers, the epilogue's scratch and
    the ``shared`` the launch asks for, with where its bytes go."""

    mma: MmaChoice
    a: Operand
    b: Operand
    mainloop_bytes: int  # A's and B's buffers and (tcgen05) the MMA's barriers: live together in the loop
    epilogue_bytes: int
    shared: int
    parts: tuple[tuple[str, int], ...]


def _live(op: Operand, other: Operand, choice: MmaChoice, g: Matmul, native_fp8: bool) -> tuple[int, int]:
    """A synthetic live range in program order: the loop is ops 10..20, the epilogue op 30."""
    if not op.in_loop:
        return 0, 25
    first = op.name == "A"
    if choice.version == 2 and g.bits == 8 and not native_fp8 and other.in_loop:
        # Upcast fp8 operands of mma.sync are each read into registers (and upcast) before the next is written.
        return (11, 12) if first else (13, 14)
    return (11, 15) if first else (12, 15)


def build(g: Matmul, wgmma: bool, ldmatrix: bool, stmatrix: bool, native_fp8: bool = True,
          tcgen05: bool = False) -> MatmulBuild:
    """The shared memory of ``g`` on a target with (or without) wgmma, ldmatrix, stmatrix, mma.sync on
    fp8 operands and tcgen05."""
    choice = choose_mma(g, wgmma, tcgen05)
    a, b = operands(g, choice, native_fp8)
    alignment = NVMMA_ALIGNMENT if choice.from_shared else SWIZZLED_ALIGNMENT
    buffers = [Buffer(op.name, op.tile * op.count, alignment, *_live(op, other, choice, g, native_fp8))
               for op, other in ((a, b), (b, a))]
    barriers = 0
    if choice.version == 5:
        # The MMA's completion barriers (8 B each): one without pipelining, else two, live over the loop.
        barriers = MBARRIER_BYTES * (1 if g.stages == 1 else 2)
        buffers.append(Buffer("barriers", barriers, SWIZZLED_ALIGNMENT, 0, 25))
        src = tmem_load(g.warps, (g.m, g.n))
    else:
        src = mma(choice.version, choice.warps, choice.instr_n, (g.m, g.n))
    dst = store_layout(g)
    scratch = 0
    if swizzle.needs_shared_memory(src, dst):
        scratch = swizzle.scratch_elements(src, dst, g.out_bits, ldmatrix, stmatrix) * g.out_bits // 8
        buffers.append(Buffer("epilogue", scratch, SCRATCH_ALIGNMENT, 30, 31))
    shared = allocate(buffers)
    mainloop = a.tile * a.count + b.tile * b.count + barriers
    where = "above the mainloop's bytes" if scratch > mainloop else "over the mainloop's bytes"
    parts = ((a.label, a.tile * a.count), (b.label, b.tile * b.count),
             *((("tcgen05 completion barriers", barriers),) if barriers else ()),
             (f"epilogue: the accumulator converted to the store's layout, after the loop, {where}", scratch))
    return MatmulBuild(choice, a, b, mainloop, scratch, shared, parts)


def build_descriptor(g: Matmul, wgmma: bool, tcgen05: bool = False) -> MatmulBuild:
    """The shared memory of the same matmul through tensor descriptors (TMA, sm_90 on): every load is an
    asynchronous copy into its buffer with an mbarrier (8 B) each, num_stages buffers for wgmma and
    tcgen05 and num_stages - 1 for mma.sync (one at num_stages 1); C is staged in shared memory for its
    store after the loop, over the mainloop's bytes."""
    choice = choose_mma(g, wgmma, tcgen05)
    count = g.stages if choice.from_shared else max(1, g.stages - 1)
    why = ("num_stages buffers" if choice.from_shared else "num_stages - 1 buffers") + ", by TMA"
    a = Operand("A", g.m * g.k * g.bits // 8, count, False, why)
    b = Operand("B", g.k * g.n * g.bits // 8, count, False, why)
    barriers = MBARRIER_BYTES * count
    # tcgen05's own completion barriers: two once the loop is pipelined.
    mma_barriers = 2 * MBARRIER_BYTES if choice.version == 5 and g.stages > 1 else 0
    staged = g.m * g.n * g.out_bits // 8
    # Unpipelined under mma.sync, each operand is read into registers before the other is loaded: their
    # buffers never live together. Otherwise both live over the loop.
    one_by_one = not choice.from_shared and g.stages == 1
    live_a, live_b = ((11, 12), (13, 14)) if one_by_one else ((0, 25), (0, 25))
    buffers = [Buffer("A", a.tile * count, NVMMA_ALIGNMENT, *live_a), Buffer("B", b.tile * count, NVMMA_ALIGNMENT, *live_b),
               Buffer("load barriers", barriers, MBARRIER_BYTES, 0, 25), Buffer("C", staged, NVMMA_ALIGNMENT, 30, 31)]
    if mma_barriers:
        buffers.append(Buffer("tcgen05 barriers", mma_barriers, SWIZZLED_ALIGNMENT, 0, 25))
    shared = allocate(buffers)
    mainloop = (max(a.tile, b.tile) if one_by_one else a.tile * count + b.tile * count) + barriers + mma_barriers
    where = "above the mainloop's bytes" if staged > mainloop else "over the mainloop's bytes"
    parts = ((a.label, a.tile * count), (b.label, b.tile * count), (f"TMA load barriers: {count} x 8 B", barriers),
             *((("tcgen05 completion barriers", mma_barriers),) if mma_barriers else ()),
             (f"C staged for its TMA store, after the loop, {where}", staged))
    return MatmulBuild(choice, a, b, mainloop, staged, shared, parts)
