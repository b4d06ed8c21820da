"""A trace folder read as a stream, line by line, and kept as counts: identical records (of one process or
many) become one record with a count and the processes that made it, so that reading takes memory of the
distinct requests, not of the lines. A line or a file that cannot be read is skipped and counted by kind
(``Trace.skipped``), never the end of the rest; there is no cap on the number of files. A runtime call
(cudaFuncSetAttribute, cudaLaunchKernel) and the driver call it makes carry the same correlation id: they are
one record, named after the runtime call, with the driver's kernel name and static shared memory. Launches
are counted by their id (the largest count written wins), the kernel nodes of an executable graph by its
replays, launches past the collector's table per kernel handle."""

from __future__ import annotations

import gc
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, BinaryIO

from bisect_smem.core import input as reader
from bisect_smem.core import trace_events as records
from bisect_smem.core import trace_lines
from bisect_smem.core.trace_events import MAX_BLOCK_THREADS, MAX_BYTES, MAX_COUNT, MAX_INT32, Skip
from bisect_smem.core.trace_lines import (
    COLLECTOR_CONFIGURATION,
    COLLECTOR_COUNT,
    COLLECTOR_LAUNCH,
    NO_DIMS,
    BadLine,
    dims,
    fast_loads,
    known,
    number,
    parse,
    text_of,
)
from bisect_smem.core.trace_tally import Tally

FORMATS = frozenset({1, 2})  # the record formats this reader knows
NOTICES_FILE = "notices.jsonl"  # written by the tool itself, beside the collectors' files
# Records kept waiting for the record of the other domain with their correlation id: the driver call a runtime
# call makes is written just before it by the same thread, so only other threads' lines come between them.
PENDING_RECORDS = 4096
UNNAMED_PAST_TABLE = "a kernel first seen past the table"
# What the collector's lines repeat, kept once decoded (configurations, names, handles), across the files of a
# folder: the workers of a server launch the same kernels alike. Emptied when full, so memory stays bounded.
SEEN_MAX = 1 << 16


def read_trace(folder: Path) -> records.Trace:
    """Every collector file of ``folder`` (``*.jsonl``), read line by line; lines and files that cannot be
    read are skipped and counted. A TraceError only where ``folder`` is not a folder that can be listed."""
    if not folder.is_dir():
        raise records.TraceError(f"{folder} is not a folder of traces")
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".jsonl"))
    except OSError as exc:
        raise records.TraceError(f"cannot list {folder}: {exc.strerror or exc}") from None
    tally, seen = Tally(), _Seen()
    collecting = gc.isenabled()
    # Reading makes millions of short-lived dicts and tuples and no cycle: the cyclic collector would scan the
    # growing tally again and again, almost half the time of a large trace.
    gc.disable()
    try:
        for name in names:
            if name == NOTICES_FILE:
                _read_notices(tally, folder / name)
            else:
                _read_file(tally, seen, folder / name)
    finally:
        if collecting:
            gc.enable()
    return tally.trace()


def _read_file(tally: Tally, seen: _Seen, path: Path) -> None:
    try:
        reader.check_regular(path)
        with open(path, "rb", buffering=1 << 20) as stream:
            _File(tally, seen, path.name).read(stream)
    except (OSError, reader.InputError):
        tally.skip(Skip.UNREADABLE, path.name)


def _read_notices(tally: Tally, path: Path) -> None:
    try:
        reader.check_regular(path)
        with open(path, "rb") as stream:
            for notice in trace_lines.notices(stream, path.name):
                if isinstance(notice, records.Unwritable):
                    tally.unwritable.append(notice)
                else:
                    tally.skip(*notice)
    except (OSError, reader.InputError):
        tally.skip(Skip.UNREADABLE, path.name)


_UNKNOWN = (None, None, None)  # a kernel's attributes, where the record has none
_LAUNCH, _NODE, _REPLAY, _REFUSED_REPLAY = (kind.value for kind in records.LaunchKind)
# A launch still to be paired with the record of the other domain: its key, its id, and what pairing reads
# again (its handle, the name and the api it was written with, each None where it has none).
_Pending = tuple[tuple[Any, ...], int, "str | None", "str | None", "str | None"]


