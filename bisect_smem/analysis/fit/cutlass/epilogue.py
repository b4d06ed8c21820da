"""The default epilogue's shared storage (CUTLASS's TMA warp-specialized epilogues with a linear
combination): the C and D staging buffers of the epilogue tile, the C load pipeline, and for grouped
kernels the tensor maps. sm_90 and sm_120 use ``Sm90TmaWarpSpecialized``'s storage
(epilogue/collective/sm90_epilogue_tma_warpspecialized.hpp), sm_100 its own (sm100_epilogue_...).
The tile and stage rules are the builders' (epilogue/collective/builders/sm90_builder.inl,
sm100_builder.inl, sm120_builder.inl)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from bisect_smem.analysis.fit.cutlass.layout import EMPTY, Part, array, barriers, struct, union
from bisect_smem.core.frozen import frozen

TMA_DESCRIPTOR_BYTES = 128


@frozen
class Epilogue:
    """The epilogue's storage: ``tensors`` (C/D buffers and the fusion's storage) and ``pipeline`` go into
    the kernel's storage separately; ``shared`` is sizeof(CollectiveEpilogue::SharedStorage), the
    carveout the mainloop builder is given."""

    tile: tuple[int, int] | None
    stages_c: int
    stages_d: int
    tensors: Part
    pipeline: Part
    tensormaps: Part | None
    shared: Part


NO_SMEM = Epilogue(None, 0, 0, EMPTY, EMPTY, None, EMPTY)


def given(size: int) -> Epilogue:
    """An epilogue whose SharedStorage the user gave (--epilogue BYTES): all of it tensors, no pipeline of
    its own, in the kernel's storage as in the builder's carveout."""
    return Epilogue(None, 0, 0, Part(size, 1), Part(0, 1), None, Part(size, 1))


def chosen(built: Epilogue, given_bytes: int | None) -> Epilogue:
    """The epilogue a kernel counts: the builder's, or the one --epilogue gave, which is then the epilogue's
    storage in the kernel's total and breakdown, not only in the carveout."""
    return built if given_bytes is None else given(given_bytes)


def swizzle_alignment(row_bytes: int) -> int:
    """alignment_for_swizzle of the widest swizzle a K-major row of ``row_bytes`` takes: 128 B rows swizzle
    128 B (Swizzle<3,4,3>: 1024 B), 64 B rows 512, 32 B rows 256, narrower ones interleave (128)."""
    for width, alignment in ((128, 1024), (64, 512), (32, 256)):
        if row_bytes % width == 0:
            return alignment
    return 128


def stages(tiles: int, reuse: bool, c_most: int, d_most: int = 2) -> tuple[int, int]:
    """(StagesC, StagesD): D double-buffered, C up to ``c_most`` and one more than D when C's smem is reused."""
    stages_d = min(tiles, d_most)
    stages_c = max(min(tiles, c_most), stages_d + 1) if reuse else min(tiles, c_most)
    return stages_c, stages_d


