"""Triton's distributed layouts of a 2-D tile as linear layouts over GF(2), built the way Triton 3.6's
``toLinearLayout`` builds them (lib/Dialect/TritonGPU/IR/LinearLayoutConversions.cpp): for each input
dimension (register, lane, warp), the tile coordinate (row, column) that each bit of the index
selects. The element a thread holds is the XOR of the bases of the bits set in its indices.

Only what the shared-memory allocation of a layout conversion needs: blocked layouts, and the NVIDIA
MMA accumulator layouts of mma.sync (v2) and wgmma (v3), on one CTA.
"""

from __future__ import annotations

from collections.abc import Sequence

from bisect_smem.core.frozen import frozen

Basis = tuple[int, int]
IN_DIMS = ("register", "lane", "warp")
COLUMNS_FIRST, ROWS_FIRST = [1, 0], [0, 1]  # an order: the minor axis first


def log2(value: int) -> int:
    """log2 of a power of two."""
    if value < 1 or value & (value - 1):
        raise ValueError(f"{value} is not a power of two")
    return value.bit_length() - 1


@frozen
class Layout:
    """A linear layout of a ``shape`` (rows, columns) tile: ``bases[d][i]`` is the coordinate that bit
    ``i`` of in-dimension ``d`` selects; (0, 0) is a broadcast bit (two indices hold one element)."""

    shape: tuple[int, int]
    register: tuple[Basis, ...]
    lane: tuple[Basis, ...]
    warp: tuple[Basis, ...]

    def bases(self, dim: str) -> tuple[Basis, ...]:
        """The bases of one in-dimension."""
        return getattr(self, dim)

    def flat(self, dim: str) -> list[int]:
        """The bases of ``dim`` as offsets into the row-major flattened tile (the column is the minor
        out-dimension, as Triton orders a row-major tile's out-dimensions)."""
        columns = self.shape[1]
        return [row * columns + col for row, col in self.bases(dim)]

    def without_broadcast_registers(self) -> Layout:
        """actionRemoveBroadcastedRegs: drop the register bits that repeat an element."""
        return Layout(self.shape, tuple(b for b in self.register if b != (0, 0)), self.lane, self.warp)


def _identity(bits: int, step: int, axis: int) -> list[Basis]:
    """identity1D: ``bits`` bases along ``axis`` starting at coordinate ``step``."""
    return [((step << i, 0) if axis == 0 else (0, step << i)) for i in range(bits)]


class _Builder:
    """A layout under construction, in Triton's order: out-dimensions minor to major as first used."""

    def __init__(self) -> None:
        self.bases: dict[str, list[Basis]] = {d: [] for d in IN_DIMS}
        self.size = [1, 1]  # the extent covered along rows and columns
        self.out_order: list[int] = []

    def extend(self, dim: str, axis: int, count: int) -> None:
        """Multiply by identity1D(count, dim, axis): ``count`` more elements along ``axis``."""
        if axis not in self.out_order:
            self.out_order.append(axis)
        self.bases[dim] += _identity(log2(count), self.size[axis], axis)
        self.size[axis] *= count

    def standard(self, dim: str, counts: Sequence[int], order: Sequence[int]) -> None:
        """identityStandardND(dim, counts, order): the minor axis (order[0]) first."""
        for axis in order:
            self.extend(dim, axis, counts[axis])

    def fit(self, shape: tuple[int, int]) -> Layout:
        """combineCtaCgaWithShape for one CTA: broadcast what is larger than the tile, repeat in
        registers what is smaller."""
        for axis in (0, 1):
            if axis not in self.out_order:
                self.out_order.append(axis)
        for axis in self.out_order:
            self._shrink(axis, shape[axis])
        for axis in self.out_order:
            if self.size[axis] < shape[axis]:
                self.extend("register", axis, shape[axis] // self.size[axis])
        return Layout(shape, *(tuple(self.bases[d]) for d in IN_DIMS))

    def _shrink(self, axis: int, want: int) -> None:
        """ensureLayoutNotLargerThan: zero the largest bases along ``axis`` until it spans ``want``."""
        found = [(basis[axis], dim, i) for dim in IN_DIMS for i, basis in enumerate(self.bases[dim]) if basis[axis]]
        for _value, dim, i in sorted(found, key=lambda f: -f[0]):
            if self.size[axis] <= want:
                break
            row, col = self.bases[dim][i]
            self.bases[dim][i] = (0, col) if axis == 0 else (row, 0)
            self.size[axis] //= 2


def blocked(size_per_thread: Sequence[int], threads_per_warp: Sequence[int], warps_per_cta: Sequence[int],
            order: Sequence[int], shape: tuple[int, int]) -> Layout:
    """#ttg.blocked: registers, then lanes, then warps, each minor axis first."""
    b = _Builder()
    b.standard("register", size_per_thread, order)
    b.standard("lane", threads_per_warp, order)
    b.standard("warp", warps_per_cta, order)
    return b.fit(shape)


def mma(version: int, warps_per_cta: Sequence[int], instr_n: int, shape: tuple[int, int]) -> Layout:
    """#ttg.nvidia_mma accumulator (v2: 16x8 per warp; v3: 16 x ``instr_n`` per warp of a warp group):
    two adjacent columns a thread, 4 lanes along columns, 8 along rows, then the second 8 rows, then
    the rest of the instruction's columns, then warps (columns first)."""
    b = _Builder()
    b.extend("register", 1, 2)
    b.extend("lane", 1, 4)
    b.extend("lane", 0, 8)
    b.extend("register", 0, 2)
    n = 8 if version == 2 else instr_n
    if n > 8:
        b.extend("register", 1, n // 8)
    # mma.sync's warps go along columns first; wgmma's four warps of a warp group along rows.
    b.standard("warp", warps_per_cta, COLUMNS_FIRST if version == 2 else ROWS_FIRST)
    return b.fit(shape)


def tmem_load(warps: int, shape: tuple[int, int]) -> Layout:
    """The layout tcgen05's accumulator takes when it is loaded from tensor memory (tmem_load's
    32x32b message for a 128-row block, 16x32bx2 for a 64-row one): a thread holds a row's columns;
    the lanes (and, for 64 rows, one lane bit across the columns' halves) and four warps cover the rows;
    a second warp group takes the upper half of the columns, or the second 128-row block."""
    m, n = shape
    b = _Builder()
    split = warps == 8 and m <= 128
    if m == 64:
        b.extend("register", 1, n // 2 // (2 if split else 1))
        b.extend("lane", 0, 16)
        b.extend("lane", 1, 2)
    else:
        b.extend("register", 1, n // (2 if split else 1))
        b.extend("lane", 0, 32)
    b.extend("warp", 0, 4)
    if warps == 8:
        b.extend("warp", 1 if split else 0, 2)
    return b.fit(shape)