class _Seen:
    """The collector's configurations, calls and kernels as read from its lines' bytes, checked once each (at
    most SEEN_MAX of each: past it, they are read again)."""

    def __init__(self) -> None:
        self.configurations: dict[bytes, tuple[Any, ...] | None] = {}
        self.calls: dict[bytes, tuple[str, str, bool]] = {}
        self.kernels: dict[bytes, tuple[str, str | None] | None] = {}

    def configuration(self, raw: bytes) -> tuple[Any, ...] | None:
        """The grid, block, cluster, dynamic and static bytes, result, capture and the kernel's attributes of a
        launch line's configuration (COLLECTOR_LAUNCH's fifth group), bounds checked as ``_File.launch`` checks
        them; None where one is out of bounds or written otherwise (the line is then read as any other)."""
        if raw in self.configurations:
            return self.configurations[raw]
        if len(self.configurations) >= SEEN_MAX:
            self.configurations.clear()
        found = self.configurations[raw] = _configuration(raw)
        return found

    def call(self, raw: bytes) -> tuple[str, str, bool]:
        """A launch line's api and domain (COLLECTOR_LAUNCH's second group): the api, the domain, whether it
        is the runtime's."""
        found = self.calls.get(raw)
        if found is None:
            if len(self.calls) >= SEEN_MAX:
                self.calls.clear()
            api, _, domain = raw.partition(b'","domain":"')
            found = self.calls[raw] = (api.decode(), domain.decode(), domain == b"runtime")
        return found

    def kernel(self, raw: bytes) -> tuple[str, str | None] | None:
        """A launch line's handle and kernel name (COLLECTOR_LAUNCH's fifth group), None for an empty name;
        None where either is not plain text (trace_lines.plain_text)."""
        if raw in self.kernels:
            return self.kernels[raw]
        if len(self.kernels) >= SEEN_MAX:
            self.kernels.clear()
        handle, named, name = raw.partition(trace_lines.NAME_FIELD)
        handle, name = trace_lines.plain_text(handle), trace_lines.plain_text(name) if named else None
        found = self.kernels[raw] = None if handle is None or (named and name is None) else (handle, name or None)
        return found


def _configuration(raw: bytes) -> tuple[Any, ...] | None:
    m = COLLECTOR_CONFIGURATION(raw)
    if m is None:
        return None
    (gx, gy, gz, bx, by, bz, cx, cy, cz, dynamic, static, result) = map(int, m.group(*range(1, 13)))
    if not (gx < MAX_BYTES and gy < MAX_BYTES and gz < MAX_BYTES and bx < MAX_BYTES and by < MAX_BYTES and
            bz < MAX_BYTES and cx < MAX_BYTES and cy < MAX_BYTES and cz < MAX_BYTES and dynamic < MAX_BYTES and
            -1 <= static < MAX_BYTES and -MAX_INT32 <= result < MAX_INT32 and bx * by * bz <= MAX_BLOCK_THREADS):
        return None
    attributes = _UNKNOWN
    if result:  # the kernel's attributes at the refusal, -1 where absent
        values = tuple(-1 if value is None else int(value) for value in m.group(13, 14, 15))
        if not all(-1 <= value < MAX_BYTES for value in values):
            return None
        attributes = tuple(known(value) for value in values)
    return ((gx, gy, gz), (bx, by, bz), (cx, cy, cz), dynamic, None if static < 0 else static, result,
            m[16] == b"true", attributes)


