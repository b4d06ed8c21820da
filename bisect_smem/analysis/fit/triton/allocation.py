"""Triton 3.6's shared-memory allocator (lib/Analysis/Allocation.cpp, AllocationAnalysis): buffers that
are live at the same time get disjoint offsets, the others may share them. Buffers are sorted by size
(largest first), placed by calculateStarts, then moved past interfering buffers by first-fit graph
colouring until nothing interferes; the kernel's ``shared`` is the end of the highest buffer."""

from __future__ import annotations

from dataclasses import dataclass, field

from bisect_smem.core.hardware import round_up


@dataclass
class Buffer:
    """A buffer: its size and alignment in bytes, and the operations it is live over, [start, end)."""

    name: str
    size: int
    alignment: int
    start: int
    end: int
    offset: int = field(default=0)

    def live_with(self, other: Buffer) -> bool:
        """Are both live at one operation?"""
        return self.start < other.end and other.start < self.end

    def overlaps(self, other: Buffer) -> bool:
        """Do their bytes overlap?"""
        return self.offset < other.offset + other.size and other.offset < self.offset + self.size


def _intersects(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _calculate_starts(buffers: list[Buffer]) -> None:
    """calculateStarts: take the lowest free slot, give it to the first buffer whose liveness falls in
    the slot's and in no other slot's, and split the slot around that buffer."""
    everything = (0, 1 << 62)
    slots: list[tuple[int, tuple[int, int]]] = [(0, everything)]
    todo = list(buffers)
    while todo and slots:
        slots.sort(key=lambda s: s[0])
        offset, live = slots.pop(0)
        chosen = next((b for b in todo if _intersects((b.start, b.end), live)
                       and not any(_intersects(r, (b.start, b.end)) for _o, r in slots)), None)
        if chosen is None:
            continue
        chosen.offset = round_up(offset, chosen.alignment)
        slots.append((chosen.offset + chosen.size, (max(live[0], chosen.start), min(live[1], chosen.end))))
        if live[0] < chosen.start:
            slots.append((offset, (live[0], chosen.end)))
        if chosen.end < live[1]:
            slots.append((offset, (chosen.start, live[1])))
        todo.remove(chosen)


def _interference(buffers: list[Buffer]) -> dict[int, list[Buffer]]:
    return {id(x): [y for y in buffers if y is not x and x.live_with(y) and x.overlaps(y)] for x in buffers}


def allocate(buffers: list[Buffer]) -> int:
    """Give every buffer its offset; the shared memory size (the highest end)."""
    buffers = sorted(buffers, key=lambda b: -b.size)
    if not buffers:
        return 0
    _calculate_starts(buffers)
    graph = _interference(buffers)
    size = 0
    while True:
        colours = {id(b): (0 if b is buffers[0] else -1) for b in buffers}
        for x in buffers:
            taken = {colours[id(y)] for y in graph[id(x)] if colours[id(y)] >= 0}
            colours[id(x)] = next(c for c in range(len(buffers) + 1) if c not in taken)
        size = 0
        for x in buffers:
            if colours[id(x)] != 0:
                x.offset = round_up(max((y.offset + y.size for y in graph[id(x)]), default=0), x.alignment)
            size = max(size, x.offset + x.size)
        graph = _interference(buffers)
        if not any(graph.values()):
            return size
