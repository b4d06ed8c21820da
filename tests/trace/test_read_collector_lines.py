"""The C collector's launch and count lines, which the reader takes apart without a JSON parser: they are read
exactly as the same records are through the parser, whatever they hold (numbers out of bounds, names with
escapes, bytes that are not UTF-8, runtime calls paired with their driver calls), and every such line the real
collector (and its Python fallback, where it names the kernel) writes is one the reader takes that way."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bisect_smem.core import trace_read
from bisect_smem.core.trace_events import Skip
from bisect_smem.core.trace_layout import COLLECTOR_COUNT, COLLECTOR_LAUNCH
from bisect_smem.core.trace_read import read_trace
from bisect_smem.devices.collector import build
from tests.trace.fakes import play
from tests.trace.records import process

# collector.c's order of a launch line's fields; the kernel's attributes come after "result" at a refusal.
FIELDS = ("event", "id", "api", "domain", "correlation", "grid", "block", "cluster", "dynamic_bytes",
          "static_bytes", "result", "max_dynamic_bytes", "max_threads", "registers", "captured", "handle", "name")


def collector_line(record: dict[str, Any]) -> bytes:
    """``record`` as collector.c writes it: compact, its fields in the collector's order, names in UTF-8
    (a name given as bytes is written as they are)."""
    parts = []
    for key in [k for k in FIELDS if k in record] + [k for k in record if k not in FIELDS]:
        value = record[key]
        text = b'"' + value + b'"' if isinstance(value, bytes) else \
            json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        parts.append(b'"' + key.encode() + b'":' + text)
    return b"{" + b",".join(parts) + b"}\n"


def parser_line(record: dict[str, Any]) -> bytes:
    """The same record with spaces after its separators: a line only the JSON parser reads."""
    return collector_line(record).replace(b'","', b'", "').replace(b',"', b', "').replace(b'":', b'": ')


def launch_record(launch_id: int, correlation: int, **fields: Any) -> dict[str, Any]:
    record = {"event": "launch", "id": launch_id, "api": "cuLaunchKernel", "domain": "driver",
              "correlation": correlation, "grid": [1, 1, 1], "block": [128, 1, 1], "cluster": [0, 0, 0],
              "dynamic_bytes": 1024, "static_bytes": 0, "result": 0, "captured": False, "handle": "0x5555000010",
              "name": "_Z4fillPfi"}
    record.update(fields)
    return {k: v for k, v in record.items() if v is not None}


def read_both(records: list[dict[str, Any]]) -> tuple[Any, Any]:
    """The trace of ``records`` written as the collector writes them, and as only the parser reads them."""
    with tempfile.TemporaryDirectory() as scratch:
        traces = []
        for kind, line in (("collector", collector_line), ("parser", parser_line)):
            folder = Path(scratch) / kind
            folder.mkdir()
            (folder / "10.jsonl").write_bytes(collector_line(process(10)) + b"".join(map(line, records)))
            traces.append(read_trace(folder))
    return traces[0], traces[1]


NUMBERS = st.sampled_from([0, 1, 7, 48 * 1024, 232448, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 10**10, -1, -5])
NAMES = st.one_of(st.none(), st.sampled_from(["", "_Z4fillPfi", "_Z5emptyi", "k\"q", "k\\n", "é", "k\x01",
                                              "k\x7f", b"k\xff", b"k\xed\xa0\x80"]))
HANDLES = st.sampled_from(["0x5555000010", "0x5555000010", "0x5555000020", "(nil)", "", "0x\\1"])


@st.composite
def launches(draw: st.DrawFn) -> list[dict[str, Any]]:
    records = []
    for i in range(draw(st.integers(1, 12))):
        result = draw(st.sampled_from([0, 0, 1, 701, -1]))
        refusal = {}
        if result and draw(st.booleans()):
            refusal = {"max_dynamic_bytes": draw(NUMBERS), "max_threads": draw(NUMBERS), "registers": draw(NUMBERS)}
        event = draw(st.sampled_from(["launch", "launch", "launch", "count"]))
        launch_id = draw(st.sampled_from([1, 2, 3, i + 1, 10**14 - 1, 10**14, 2**48 - 1, 2**48]))
        if event == "count":
            records.append({"event": "count", "id": launch_id, "count": draw(st.sampled_from([1, 5, 2**48, 2**48 + 1]))})
            continue
        records.append(launch_record(
            launch_id, draw(st.sampled_from([1, 2, i, 10**9 - 1, 10**9, 2**32 - 1, 2**32])),
            domain=draw(st.sampled_from(["driver", "driver", "runtime"])),
            api=draw(st.sampled_from(["cuLaunchKernel", "cudaLaunchKernel", "cuLaunchKernelEx"])),
            grid=[draw(NUMBERS), 1, 1], block=[draw(NUMBERS), draw(st.sampled_from([1, 2**16])), 1],
            cluster=[draw(st.sampled_from([0, 2])), 1, 1], dynamic_bytes=draw(NUMBERS),
            static_bytes=draw(st.sampled_from([-1, 0, 1000, -2, 2**32])), result=result,
            captured=draw(st.booleans()), handle=draw(HANDLES), name=draw(NAMES), **refusal))
    return records


@settings(max_examples=150, deadline=None)
@given(launches())
def test_a_collector_line_is_read_as_the_json_parser_reads_it(records: list[dict[str, Any]]) -> None:
    by_collector, by_parser = read_both(records)
    assert by_collector == by_parser


def test_what_a_collector_line_holds_out_of_bounds_is_skipped_as_a_parsed_line_is() -> None:
    records = [launch_record(1, 1, dynamic_bytes=2**32), launch_record(2, 2, block=[2**16, 2**16, 1]),
               launch_record(3, 3, static_bytes=-2), launch_record(4, 4, name=b"k\xff"),
               launch_record(5, 5, name="k\"q"), {"event": "count", "id": 5, "count": 2**48 + 1},
               launch_record(6, 6, result=701, max_dynamic_bytes=2**32, max_threads=1024, registers=32)]
    by_collector, by_parser = read_both(records)
    assert by_collector == by_parser
    assert {s.kind: s.count for s in by_collector.skipped} == {Skip.BAD_NUMBER: 5, Skip.NOT_UTF8: 1}
    assert sorted((lnch.kernel, lnch.count) for lnch in by_collector.launches) == [("k\"q", 1), ("k\ufffd", 1)]


def test_a_runtime_launch_and_its_driver_call_are_paired_either_way(tmp_path: Path) -> None:
    driver = launch_record(1, 9, result=701, max_dynamic_bytes=49152, max_threads=1024, registers=32)
    runtime = launch_record(2, 9, api="cudaLaunchKernel", domain="runtime", result=9, handle="0x1234", name=None)
    counts = [{"event": "count", "id": 1, "count": 4}, {"event": "count", "id": 2, "count": 4}]
    for order in ([driver, runtime], [runtime, driver]):
        by_collector, by_parser = read_both(order + counts)
        assert by_collector == by_parser
        (paired,) = by_collector.launches
        assert (paired.api, paired.result, paired.result_domain, paired.kernel, paired.count) == \
            ("cudaLaunchKernel", 9, "runtime", "_Z4fillPfi", 4)
        assert paired.attributes.max_dynamic_bytes == 49152


def test_collector_lines_are_read_without_the_json_parser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []

    def loads(line: bytes) -> Any:
        parsed.append(line)
        return json.loads(line)

    monkeypatch.setattr(trace_read, "fast_loads", loads)
    lines = [launch_record(1, 1), {"event": "count", "id": 1, "count": 2},
             launch_record(2, 2, name=None, dynamic_bytes=0),  # named by its handle's earlier launch
             launch_record(3, 3, result=701, max_dynamic_bytes=49152, max_threads=1024, registers=32)]
    (tmp_path / "10.jsonl").write_bytes(collector_line(process(10)) + b"".join(map(collector_line, lines)))
    trace = read_trace(tmp_path)
    assert parsed == []
    assert sorted((lnch.dynamic_bytes, lnch.kernel, lnch.count, lnch.attributes.max_dynamic_bytes)
                  for lnch in trace.launches) == [(0, "_Z4fillPfi", 1, None), (1024, "_Z4fillPfi", 1, 49152),
                                                  (1024, "_Z4fillPfi", 2, None)]


def test_every_launch_and_count_line_of_the_collector_is_one_the_reader_takes_apart(recorded: Path) -> None:
    lines = [line + b"\n" for path in recorded.glob("*.jsonl") for line in path.read_bytes().splitlines()]
    launches = [line for line in lines if line.startswith(b'{"event":"launch"')]
    counts = [line for line in lines if line.startswith(b'{"event":"count"')]
    assert launches and counts
    assert [line for line in launches if COLLECTOR_LAUNCH(line) is None] == []
    assert [line for line in counts if COLLECTOR_COUNT(line) is None] == []


def test_the_python_fallback_writes_its_named_launches_as_the_collector_does(fakes: Path, tmp_path: Path) -> None:
    done = play(fakes, build.SOURCE_DIR / "fallback" / "sitecustomize.py", tmp_path, "python")
    assert done.returncode == 0, done.stderr
    lines = [line + b"\n" for path in tmp_path.glob("*.jsonl") for line in path.read_bytes().splitlines()]
    named = [line for line in lines if line.startswith(b'{"event":"launch"') and b'"name":null' not in line]
    assert named and [line for line in named if COLLECTOR_LAUNCH(line) is None] == []
