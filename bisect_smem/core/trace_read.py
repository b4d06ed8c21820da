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
from bisect_smem.core.trace_layout import COLLECTOR_COUNT, COLLECTOR_LAUNCH, NO_ATTRIBUTES, Parts
from bisect_smem.core.trace_lines import NO_DIMS, BadLine, dims, fast_loads, known, number, parse, text_of
from bisect_smem.core.trace_pairs import PENDING_RECORDS, Pairs, Pending, merged, named
from bisect_smem.core.trace_tally import Tally

FORMATS = frozenset({1, 2})  # the record formats this reader knows
NOTICES_FILE = "notices.jsonl"  # written by the tool itself, beside the collectors' files
UNNAMED_PAST_TABLE = "a kernel first seen past the table"


def read_trace(folder: Path) -> records.Trace:
    """Every collector file of ``folder`` (``*.jsonl``), read line by line; lines and files that cannot be
    read are skipped and counted. A TraceError only where ``folder`` is not a folder that can be listed."""
    if not folder.is_dir():
        raise records.TraceError(f"{folder} is not a folder of traces")
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".jsonl"))
    except OSError as exc:
        raise records.TraceError(f"cannot list {folder}: {exc.strerror or exc}") from None
    tally, parts = Tally(), Parts()
    collecting = gc.isenabled()
    # Reading makes millions of short-lived dicts and tuples and no cycle: the cyclic collector would scan the
    # growing tally again and again, almost half the time of a large trace.
    gc.disable()
    try:
        for name in names:
            if name == NOTICES_FILE:
                _read_notices(tally, folder / name)
            else:
                _read_file(tally, parts, folder / name)
    finally:
        if collecting:
            gc.enable()
    return tally.trace()


def _read_file(tally: Tally, parts: Parts, path: Path) -> None:
    try:
        reader.check_regular(path)
        with open(path, "rb", buffering=1 << 20) as stream:
            _File(tally, parts, path.name).read(stream)
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


_UNKNOWN = NO_ATTRIBUTES
_LAUNCH, _NODE, _REPLAY, _REFUSED_REPLAY = (kind.value for kind in records.LaunchKind)


class _File:
    """The state of one process image's file while it is read: what joins lines to each other."""

    def __init__(self, tally: Tally, parts: Parts, name: str) -> None:
        self.tally, self.parts, self.name, self.pid = tally, parts, name, -1
        self.pending: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()
        # Launch ids as the collector writes them, in decimal: a line taken apart (trace_layout) needs no int().
        self.ids: dict[bytes, tuple[Any, ...]] = {}  # launch id -> its key in the tally
        self.counts: dict[bytes, int] = {}  # launch id -> the largest count written
        self.names: dict[str, str] = {}  # handle -> kernel name
        self.nodes: dict[str, dict[int, tuple[Any, ...]]] = {}  # exec -> node id -> key
        self.replays: dict[str, int] = {}  # exec -> the largest replay count
        self.refused_replays: dict[tuple[str, int, str], int] = {}  # (exec, result, api) -> refusals
        self.overflow: dict[str | None, int] = {}  # handle -> the largest count past the table
        self.pairs = Pairs()

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
        """Every line after the first: the collector's launch and count lines, most of a trace, are taken apart
        here without a call per line (trace_layout); any other line is parsed."""
        # Bound methods in a local table, not on self: a cycle would outlive the file while the collector is off.
        events = {"launch": self.launch, "graph_node": self.launch, "attribute": self.attribute, "count": self.count,
                  "function": self.function, "overflow": self.past_table, "replay": self.replay}
        readline, counts, ids, names, pairs, parts = stream.readline, self.counts, self.ids, self.names, self.pairs, \
            self.parts
        configurations, configuration, calls, call, kernels, kernel = parts.configurations, parts.configuration, \
            parts.calls, parts.call, parts.kernels, parts.kernel
        while True:
            line = readline(records.MAX_LINE_BYTES + 1)
            if not line:
                return
            number += 1
            if line[-1:] != b"\n":
                if len(line) <= records.MAX_LINE_BYTES:
                    self.tally.torn += 1  # the last line, cut short by a process killed while writing it
                    continue
                while line and line[-1:] != b"\n":
                    line = readline(records.MAX_LINE_BYTES)
                line = None
            elif (m := COLLECTOR_LAUNCH(line)) is not None:
                # As launch() keeps it; a number out of bounds or a text that is not plain: launch() says why.
                launch_id, called, correlation, configured, kernel_part = m.groups()
                configured = configurations.get(configured) or configuration(configured)
                kernel_part = kernels.get(kernel_part) or kernel(kernel_part)
                if configured is not None and kernel_part is not None:
                    api, domain, is_runtime = calls.get(called) or call(called)
                    handle, own = kernel_part
                    if own is None:
                        name = names.get(handle)
                    else:
                        names[handle] = name = own
                    grid, block, cluster, dynamic, static, result, captured, attributes = configured
                    key = ids[launch_id] = (api, name, grid, block, cluster, dynamic, static, result, domain, captured,
                                            _LAUNCH, attributes, 0)
                    if is_runtime or pairs.waiting:
                        self.pair((key, launch_id, handle, own, api), correlation, is_runtime)
                    else:  # the most common case, without a call to pair(): a driver call, no runtime call waiting
                        pairs.driver((key, launch_id, handle, own, api), correlation)
                    continue
            elif (m := COLLECTOR_COUNT(line)) is not None:
                entry, count = m.groups()
                count = int(count)
                if count <= MAX_COUNT:
                    if count > counts.get(entry, 0):
                        counts[entry] = count
                    continue
            self.parsed(line, number, events)

    def parsed(self, line: bytes | None, number: int, events: dict[str, Any]) -> None:
        """A line read as JSON, handed to its event's method; what it cannot be is counted by kind."""
        try:
            try:
                r, replaced = fast_loads(line), False
            except Exception:  # noqa: BLE001 - the standard parser decides what orjson refuses
                r, replaced = parse(line)
            handle = events.get(r.get("event")) if type(r) is dict else None
            if handle is None:
                parse(line)  # says what the line is not
                raise BadLine(Skip.UNKNOWN_EVENT)
            handle(r)
            if replaced:
                self.tally.skip(Skip.NOT_UTF8, f"{self.name} line {number}")
        except BadLine as bad:
            self.tally.skip(bad.kind, f"{self.name} line {number}")

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
        entry = b"%d" % entry
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
        key = (api or "?", named(self.names, own, handle), grid, block, cluster, dynamic, None if static < 0 else static,
               result, "runtime" if is_runtime else "driver", get("captured") is True, _LAUNCH, attributes, 0)
        self.ids[b"%d" % launch_id] = key
        self.pair((key, b"%d" % launch_id, handle, own, api), b"%d" % correlation, is_runtime)

    def pair(self, launch: Pending, correlation: bytes, is_runtime: bool) -> None:
        """A launch counted by its id when the file ends, kept at once; a driver launch and the runtime call that
        made it are counted as one, by the driver's id."""
        paired = self.pairs.pair(launch, correlation, is_runtime)
        if paired is not None:
            driver, runtime = paired
            del self.ids[runtime[1]]  # the runtime call's own count counts the same calls as its driver call's
            self.ids[driver[1]] = merged(self.names, driver, runtime)

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
            self.ids[b"%d" % launch_id] = key  # counted when the file ends: the largest count of its id wins
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