class _File:
    """The state of one process image's file while it is read: what joins lines to each other."""

    def __init__(self, tally: Tally, seen: _Seen, name: str) -> None:
        self.tally, self.seen, self.name, self.pid = tally, seen, name, -1
        self.pending: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
        self.ids: dict[int, tuple[Any, ...]] = {}  # launch id -> its key in the tally
        self.counts: dict[int, int] = {}  # launch id -> the largest count written
        self.names: dict[str, str] = {}  # handle -> kernel name
        self.nodes: dict[str, dict[int, tuple[Any, ...]]] = {}  # exec -> node id -> key
        self.replays: dict[str, int] = {}  # exec -> the largest replay count
        self.refused_replays: dict[tuple[str, int, str], int] = {}  # (exec, result, api) -> refusals
        self.overflow: dict[str | None, int] = {}  # handle -> the largest count past the table
        # Launches by correlation id, still to be paired with the record of the other domain: driver records
        # (two generations), and runtime records that came first.
        self.recent: dict[int, _Pending] = {}
        self.older: dict[int, _Pending] = {}
        self.waiting: dict[int, _Pending] = {}

    def read(self, stream: BinaryIO) -> None:
        first = next(trace_lines.numbered_lines(stream), None)
        if first is None:
            return  # created, and nothing written yet
        try:
            r, replaced = parse(first[1]) if first[2] else ({}, False)
        except BadLine:
            r, replaced = {}, False
        if r.get("event") != "process" or r.get("format") not in FORMATS:
            self.tally.skip(Skip.FOREIGN if r.get("event") != "process" else Skip.UNKNOWN_FORMAT, self.name)
            return
        try:
            self.process(r)
            if replaced:  # a command line cut inside a character
                self.tally.skip(Skip.NOT_UTF8, f"{self.name} line 1")
        except BadLine as bad:
            self.tally.skip(bad.kind, f"{self.name} line 1")
        self.lines(stream, first[0])
        self.finish()

    def lines(self, stream: BinaryIO, number: int) -> None:
        """Every line after the first (the loop every record goes through, kept short)."""
        # Bound methods in a local table, not on self: a cycle would outlive the file while the collector is off.
        events = {"launch": self.launch, "graph_node": self.launch, "attribute": self.attribute, "count": self.count,
                  "function": self.function, "overflow": self.past_table, "replay": self.replay}
        readline, tally, loads = stream.readline, self.tally, fast_loads
        # The collector's launch and count lines are most of a trace: read here, without a call per line.
        collector_count, collector_launch, counts, ids, names = COLLECTOR_COUNT, COLLECTOR_LAUNCH, self.counts, \
            self.ids, self.names
        seen = self.seen
        configurations, configuration, calls, call, kernels, kernel, pair = seen.configurations, seen.configuration, \
            seen.calls, seen.call, seen.kernels, seen.kernel, self.pair
        while True:
            line = readline(records.MAX_LINE_BYTES + 1)
            if not line:
                return
            number += 1
            if line[-1:] != b"\n":
                if len(line) <= records.MAX_LINE_BYTES:
                    tally.torn += 1  # the last line, cut short by a process killed while writing it
                    continue
                while line and line[-1:] != b"\n":
                    line = readline(records.MAX_LINE_BYTES)
                line = None
            elif (m := collector_launch(line)) is not None:
                # As launch() keeps it; a number out of bounds or a text that is not plain: launch() says why.
                launch_id, called, correlation, configured, named = m.groups()
                configured = configurations.get(configured) or configuration(configured)
                named = kernels.get(named) or kernel(named)
                launch_id, correlation = int(launch_id), int(correlation)
                if configured is not None and named is not None and launch_id < MAX_COUNT and correlation < MAX_BYTES:
                    api, domain, is_runtime = calls.get(called) or call(called)
                    handle, own = named
                    if own is None:
                        name = names.get(handle)
                    else:
                        names[handle] = name = own
                    grid, block, cluster, dynamic, static, result, captured, attributes = configured
                    key = ids[launch_id] = (api, name, grid, block, cluster, dynamic, static, result, domain, captured,
                                            _LAUNCH, attributes, 0)
                    if is_runtime or self.waiting:
                        pair((key, launch_id, handle, own, api), correlation, is_runtime)
                    else:  # pair()'s most common case, without the call: a driver call, no runtime call waiting
                        recent = self.recent
                        recent[correlation] = (key, launch_id, handle, own, api)
                        if len(recent) > PENDING_RECORDS:
                            self.older, self.recent = recent, {}
                    continue
            elif (m := collector_count(line)) is not None:
                entry, count = m.groups()
                entry, count = int(entry), int(count)
                if entry < MAX_COUNT and count <= MAX_COUNT:
                    if count > counts.get(entry, 0):
                        counts[entry] = count
                    continue
            try:
                try:
                    r, replaced = loads(line), False
                except Exception:  # noqa: BLE001 - the standard parser decides what orjson refuses
                    r, replaced = parse(line)
                handle = events.get(r.get("event")) if type(r) is dict else None
                if handle is None:
                    parse(line)  # says what the line is not
                    raise BadLine(Skip.UNKNOWN_EVENT)
                handle(r)
                if replaced:
                    tally.skip(Skip.NOT_UTF8, f"{self.name} line {number}")
            except BadLine as bad:
                tally.skip(bad.kind, f"{self.name} line {number}")

    def process(self, r: dict[str, Any]) -> None:
        self.pid = number(r, "pid", 0, MAX_INT32)
        untraced = r.get("untraced")
        self.tally.processes.append(records.Process(
            self.pid, number(r, "ppid", 0, MAX_INT32, 0), text_of(r, "command"), text_of(r, "collector"),
            text_of(r, "cupti_library"), text_of(r, "cupti_found"), untraced if isinstance(untraced, str) else None,
            number(r, "image", 1, MAX_INT32, 1)))

    def count(self, r: dict[str, Any]) -> None:
        entry, count = r.get("id"), r.get("count")
        if type(entry) is not int or type(count) is not int or not (0 < entry < MAX_COUNT and 0 < count <= MAX_COUNT):
            raise BadLine(Skip.BAD_NUMBER)
        if count > self.counts.get(entry, 0):
            self.counts[entry] = count

    def function(self, r: dict[str, Any]) -> None:
        handle, name = r.get("handle"), trace_lines.name_of(r)
        if type(handle) is not str or name is None:
            raise BadLine(Skip.NOT_AN_EVENT)
        self.names[handle] = name

    def past_table(self, r: dict[str, Any]) -> None:
        handle = r.get("handle")
        if handle is not None and type(handle) is not str:
            raise BadLine(Skip.NOT_AN_EVENT)
        self.overflow[handle] = max(self.overflow.get(handle, 0), number(r, "count", 1, MAX_COUNT + 1))

    def attribute(self, r: dict[str, Any]) -> None:
        attribute = r["attribute"] = number(r, "attribute", 0, MAX_INT32)
        # A size is never negative; the carveout's -1 asks for the default.
        r["value"] = number(r, "value", 0 if attribute == records.MAX_DYNAMIC_SHARED else -MAX_INT32, MAX_INT32)
        r["static_bytes"] = number(r, "static_bytes", -1, MAX_BYTES, -1)
        r["result"] = number(r, "result", -MAX_INT32, MAX_INT32, 0)
        r["correlation"] = number(r, "correlation", 0, MAX_BYTES, 0)
        self.join("attribute", r)

    def launch(self, r: dict[str, Any]) -> None:
        get = r.get
        dynamic, static, result = get("dynamic_bytes", 0), get("static_bytes", -1), get("result", 0)
        correlation, launch_id = get("correlation", 0), get("id", 0)
        if type(dynamic) is not int or type(static) is not int or type(result) is not int or \
                type(correlation) is not int or type(launch_id) is not int or not (
                0 <= dynamic < MAX_BYTES and -1 <= static < MAX_BYTES and -MAX_INT32 <= result < MAX_INT32 and
                0 <= correlation < MAX_BYTES and 0 <= launch_id < MAX_COUNT):
            raise BadLine(Skip.BAD_NUMBER)
        grid, block, cluster = get("grid"), get("block"), get("cluster")
        try:  # three lists of three non-negative 32-bit ints, checked inline: every launch line comes here
            (gx, gy, gz), (bx, by, bz), (cx, cy, cz) = grid, block, cluster
            if not (type(gx) is int and type(gy) is int and type(gz) is int and type(bx) is int and
                    type(by) is int and type(bz) is int and type(cx) is int and type(cy) is int and
                    type(cz) is int and 0 <= gx < MAX_BYTES and 0 <= gy < MAX_BYTES and 0 <= gz < MAX_BYTES and
                    0 <= bx < MAX_BYTES and 0 <= by < MAX_BYTES and 0 <= bz < MAX_BYTES and 0 <= cx < MAX_BYTES and
                    0 <= cy < MAX_BYTES and 0 <= cz < MAX_BYTES):
                raise TypeError
            grid, block, cluster = (gx, gy, gz), (bx, by, bz), (cx, cy, cz)
        except (TypeError, ValueError):  # one is absent, or not such a list: say which
            grid, block, cluster = dims(grid), dims(block), dims(cluster)
        if block[0] * block[1] * block[2] > MAX_BLOCK_THREADS:
            raise BadLine(Skip.BAD_NUMBER)
        attributes = _UNKNOWN
        if result:  # the kernel's attributes at the refusal (record format 2)
            attributes = tuple(known(number(r, k, -1, MAX_BYTES, -1))
                               for k in ("max_dynamic_bytes", "max_threads", "registers"))
        r["grid"], r["block"], r["cluster"], r["attributes"] = grid, block, cluster, attributes
        exec_graph = get("exec")
        if r["event"] == "graph_node":
            if exec_graph is None:
                self.join("launch", r)  # a node as built: counted once
                return
            if type(exec_graph) is not str:
                raise BadLine(Skip.NOT_AN_EVENT)
            nodes = self.nodes.setdefault(exec_graph, {})
            # A node written again for the same exec (cuGraphExecKernelNodeSetParams) replaces it; its replays
            # before the change are counted with its new parameters, as nothing tells them apart.
            nodes[launch_id or -len(nodes) - 1] = self.key(r, None, _REPLAY)
            return
        if not launch_id:  # a collector writes an id with every launch: without one, it is counted once
            self.join("launch", r)
            return
        name, handle, api, is_runtime = get("name"), get("handle"), get("api"), get("domain") == "runtime"
        handle = handle if type(handle) is str else None
        own = name if type(name) is str and name else None
        api = api if type(api) is str else None
        key = (api or "?", self.named(own, handle), grid, block, cluster, dynamic, None if static < 0 else static,
               result, "runtime" if is_runtime else "driver", get("captured") is True, _LAUNCH, attributes, 0)
        self.ids[launch_id] = key
        self.pair((key, launch_id, handle, own, api), correlation, is_runtime)

    def named(self, own: str | None, handle: str | None) -> str | None:
        """A launch's kernel name: its own (then the name of its handle), else its handle's name."""
        if own is not None:
            if handle is not None:
                self.names[handle] = own
            return own
        return None if handle is None else self.names.get(handle)

    def pair(self, launch: _Pending, correlation: int, is_runtime: bool) -> None:
        """A launch counted by its id when the file ends, kept at once; its key is replaced should the record of
        the other domain with its correlation id come."""
        if is_runtime:  # its driver call was written just before it, by the same thread
            partner = self.recent.pop(correlation, None) or self.older.pop(correlation, None)
            if partner is None:
                self.waiting[correlation] = launch
                if len(self.waiting) > PENDING_RECORDS:
                    self.waiting.clear()  # runtime records whose driver call never came: kept alone
                return
            driver, runtime = partner, launch
        elif self.waiting and correlation in self.waiting:  # the runtime record came first
            driver, runtime = launch, self.waiting.pop(correlation)
        else:
            recent = self.recent
            recent[correlation] = launch
            if len(recent) > PENDING_RECORDS:  # two generations: what is older than both is paired with nothing
                self.older, self.recent = recent, {}
            return
        del self.ids[runtime[1]]  # the runtime call's own count counts the same calls as its driver call's
        self.ids[driver[1]] = self.merged(driver, runtime)

    def merged(self, driver: _Pending, runtime: _Pending) -> tuple[Any, ...]:
        """The key of a driver launch made by a runtime call: the call the program made and the result it saw,
        the driver's request, kernel name and attributes (the runtime's where the driver's record has none)."""
        key, _, handle, own, _ = driver
        runtime_key, _, runtime_handle, runtime_own, runtime_api = runtime
        result, attributes = runtime_key[7], key[11]
        if result and attributes == _UNKNOWN:  # a host stub has none; the driver's record has the kernel's
            attributes = runtime_key[11]
        return (runtime_api or key[0], self.named(own, handle) or self.named(runtime_own, runtime_handle),
                *key[2:7], result, "runtime", key[9], _LAUNCH, attributes, 0)

    def replay(self, r: dict[str, Any]) -> None:
        exec_graph = r.get("exec")
        if type(exec_graph) is not str:
            raise BadLine(Skip.NOT_AN_EVENT)
        result = number(r, "result", -MAX_INT32, MAX_INT32, 0)
        count = number(r, "count", 1, MAX_COUNT + 1, 1)
        if result:
            where = (exec_graph, result, text_of(r, "api", "cuGraphLaunch"))
            self.refused_replays[where] = self.refused_replays.get(where, 0) + count
        else:
            self.replays[exec_graph] = max(self.replays.get(exec_graph, 0), count)

    def join(self, category: str, r: dict[str, Any]) -> None:
        """Hold ``r`` until the record of the other domain with its correlation id comes, then keep both as one."""
        key = (category, r.get("correlation", 0))
        partner = self.pending.pop(key, None)
        if partner is not None and partner.get("domain") != r.get("domain"):
            driver, runtime = (partner, r) if r.get("domain") == "runtime" else (r, partner)
            self.keep(category, driver, runtime)
            return
        if partner is not None:
            self.keep(category, partner, None)
        self.pending[key] = r
        if len(self.pending) > PENDING_RECORDS:
            (old_category, _), old = self.pending.popitem(last=False)
            self.keep(old_category, old, None)

    def kernel_name(self, r: dict[str, Any]) -> str | None:
        name, handle = r.get("name"), r.get("handle")
        if type(name) is str and name:
            if type(handle) is str:
                self.names[handle] = name
            return name
        return self.names.get(handle) if type(handle) is str else None

    def keep(self, category: str, r: dict[str, Any], runtime: dict[str, Any] | None) -> None:
        """One record (a driver record with the runtime call that made it, where one did) into the tally."""
        if category == "attribute":
            api, result, domain = text_of(r, "api", "?"), r["result"], text_of(r, "domain", "driver")
            driver_api, name = None, self.kernel_name(r)
            if runtime is not None:
                driver_api, api, result, domain = api, text_of(runtime, "api", api), runtime["result"], "runtime"
                name = name or self.kernel_name(runtime)
            key = (api, driver_api, r["attribute"], r["value"], result, domain, known(r["static_bytes"]), name)
            self.tally.add(self.tally.attributes, key, 1, self.pid, r["correlation"])
            return
        key = self.key(r, runtime, _LAUNCH if r["event"] == "launch" else _NODE)
        launch_id = r.get("id")
        if r["event"] == "launch" and launch_id:
            self.ids[launch_id] = key  # counted when the file ends: the largest count of its id wins
        else:
            self.tally.add(self.tally.launches, key, 1, self.pid, r.get("correlation", 0))

    def key(self, r: dict[str, Any], runtime: dict[str, Any] | None, kind: str) -> tuple[Any, ...]:
        """A launch's key in the tally."""
        api, result, domain = r.get("api"), r.get("result", 0), r.get("domain")
        api, domain = api if type(api) is str else "?", domain if domain == "runtime" else "driver"
        name, attributes = self.kernel_name(r), r["attributes"]
        if runtime is not None:  # the call the program made, and the result it saw
            api, result, domain = text_of(runtime, "api", api), runtime.get("result", 0), "runtime"
            name = name or self.kernel_name(runtime)
            if result and attributes == _UNKNOWN:  # the driver's record has the kernel's; a host stub has none
                attributes = runtime["attributes"]
        elif not result:
            attributes = _UNKNOWN
        static = r.get("static_bytes", -1)
        return (api, name, r["grid"], r["block"], r["cluster"], r.get("dynamic_bytes", 0),
                None if static < 0 else static, result, domain, r.get("captured") is True, kind, attributes, 0)

    def finish(self) -> None:
        """The file ended: records still waiting are kept alone, launches get their counts, graph nodes their
        replays, launches past the table their kernels' names."""
        while self.pending:
            (category, _), r = self.pending.popitem(last=False)
            self.keep(category, r, None)
        add, launches, pid = self.tally.add, self.tally.launches, self.pid
        self.tally.add_counted(self.ids, self.counts, pid)
        for exec_graph, nodes in self.nodes.items():
            for key in nodes.values():
                add(launches, key, self.replays.get(exec_graph, 0), pid, 0)
        for (exec_graph, result, api), count in self.refused_replays.items():
            nodes = list(self.nodes.get(exec_graph, {}).values())
            worst = max(nodes, key=lambda k: k[5] + (k[6] or 0), default=None)
            # A replay's refusal is the graph's: shown on the node that asks the most shared memory.
            node = (api, None, NO_DIMS, NO_DIMS, NO_DIMS, 0, None, _UNKNOWN) if worst is None else \
                (api, *worst[1:7], worst[11])
            key = (*node[:7], result, "driver", False, _REFUSED_REPLAY, node[7], len(nodes))
            add(launches, key, count, pid, 0)
        for handle, count in self.overflow.items():
            kernel = None if handle is None else self.names.get(handle, UNNAMED_PAST_TABLE)
            entry = self.tally.past_table.setdefault(kernel, [0, set()])
            entry[0] += count
            entry[1].add(pid)
