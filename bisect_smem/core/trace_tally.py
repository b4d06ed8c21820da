"""The distinct records of a trace, as counts: each launch or attribute set once, with how many times it was
made and by which processes, however many lines wrote it. Keys are plain tuples, hashed in C."""

from __future__ import annotations

from typing import Any

from bisect_smem.core import trace_events as records
from bisect_smem.core.trace_events import Skip


class Tally:
    """What the files of a folder hold, as counts per distinct record: a launch's key is Launch's fields less
    the processes, correlation and count, its kind as its value and its kernel attributes as a tuple."""

    def __init__(self) -> None:
        self.processes: list[records.Process] = []
        self.attributes: dict[tuple[Any, ...], list[Any]] = {}  # key -> [count, pids, first correlation]
        self.launches: dict[tuple[Any, ...], list[Any]] = {}
        self.past_table: dict[str | None, list[Any]] = {}  # kernel -> [count, pids]
        self.unwritable: list[records.Unwritable] = []
        self.skipped: dict[Skip, list[Any]] = {}  # kind -> [count, first where]
        self.torn = 0

    def skip(self, kind: Skip, where: str, count: int = 1) -> None:
        """``count`` more lines or files of ``kind`` skipped; ``where`` is kept for the first."""
        self.skipped.setdefault(kind, [0, where])[0] += count

    @staticmethod
    def add(table: dict[tuple[Any, ...], list[Any]], key: tuple[Any, ...], count: int, pid: int,
            correlation: int) -> None:
        """``count`` more of the record ``key`` in ``table``, by process ``pid``."""
        entry = table.get(key)
        if entry is None:
            table[key] = [count, pid, correlation]  # one process: its pid, not a set of one (a third of the size)
        else:
            entry[0] += count
            pids = entry[1]
            if type(pids) is set:
                pids.add(pid)
            elif pids != pid:
                entry[1] = {pids, pid}

    def add_counted(self, ids: dict[bytes, tuple[Any, ...]], counts: dict[bytes, int], pid: int) -> None:
        """The launches of process ``pid`` by their ids (``ids``: id -> key), each ``counts[id]`` times, once
        where no count was written: ``add`` for each, in one loop (a file holds thousands)."""
        launches = self.launches
        for launch_id, key in ids.items():
            count = counts.get(launch_id, 1)
            entry = launches.get(key)
            if entry is None:
                launches[key] = [count, pid, 0]
                continue
            entry[0] += count
            pids = entry[1]
            if type(pids) is set:
                pids.add(pid)
            elif pids != pid:
                entry[1] = {pids, pid}

    def trace(self) -> records.Trace:
        """The whole trace, as frozen records."""
        attributes = tuple(records.AttributeSet(_sorted(pids), key[0], key[1], corr, *key[2:], count=count)
                           for key, (count, pids, corr) in self.attributes.items())
        launches = tuple(records.Launch(_sorted(pids), key[0], corr, *key[1:10], records.LaunchKind(key[10]),
                                        count, records.KernelAttributes(*key[11]), key[12])
                         for key, (count, pids, corr) in self.launches.items())
        past = tuple(records.PastTable(kernel, count, tuple(sorted(pids)))
                     for kernel, (count, pids) in self.past_table.items())
        skipped = tuple(records.Skipped(kind, count, first) for kind, (count, first) in self.skipped.items())
        return records.Trace(tuple(self.processes), tuple(sorted(attributes, key=lambda a: (a.pids[0], a.correlation))),
                             launches, self.torn, past, tuple(self.unwritable), skipped)


def _sorted(pids: int | set[int]) -> tuple[int, ...]:
    return tuple(sorted(pids)) if type(pids) is set else (pids,)