def storage(tile: tuple[int, int], c_bits: int, d_bits: int, stages_c: int, stages_d: int, reuse: bool,
            tensormap_count: int = 0, column_major: bool = False, fusion: Part = EMPTY,
            swizzled: int | None = None, aligned: Callable[[int, int], int] | None = None) -> Epilogue:
    """The storage of a TMA epilogue with these buffers (bytes per element from bits; a void D keeps its
    buffer in the fusion's aux type, ``d_bits``). ``column_major`` C and D swizzle along M; ``fusion`` is
    the fusion callbacks' SharedStorage (empty for a linear combination); ``swizzled`` the elements of one
    contiguous run that the swizzle is chosen for, where it is shorter than the tile's row; ``aligned`` gives
    a buffer's alignment from the run's bytes and an element's bits (default: swizzle_alignment of the run)."""
    aligned = aligned or (lambda run_bytes, _bits: swizzle_alignment(run_bytes))
    elems = tile[0] * tile[1]
    c_stage, d_stage = elems * c_bits // 8, elems * d_bits // 8
    contiguous = swizzled or (tile[0] if column_major else tile[1])
    align_d = aligned(contiguous * d_bits // 8, d_bits)
    if c_bits == 0:
        collective = union(Part(0, 1), array(stages_d * d_stage, align_d))
    elif reuse:
        most = max(aligned(contiguous * c_bits // 8, c_bits), align_d)
        stride = max(c_stage, d_stage)
        collective = union(array((stages_c - 1) * stride + c_stage, most), array((stages_c - 1) * stride + d_stage, most))
    else:
        collective = struct(array(stages_c * c_stage, aligned(contiguous * c_bits // 8, c_bits)),
                            array(stages_d * d_stage, align_d))
    tensors = struct(collective, fusion)
    pipeline = barriers(stages_c)
    maps = struct(Part(TMA_DESCRIPTOR_BYTES * tensormap_count, 128), align=128) if tensormap_count else None
    shared = struct(tensors, *([maps] if maps else []), pipeline)
    return Epilogue(tile, stages_c, stages_d, tensors, pipeline, maps, shared)


def sm90(m: int, n: int, c_bits: int, d_bits: int, cooperative: bool, grouped: bool, column_major: bool = False,
         fusion: Part = EMPTY) -> Epilogue:
    """sm_90's TmaWarpSpecialized[Cooperative] epilogue: a 128xN (cooperative) or 64xN tile, N up to 32."""
    if cooperative:
        tile = (min(128, m), math.gcd(min(32, n), n))
    else:
        n_perf = 64 if d_bits == 8 and n % 64 == 0 else 32
        tile = (min(64, m), math.gcd(min(n_perf, n), n))
    tiles = (m // tile[0]) * (n // tile[1])
    reuse = c_bits == d_bits and d_bits > 8
    stages_c, stages_d = stages(tiles, reuse, 4)
    return storage(tile, c_bits, d_bits, stages_c, stages_d, reuse, 1 + 2 if grouped else 0, column_major, fusion)


def sm120_tile(n: int, narrow_n: bool) -> tuple[int, int]:
    """sm_120's EpilogueTileAuto: 64x32; with ``narrow_n`` (from 4.6.0) a CTA tile N under 32 is the tile's
    N, and under 16 the tile is 128 rows."""
    if not narrow_n:
        return 64, 32
    return 128 if n < 16 else 64, min(n, 32)


def sm120(m: int, n: int, c_bits: int, d_bits: int, grouped: bool, warp_groups: int = 2, column_major: bool = False,
          fusion: Part = EMPTY, d_void: bool = False, narrow_n: bool = True) -> Epilogue:
    """sm_120's epilogue: a 64x32 tile (sm120_tile), D double-buffered, C one deeper when reused. A void D
    (a fusion that stores its own output, ``d_bits`` its type) reuses nothing."""
    tile = sm120_tile(n, narrow_n)
    tiles = (m // tile[0]) * (n // tile[1])
    reuse = c_bits == d_bits and d_bits > 8 and not d_void
    stages_d = min(tiles, 2)
    stages_c = max(min(tiles, 2), stages_d + 1) if reuse else stages_d
    return storage(tile, c_bits, d_bits, stages_c, stages_d, reuse, 1 + warp_groups if grouped else 0, column_major,
                   fusion)


def sm100_tile(cta_m: int, n: int, c_bits: int, d_bits: int, warps: Sequence[int], block_scaled: bool) -> tuple[int, int]:
    """sm100_dense_compute_tile_shape_or_override for EpilogueTileAuto with row-major C and D."""
    warp_m, warp_n = warps
    m = min(cta_m, 32 * warp_m)
    if block_scaled and n == 256:
        return m, 128
    most = max(c_bits or d_bits, d_bits)
    if c_bits == 0:
        n_perf = (8192 if most == 4 else 4096) // m
    elif most == 32:
        n_perf = 16 if cta_m > 64 and n <= 128 else 32
    elif most == 16:
        n_perf = 32 if n <= 128 else 64
    else:
        n_perf = 64
    n_min_c = 8 * warp_n if c_bits == 0 else 128 // c_bits * warp_n
    n_min_d = 128 // d_bits * warp_n
    n_tmp = min(n, max(n_perf, n_min_c, n_min_d))
    return m, n_tmp if n % n_tmp == 0 else n


def sm100_tmem_warps(two_sm: bool, mma_m: int) -> list[int]:
    """sm100_tmem_warps: the epilogue's 4 warps along M and N; 2x2 when a 2-SM MMA of M 128 leaves each CTA
    64 rows of the accumulator."""
    return [2, 2] if two_sm and mma_m == 128 else [4, 1]


def sm100_swizzled_run(tile_n: int, n: int, warp_n: int) -> int:
    """The contiguous columns of an auto epilogue tile: its N is strided over the warps along N
    ((N/WarpN, WarpN):(1, CtaN/WarpN)), one run unless the tile spans the whole CTA tile."""
    return tile_n if tile_n == n else tile_n // warp_n


def sm100(cta_m: int, n: int, c_bits: int, d_bits: int, warps: Sequence[int], block_scaled: bool,
          grouped: bool, column_major: bool = False, tile: tuple[int, int] | None = None, fusion: Part = EMPTY) -> Epilogue:
    """sm_100's TmaWarpSpecialized1Sm/2Sm epilogue: C's smem reused whenever C is wider than 8 bits.
    ``column_major`` C and D swizzle along the tile's M; ``tile`` is an epilogue tile given instead of
    EpilogueTileAuto's (a plain M x N shape); ``fusion`` the fusion callbacks' SharedStorage."""
    given_tile = tile is not None
    tile = tile or sm100_tile(cta_m, n, c_bits, d_bits, warps, block_scaled)
    tiles = (cta_m // tile[0]) * (n // tile[1])
    reuse = c_bits > 8
    stages_c, stages_d = stages(tiles, reuse, 4)
    # The block-scaled N = 256 tile and a given tile are plain (M, N) tiles, not strided over the warps.
    plain = given_tile or (block_scaled and n == 256)
    run = tile[0] if column_major else tile[1] if plain else sm100_swizzled_run(tile[1], n, warps[1])
    return storage(tile, c_bits, d_bits, stages_c, stages_d, reuse, 2 if grouped else 0, column_major, fusion,
                   swizzled=run, aligned=sm100_column_major_alignment if column_major else None)


def sm100_column_major_alignment(run_bytes: int, bits: int) -> int:
    """sm100_smem_selector for M-major C and D: a 32-bit element takes UMMA's SW128_32B atom (Swizzle<2,5,2>:
    512 B) whatever the run, the others the swizzles K-major rows take (swizzle_alignment)."""
    return 512 if bits == 32 else swizzle_alignment(run_bytes)


def sm100_no_smem(grouped: bool, callbacks: bool = False) -> Epilogue:
    """sm_100's NoSmemWarpSpecialized1Sm/2Sm epilogue: its TensorStorage, pipeline and (grouped) TensorMapStorage
    are empty structs of 1 B each, in the kernel's storage. ``callbacks``: the fusion-callbacks collective the
    builder takes for block-scaled kernels, whose SharedStorage (the builder's carveout) is the callbacks'
    empty storage beside a zero-length reduction buffer (array_aligned, 16 B): 32 B."""
    shared = struct(EMPTY, Part(16, 16)) if callbacks else EMPTY
    return Epilogue(None, 0, 0, EMPTY, EMPTY, Part(1, 128) if grouped else None, shared)
