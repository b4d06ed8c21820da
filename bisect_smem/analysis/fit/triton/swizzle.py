"""How much shared memory Triton 3.6 gives a layout conversion (``ttg.convert_layout``) on NVIDIA GPUs:
third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/Allocation.cpp's getNumScratchElemsSwizzledCvt, which
asks lib/Tools/GenericSwizzling.cpp's optimalSwizzling for the swizzled shared layout that moves the
tile with the widest conflict-free ld/st.shared or ld/stmatrix instructions. The tile goes through
shared memory in ``reps`` rounds, so the scratch is the tile's elements divided by the rounds.

Bases are ints: offsets into the flattened tile (a set of bases spans a GF(2) vector space).
"""

from __future__ import annotations

from bisect_smem.analysis.fit.triton.layouts import Layout, log2
from bisect_smem.core.frozen import frozen

BANK_BITS = 32 * 32  # 32 banks of 32 bits


@frozen
class MemOpTile:
    """An instruction's tile: lanes that hold contiguous data (``contig``) and lanes that give addresses."""

    contig: tuple[int, ...]
    addr: tuple[int, ...]


LD_ST_SHARED = MemOpTile((), (0, 1, 2))
LD_ST_MATRIX = MemOpTile((0, 1), (2, 3, 4))
LD_ST_MATRIX_TRANS = MemOpTile((2, 3, 4), (0, 1))


def instruction_tiles(bits: int, ldmatrix: bool, stmatrix: bool) -> tuple[list[MemOpTile], list[MemOpTile]]:
    """getSrcDstTiles: stores (src side) and loads (dst side) the target has for ``bits``-wide elements."""
    src, dst = [LD_ST_SHARED], [LD_ST_SHARED]
    if ldmatrix or stmatrix:
        for tile, fits in ((LD_ST_MATRIX, bits <= 32), (LD_ST_MATRIX_TRANS, bits == 16)):
            if fits and stmatrix:
                src.append(tile)
            if fits and ldmatrix:
                dst.append(tile)
    return src, dst


def rref(vectors: list[int]) -> list[int]:
    """The reduced row echelon form over GF(2), each row's pivot its lowest set bit."""
    rows: list[int] = []
    for v in vectors:
        for r in rows:
            if v & (r & -r):
                v ^= r
        if v:
            pivot = v & -v
            rows = [r ^ v if r & pivot else r for r in rows]
            rows.append(v)
    return rows


def nullspace(vectors: list[int], dim: int) -> list[int]:
    """nullspaceBasis: a basis of the x with x . v = 0 for every v, one per free column, ascending."""
    rows = rref(vectors)
    pivots = {(r & -r).bit_length() - 1: r for r in rows}
    basis = []
    for free in range(dim):
        if free in pivots:
            continue
        vec = 1 << free
        for pivot, r in pivots.items():
            if r & (1 << free):
                vec ^= 1 << pivot
        basis.append(vec)
    return basis


def complement(basis: list[int], dim: int) -> list[int]:
    """complementBasis: the unit vectors of the columns that are not pivots."""
    pivots = {(r & -r).bit_length() - 1 for r in rref(basis)}
    return [1 << i for i in range(dim) if i not in pivots]


def intersection(b1: list[int], b2: list[int], dim: int) -> list[int]:
    """intersectionBasis: span(b1) and span(b2) in common, in b1's order when all are unit vectors."""
    if all(b and not b & (b - 1) for b in (*b1, *b2)):
        second = set(b2)
        return [b for b in b1 if b in second]
    return nullspace(nullspace(b1, dim) + nullspace(b2, dim), dim)


def segment_bases(bank_src: list[int], bank_dst: list[int], dim: int, length: int) -> list[int]:
    """computeSegment: the bases that pick a bank segment, as conflict-free as ``length`` allows."""
    src, dst = set(bank_src) - {0}, set(bank_dst) - {0}
    segment = [1 << b for b in range(dim) if 1 << b not in src and 1 << b not in dst]
    if len(segment) >= length:
        return segment[:length]
    a, b = sorted(src - dst), sorted(dst - src)
    if len(a) > len(b):
        a, b = b, a
    conflicts = min(max(0, length - len(a) - len(segment)), len(a))
    segment += [a[i] ^ b[i] for i in range(conflicts, len(a))]
    segment += a[:conflicts] + b[:conflicts]
    return segment[:length]


