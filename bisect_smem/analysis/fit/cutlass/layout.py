"""How a C++ compiler lays out a struct: each member at the next multiple of its alignment, the whole
rounded up to the largest alignment. CUTLASS's shared storage is nested structs, unions and ``alignas``
arrays; sizes are bytes."""

from __future__ import annotations

from bisect_smem.core.frozen import frozen
from bisect_smem.core.hardware import round_up


@frozen
class Part:
    """A member: its size and alignment in bytes (an empty C++ struct is 1 byte, aligned 1)."""

    size: int
    align: int = 1


EMPTY = Part(1, 1)


def struct(*members: Part, align: int = 1) -> Part:
    """A struct of ``members`` in order; ``align`` is an ``alignas`` or ``aligned_struct`` of the struct."""
    offset, most = 0, align
    for m in members:
        offset = round_up(offset, m.align) + m.size
        most = max(most, m.align)
    return Part(round_up(max(offset, 1), most), most)


def union(*members: Part) -> Part:
    """A union: the largest member, rounded up to the largest alignment."""
    most = max(m.align for m in members)
    return Part(round_up(max(m.size for m in members), most), most)


def array(size: int, align: int) -> Part:
    """An aligned array of ``size`` bytes; a zero-length one still takes a byte (then its alignment)."""
    return Part(round_up(max(size, 1), align), align)


def barriers(stages: int) -> Part:
    """A pipeline's shared storage: a full and an empty 64-bit mbarrier per stage."""
    return Part(16 * stages, 8)


def aligned16(part: Part) -> Part:
    """A member declared ``alignas(16)``."""
    return Part(round_up(part.size, max(16, part.align)), max(16, part.align))
