"""The trace reader on records written by hand (record format 2): what cannot be read is skipped and counted
by kind and the rest is read; counts, launches past the table, names from function lines, graph replays and
notices of collectors that could not write."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_smem.core.trace_events import MAX_LINE_BYTES, LaunchKind, Skip, Trace, TraceError
from bisect_smem.core.trace_read import UNNAMED_PAST_TABLE, read_trace
from tests.trace.records import attribute, launch, process, refused_attributes, write


def skipped(trace: Trace) -> dict[Skip, int]:
    return {s.kind: s.count for s in trace.skipped}


def test_what_cannot_be_read_is_skipped_and_counted_and_the_rest_read(tmp_path: Path) -> None:
    cut = ("python3 " + "é" * 300).encode()[:511]  # /proc/self/cmdline cut at 511 bytes, inside an "é"
    write(tmp_path, "10.jsonl", [process(10), launch(1, 1000),
                                 b"{not json", b'["a list"]', b'{"event":"launch","dynamic_bytes":-1}',
                                 b'{"event":"launch","dynamic_bytes":4294967296}',
                                 b'{"event":"launch","block":[65536,65536,1]}',
                                 b'{"event":"count","id":1,"count":0}',
                                 b'{"event":"count","id":1,"count":281474976710657}',
                                 b'{"event":"attribute","attribute":8,"value":-5}',
                                 b'{"event":"launch","dynamic_bytes":1.5}', b'{"event":"launch","grid":{"a":1}}',
                                 b'{"event":"something new"}', b"\xff\xfe"])
    (tmp_path / "11.jsonl").write_bytes(b'{"event":"process","format":2,"pid":11,"command":"' + cut + b'"}\n' +
                                        b'{"event":"launch","id":1,"dynamic_bytes":3000,"name":"k\xff"}\n')
    write(tmp_path, "results.jsonl", [{"loss": 0.5}])  # a foreign file in --out
    write(tmp_path, "12.jsonl", [process(12) | {"format": 3}, launch(1, 4000)])
    (tmp_path / "13.jsonl").write_bytes(b"")  # created, nothing written yet
    write(tmp_path, "14.jsonl", [process(14), launch(1, 5000)])
    (tmp_path / "14.jsonl").write_bytes((tmp_path / "14.jsonl").read_bytes() + b'{"event":"lau')  # killed mid-line
    (tmp_path / "15.jsonl").write_bytes(process_line(15) + b"x" * (MAX_LINE_BYTES + 10) + b"\n" +
                                        b'{"event":"launch","id":1,"dynamic_bytes":6000}\n')
    trace = read_trace(tmp_path)
    assert skipped(trace) == {Skip.NOT_JSON: 2, Skip.NOT_AN_EVENT: 2, Skip.BAD_NUMBER: 7, Skip.UNKNOWN_EVENT: 1,
                              Skip.NOT_UTF8: 2, Skip.FOREIGN: 1, Skip.UNKNOWN_FORMAT: 1, Skip.TOO_LONG: 1}
    assert sorted(lnch.dynamic_bytes for lnch in trace.launches) == [1000, 3000, 5000, 6000]
    assert trace.torn_lines == 1 and sorted(p.pid for p in trace.processes) == [10, 11, 14, 15]
    (cut_process,) = [p for p in trace.processes if p.pid == 11]
    assert cut_process.command.startswith("python3 éé") and cut_process.command.endswith("\ufffd")
    first = {s.kind: s.first for s in trace.skipped}
    assert first[Skip.NOT_JSON] == "10.jsonl line 3" and first[Skip.FOREIGN] == "results.jsonl"


def process_line(pid: int) -> bytes:
    return f'{{"event":"process","format":2,"pid":{pid}}}\n'.encode()


def test_a_folder_that_is_no_folder_is_the_one_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is not a folder of traces"):
        read_trace(tmp_path / "missing")


def test_no_cap_on_the_number_of_process_files(tmp_path: Path) -> None:
    for pid in range(1, 4200):
        (tmp_path / f"{pid}.jsonl").write_bytes(process_line(pid) + b'{"event":"launch","id":1,"dynamic_bytes":'
                                                b'1024,"name":"k"}\n')
    trace = read_trace(tmp_path)
    assert len(trace.processes) == 4199 and not trace.skipped
    (merged,) = trace.launches  # one configuration, launched once by each process
    assert merged.count == 4199 and len(merged.pids) == 4199


def test_the_largest_count_of_an_id_wins_wherever_it_is_written(tmp_path: Path) -> None:
    # Written at each power of two and at exit; a count may come before its launch line (another thread).
    write(tmp_path, "1.jsonl", [process(1), {"event": "count", "id": 2, "count": 2}, launch(1, 100), launch(2, 200),
                                {"event": "count", "id": 1, "count": 2}, {"event": "count", "id": 1, "count": 4},
                                {"event": "count", "id": 1, "count": 3}])
    counts = {lnch.dynamic_bytes: lnch.count for lnch in read_trace(tmp_path).launches}
    assert counts == {100: 4, 200: 2}


def test_counts_of_two_program_images_never_mix(tmp_path: Path) -> None:
    write(tmp_path, "7.jsonl", [process(7, "sh run.sh"), launch(1, 100), {"event": "count", "id": 1, "count": 2}])
    write(tmp_path, "7.2.jsonl", [process(7, "python job.py", image=2), launch(1, 200),
                                  {"event": "count", "id": 1, "count": 5}])
    trace = read_trace(tmp_path)
    assert {lnch.dynamic_bytes: lnch.count for lnch in trace.launches} == {100: 2, 200: 5}
    assert sorted((p.pid, p.image, p.command) for p in trace.processes) == [(7, 1, "sh run.sh"),
                                                                            (7, 2, "python job.py")]


def test_launches_past_the_table_are_counted_per_kernel_and_named_from_the_file(tmp_path: Path) -> None:
    write(tmp_path, "1.jsonl", [process(1), launch(1, 100, handle="0xa"),
                                {"event": "function", "api": "cuModuleGetFunction", "handle": "0xb", "name": "_Z1bv"},
                                {"event": "overflow", "handle": "0xa", "count": 2},
                                {"event": "overflow", "handle": "0xa", "count": 8},
                                {"event": "overflow", "handle": "0xb", "count": 4},
                                {"event": "overflow", "handle": "0xc", "count": 16},
                                {"event": "overflow", "handle": None, "count": 32}])
    write(tmp_path, "2.jsonl", [process(2), {"event": "function", "api": "cuLibraryGetKernel", "handle": "0xf",
                                             "name": "_Z1bv"}, {"event": "overflow", "handle": "0xf", "count": 1}])
    past = {p.kernel: (p.count, p.pids) for p in read_trace(tmp_path).past_table}
    assert past == {"_Z4fillPfi": (8, (1,)), "_Z1bv": (5, (1, 2)), UNNAMED_PAST_TABLE: (16, (1,)), None: (32, (1,))}


def test_function_lines_name_what_the_driver_could_not(tmp_path: Path) -> None:
    # R535 has no cuFuncGetName: the collector writes the name it saw in cuModuleGetFunction's parameters.
    write(tmp_path, "1.jsonl", [process(1), {"event": "function", "api": "cuModuleGetFunction",
                                             "handle": "0x5555000010", "name": "_Z6kernelv"},
                                launch(1, 100000, result=1, name=None, **refused_attributes()),
                                attribute(65536, 9, name=None) | {"handle": "0x5555000010"}])
    trace = read_trace(tmp_path)
    assert [lnch.kernel for lnch in trace.launches] == ["_Z6kernelv"]
    assert [a.kernel for a in trace.attribute_sets] == ["_Z6kernelv"]


def test_kernel_nodes_of_an_executable_graph_count_once_per_replay(tmp_path: Path) -> None:
    def node(node_id: int, dynamic_bytes: int, name: str, exec_graph: str = "0xe1", **fields: object) -> dict:
        return {"event": "graph_node", "api": "cuGraphInstantiateWithFlags", "domain": "driver", "correlation": 3,
                "exec": exec_graph, "id": node_id, "grid": [1, 1, 1], "block": [128, 1, 1], "dynamic_bytes":
                dynamic_bytes, "static_bytes": 0, "result": 0, "handle": "0x1", "name": name, **fields}

    write(tmp_path, "1.jsonl", [process(1), node(1, 90000, "_Z5flashv"), node(2, 0, "_Z4normv"),
                                node(3, 1024, "_Z4idlev", "0xe2"),
                                {"event": "replay", "exec": "0xe1", "count": 512},
                                {"event": "replay", "exec": "0xe1", "count": 1000},
                                {"event": "replay", "exec": "0xe1", "count": 999},
                                # cuGraphExecKernelNodeSetParams: node 2 of 0xe1 now asks for memory
                                node(2, 2048, "_Z4normv") | {"api": "cuGraphExecKernelNodeSetParams"},
                                node(1, 300000, "_Z4bigv", "0xe3"), node(2, 4096, "_Z5smallv", "0xe3"),
                                {"event": "replay", "exec": "0xe3", "result": 1},
                                {"event": "replay", "exec": "0xe3", "result": 1},
                                {"event": "replay", "exec": "0xe4", "result": 701},
                                {"event": "graph_node", "api": "cuGraphAddKernelNode_v2", "domain": "driver",
                                 "correlation": 9, "grid": [1, 1, 1], "block": [64, 1, 1], "dynamic_bytes": 512,
                                 "static_bytes": 0, "result": 0, "name": "_Z5builtv"}])
    launches = {(lnch.kernel, lnch.kind): lnch for lnch in read_trace(tmp_path).launches}
    replayed = {k: (v.count, v.dynamic_bytes) for (k, kind), v in launches.items() if kind is LaunchKind.GRAPH_REPLAY}
    assert replayed == {"_Z5flashv": (1000, 90000), "_Z4normv": (1000, 2048), "_Z4idlev": (0, 1024),
                        "_Z4bigv": (0, 300000), "_Z5smallv": (0, 4096)}
    refused = {(v.kernel, v.count, v.graph_nodes, v.result) for v in launches.values()
               if v.kind is LaunchKind.REFUSED_GRAPH_LAUNCH}
    assert refused == {("_Z4bigv", 2, 2, 1), (None, 1, 0, 701)}  # the node asking the most; nodes not recorded
    assert launches[("_Z5builtv", LaunchKind.GRAPH_NODE)].count == 1


def test_identical_records_of_many_processes_are_one_with_a_count(tmp_path: Path) -> None:
    for pid in (1, 2):
        write(tmp_path, f"{pid}.jsonl", [process(pid), *(attribute(65536, c) for c in range(4)), launch(1, 4096)])
    trace = read_trace(tmp_path)
    ((a,), (lnch,)) = trace.attribute_sets, trace.launches
    assert (a.count, a.pids, lnch.count, lnch.pids) == (8, (1, 2), 2, (1, 2))


def test_a_runtime_call_and_its_driver_call_are_one_record_in_either_order(tmp_path: Path) -> None:
    runtime = launch(5, 2048, name=None, correlation=40) | {"api": "cudaLaunchKernel", "domain": "runtime",
                                                           "result": 1}
    driver = launch(6, 2048, correlation=40, result=1, **refused_attributes())
    write(tmp_path, "a/1.jsonl", [process(1), driver, runtime, {"event": "count", "id": 6, "count": 3}])
    write(tmp_path, "b/1.jsonl", [process(1), runtime, driver, {"event": "count", "id": 6, "count": 3}])
    for folder in ("a", "b"):
        (one,) = read_trace(tmp_path / folder).launches
        assert (one.api, one.kernel, one.count, one.result_domain) == ("cudaLaunchKernel", "_Z4fillPfi", 3, "runtime")
        assert one.attributes.max_dynamic_bytes == 49152


def test_notices_of_collectors_that_could_not_write(tmp_path: Path) -> None:
    write(tmp_path, "notices.jsonl", [{"event": "unwritable", "pid": 77, "errno": 13, "path": "/t/77.jsonl",
                                       "command": "vllm serve"}, b"garbage"])
    trace = read_trace(tmp_path)
    ((notice,), (skip,)) = trace.unwritable, trace.skipped
    assert (notice.pid, notice.reason, notice.command) == (77, "Permission denied", "vllm serve")
    assert skip.kind is Skip.NOT_JSON and not trace.processes  # notices.jsonl is no foreign file


def test_a_file_read_leaves_nothing_behind_while_the_collector_is_off(tmp_path: Path) -> None:
    # read_trace holds the cyclic garbage collector off: a file's state in a cycle would stay until the end,
    # and a trace of many processes would hold every one of them at once.
    import gc

    from bisect_smem.core.trace_read import _File

    for pid in (1, 2, 3):
        write(tmp_path, f"{pid}.jsonl", [process(pid), launch(1, 1024)])
    read_trace(tmp_path)
    assert not [o for o in gc.get_objects() if isinstance(o, _File)]


def test_a_trace_is_read_as_a_stream_of_counts(tmp_path: Path) -> None:
    # What is held while reading is the distinct requests and one file's state, not the lines: far less than
    # the folder's size (the whole of it, as lines and records, was ten times that).
    import tracemalloc

    line = b'{"event":"launch","id":%d,"api":"cuLaunchKernel","domain":"driver","correlation":%d,"grid":[1,1,1],' \
           b'"block":[128,1,1],"cluster":[0,0,0],"dynamic_bytes":%d,"static_bytes":0,"result":0,"captured":false,' \
           b'"handle":"0x5555000010","name":"_Z6kernelILi%dEEvPf' + b"T" * 200 + b'"}\n'
    for pid in range(1, 21):
        body = b"".join(line % (i + 1, i, 1024 * (i % 8), i % 8) for i in range(3000))
        (tmp_path / f"{pid}.jsonl").write_bytes(process_line(pid) + body)
    size = sum(p.stat().st_size for p in tmp_path.iterdir())
    tracemalloc.start()
    try:
        trace = read_trace(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(trace.launches) == 8 and sum(lnch.count for lnch in trace.launches) == 60000
    assert peak < size / 2, (peak, size)


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=True),
                    st.text(max_size=8), st.lists(st.integers(-5, 1 << 33), max_size=4),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
_EVENTS = st.sampled_from(["launch", "graph_node", "attribute", "count", "function", "overflow", "replay", "process",
                           "unwritable", "x"])
_FIELDS = st.sampled_from(["id", "api", "domain", "correlation", "grid", "block", "cluster", "dynamic_bytes",
                           "static_bytes", "result", "captured", "handle", "name", "count", "exec", "attribute",
                           "value", "max_dynamic_bytes", "max_threads", "registers", "pid", "errno"])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(lines=st.lists(st.one_of(st.binary(max_size=40), st.builds(
    lambda event, fields: json.dumps({"event": event, **fields}).encode(), _EVENTS,
    st.dictionaries(_FIELDS, _VALUES, max_size=6))), max_size=12))
def test_no_line_ends_the_rest(lines: list[bytes]) -> None:
    # Whatever a line holds, it is read or skipped and counted: the launch after it is still read.
    with tempfile.TemporaryDirectory() as folder:
        body = [line.replace(b"\n", b" ") for line in lines]
        write(Path(folder), "1.jsonl", [process(1), *body, launch(99, 4096, name="_Z4lastv")])
        write(Path(folder), "notices.jsonl", body)
        trace = read_trace(Path(folder))
    assert any(lnch.kernel == "_Z4lastv" for lnch in trace.launches)
    assert all(s.count >= 1 for s in trace.skipped)