@frozen
class Flat:
    """A layout as flat bases: registers (broadcast ones removed), lanes, warps."""

    register: list[int]
    lane: list[int]
    warp: list[int]
    dim: int  # log2 of the tile's elements

    @classmethod
    def of(cls, layout: Layout) -> Flat:
        """The flattened layout, without broadcast registers."""
        layout = layout.without_broadcast_registers()
        return cls(layout.flat("register"), layout.flat("lane"), layout.flat("warp"),
                   log2(layout.shape[0] * layout.shape[1]))

    def solve(self, value: int) -> tuple[int, int]:
        """(register index, lane index) of the element ``value`` (free bits zero): invertAndCompose."""
        columns = [(b, "r", i) for i, b in enumerate(self.register)] + [(b, "l", i) for i, b in enumerate(self.lane)]
        columns += [(b, "w", i) for i, b in enumerate(self.warp)]
        rows: list[tuple[int, int]] = []  # (vector, the columns that make it)
        for k, (b, _d, _i) in enumerate(columns):
            v, mask = b, 1 << k
            for r, m in rows:
                if v & (r & -r):
                    v, mask = v ^ r, mask ^ m
            if v:
                pivot = v & -v
                rows = [(r ^ v, m ^ mask) if r & pivot else (r, m) for r, m in rows]
                rows.append((v, mask))
        chosen = 0
        for r, m in rows:
            if value & (r & -r):
                value, chosen = value ^ r, chosen ^ m
        register = sum(1 << i for k, (_b, d, i) in enumerate(columns) if chosen >> k & 1 and d == "r")
        lane = sum(1 << i for k, (_b, d, i) in enumerate(columns) if chosen >> k & 1 and d == "l")
        return register, lane


@frozen
class Shared:
    """A swizzled shared layout as optimalSwizzling returns it: vector, bank, segment and reps bases."""

    vector: list[int]
    bank: list[int]
    segment: list[int]
    reps: list[int]


def swizzled(src: Flat, dst: Flat, bits: int, vbasis: list[int], tile_src: list[int], tile_dst: list[int],
             leave_reps: int = 0) -> Shared:
    """optimalSwizzling with a vectorisation and the two instructions' tiles, then buildReps."""
    dim = src.dim
    len_bank = min(log2(BANK_BITS // ((1 << len(vbasis)) * bits)), dim - len(vbasis))
    len_segment = dim - len_bank - len(vbasis)
    sbasis = segment_bases(vbasis + tile_src, vbasis + tile_dst, dim, len_segment)
    bbasis = complement(vbasis + sbasis, dim)
    both = set(src.register) & set(dst.register)
    segment, reps = [], []
    for s in sbasis:
        if s in both and leave_reps > 0:
            leave_reps -= 1
            segment.append(s)
        elif s in both:
            reps.append(s)
        else:
            segment.append(s)
    return Shared(vbasis, bbasis, segment, reps)


def bank_conflicts(tile_src: list[int], tile_dst: list[int], smem: Shared, dim: int) -> int:
    """bankConflicts, read plus write: the ways a tile's lanes land in one bank's segment."""
    read = (1 << len(intersection(smem.segment, tile_dst, dim))) - 1
    write = (1 << len(intersection(smem.segment, tile_src, dim))) - 1
    return read + write


def instruction_vbasis(a: Flat, b: Flat, regs_a: int, regs_b: int, lanes_a: tuple[int, ...],
                       lanes_b: tuple[int, ...]) -> list[int] | None:
    """optimalSwizzlingTile: the contiguous tile both instructions can move, or None."""
    if regs_a < regs_b:
        return instruction_vbasis(b, a, regs_b, regs_a, lanes_b, lanes_a)
    vbasis = intersection(a.register, b.register, a.dim)
    if len(vbasis) < regs_b:
        return None
    vbasis = vbasis[:regs_b]
    tile_a, tile_b = [a.lane[i] for i in lanes_a], [b.lane[i] for i in lanes_b]
    if 0 in tile_a or 0 in tile_b:
        return None
    # The first lanes of b must map to registers of a, the rest to a's lanes one to one.
    for i in range(regs_a - regs_b):
        if a.solve(b.lane[lanes_b[i]])[0] == 0:
            return None
    for idx_a, idx_b in zip(lanes_a, lanes_b[len(lanes_b) - len(lanes_a):], strict=True):
        if a.solve(b.lane[idx_b])[1] != 1 << idx_a:
            return None
    return vbasis + tile_b


def instruction_tile(tile: MemOpTile, regs: list[int], lanes: list[int], vbasis: list[int]) -> list[int] | None:
    """getTile: the first registers outside ``vbasis`` that the instruction needs, then its address lanes."""
    needed = 3 - len(tile.addr)
    chosen = [r for r in regs if r not in vbasis][:needed]
    if len(chosen) < needed:
        return None
    return chosen + [lanes[i] for i in tile.addr]


def with_instructions(src: Flat, dst: Flat, bits: int, src_tiles: list[MemOpTile],
                      dst_tiles: list[MemOpTile]) -> Shared | None:
    """optimalSwizzling over instruction pairs: the fewest bank conflicts, then the most rounds; None
    when no pair of instructions fits (then plain ld/st.shared is used)."""
    total = log2(128 // bits)
    best: tuple[int, int, Shared] | None = None
    for t_src in src_tiles:
        for t_dst in dst_tiles:
            vbasis = instruction_vbasis(src, dst, total - len(t_src.contig), total - len(t_dst.contig),
                                        t_src.contig, t_dst.contig)
            if vbasis is None:
                continue
            tile_src = instruction_tile(t_src, src.register, src.lane, vbasis)
            tile_dst = instruction_tile(t_dst, dst.register, dst.lane, vbasis)
            if tile_src is None or tile_dst is None:
                continue
            missing = min(len(t.contig) + len(t.addr) - 3 for t in (t_src, t_dst))
            smem = swizzled(src, dst, bits, vbasis, tile_src, tile_dst, missing)
            key = (bank_conflicts(tile_src, tile_dst, smem, src.dim), -len(smem.reps))
            if best is None or key < best[:2]:
                best = (*key, smem)
    return None if best is None else best[2]


def _fill_bank(src: Flat, dst: Flat, bits: int, vbasis: list[int]) -> list[int]:
    """optimalSwizzlingLdSt's vectorisation up to 32 bits: registers of one side that are warps of the
    other, then warps both share, then warps of either side in turn."""
    per_bank = log2(32 // bits)
    warp_src, warp_dst = [w for w in src.warp if w], [w for w in dst.warp if w]
    reg_src_warp = intersection([r for r in src.register if r not in vbasis], warp_dst, src.dim)
    reg_dst_warp = intersection([r for r in dst.register if r not in vbasis], warp_src, src.dim)
    if len(reg_src_warp) == len(reg_dst_warp) and reg_src_warp:
        largest = reg_src_warp if min(reg_src_warp) < min(reg_dst_warp) else reg_dst_warp
    else:
        largest = reg_src_warp if len(reg_src_warp) > len(reg_dst_warp) else reg_dst_warp
    vbasis = vbasis + largest
    if len(vbasis) < per_bank:
        vbasis += intersection(warp_src, warp_dst, src.dim)
    i = 0
    while len(vbasis) < per_bank and (i < len(warp_src) or i < len(warp_dst)):
        if i < len(warp_src) and warp_src[i] not in vbasis:
            vbasis.append(warp_src[i])
        if len(vbasis) < per_bank and i < len(warp_dst) and warp_dst[i] not in vbasis:
            vbasis.append(warp_dst[i])
        i += 1
    return vbasis[:per_bank]


def ld_st(src: Flat, dst: Flat, bits: int) -> Shared:
    """optimalSwizzlingLdSt: plain ld/st.shared, vectorised as far as both sides allow."""
    vbasis = intersection(src.register, dst.register, src.dim)[:log2(128 // bits)]
    if (1 << len(vbasis)) * bits < 32:
        vbasis = _fill_bank(src, dst, bits, vbasis)
    vec = log2(max(1, (1 << len(vbasis)) * bits // 32))
    tile_src, tile_dst = src.lane[:len(src.lane) - vec], dst.lane[:len(dst.lane) - vec]
    return swizzled(src, dst, bits, vbasis, tile_src, tile_dst)


def scratch_elements(src: Layout, dst: Layout, bits: int, ldmatrix: bool, stmatrix: bool) -> int:
    """getNumScratchElemsSwizzledCvt: the elements of the tile that one round moves."""
    a, b = Flat.of(src), Flat.of(dst)
    src_tiles, dst_tiles = instruction_tiles(bits, ldmatrix, stmatrix)
    smem = with_instructions(a, b, bits, src_tiles, dst_tiles) or ld_st(a, b, bits)
    return (1 << a.dim) >> len(smem.reps)


def _permutation(src: Layout, dst: Layout) -> dict[tuple[str, int], tuple[str, int]] | None:
    """The map of (register or lane) bits of ``src`` to those of ``dst`` holding the same element, the
    zero bits paired in order, after padding both to the same sizes; None when a bit of ``src`` is not
    a register or lane bit of ``dst``."""
    a, b = src.without_broadcast_registers(), dst.without_broadcast_registers()
    sizes = {d: max(len(a.bases(d)), len(b.bases(d))) for d in ("register", "lane")}

    def padded(layout: Layout, dim: str) -> list[int]:
        bases = layout.flat(dim)
        return bases + [0] * (sizes[dim] - len(bases))

    s = {d: padded(a, d) for d in sizes}
    t = {d: padded(b, d) for d in sizes}
    where = {v: (d, i) for d in sizes for i, v in enumerate(t[d]) if v}
    perm: dict[tuple[str, int], tuple[str, int]] = {}
    src_free, dst_free = [], []
    for d in sizes:
        for i in range(sizes[d]):
            if s[d][i] == 0 and t[d][i] == 0:
                perm[(d, i)] = (d, i)
            elif s[d][i] == 0:
                src_free.append((d, i))
            elif t[d][i] == 0:
                dst_free.append((d, i))
            if s[d][i]:
                if s[d][i] not in where:
                    return None
                perm[(d, i)] = where[s[d][i]]
    for free_s, free_d in zip(src_free, dst_free, strict=False):
        perm[free_s] = free_d
    return perm


def needs_shared_memory(src: Layout, dst: Layout) -> bool:
    """cvtNeedsSharedMemory: not when the conversion only reorders registers, nor when it stays within
    warps and takes fewer than two register-lane exchanges (a warp shuffle)."""
    if src.flat("warp") != dst.flat("warp"):
        return True
    perm = _permutation(src, dst)
    if perm is None:
        return True
    exchanges = sum(1 for (d, _i), (e, _j) in perm.items() if d == "lane" and e == "register")
    return exchanges >= 2
