"""Each refused request explained by its real cause, from the kernel's attributes recorded at the refusal:
a launch over the limit its kernel never raised, more threads than the kernel takes, registers a block lacks,
an invalid cluster, and what is known where the records do not tell. Through ``trace --from`` on records
written by hand: the exit code, the summary, what could not be read (on stderr) and the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.analysis.trace import Cause, Request, explain, fit_advice
from bisect_smem.app.render.trace import WIDTH, render_text
from bisect_smem.core.profiles import find_profile
from bisect_smem.core.trace_read import read_trace
from tests.conftest import assert_valid, run_main
from tests.trace.records import attribute, launch, process, refused_attributes, write


def published(name: str) -> Target:
    profile = find_profile(name)
    assert profile is not None
    return Target.from_profile(profile)


def refusals(folder: Path, target: str | None = "9.0") -> tuple[Request, ...]:
    here = published(target) if target else None
    return explain(read_trace(folder), here, [], lambda n: n, fit_advice).refusals


def test_a_launch_over_the_limit_its_kernel_never_raised(tmp_path: Path) -> None:
    # CuPy's RawKernel launched with shared_mem=100000, its MaxDynamicSharedMemorySize never raised: refused
    # although the H100 accepts 232448 B.
    write(tmp_path, "1.jsonl", [process(1), launch(1, 100000, result=1, **refused_attributes())])
    (r,) = refusals(tmp_path)
    assert (r.cause, r.kernel_limit_bytes, r.kernel_limit_raised) == (Cause.KERNEL_LIMIT, 49152, False)
    text = render_text(explain(read_trace(tmp_path), published("9.0"), [], lambda n: n, fit_advice))
    said = " ".join(line.strip() for line in text.splitlines())
    assert ("asked 100000 B at launch; this kernel's limit was 49152 B (MaxDynamicSharedMemorySize never raised): "
            "over by 50848 B; this sm_90 accepts up to 232448 B after cudaFuncSetAttribute") in said
    assert "to spare" not in text and all(len(line) <= WIDTH for line in text.splitlines())


def test_a_launch_over_a_limit_raised_too_little(tmp_path: Path) -> None:
    write(tmp_path, "1.jsonl", [process(1), launch(1, 100000, result=1, **refused_attributes(65536))])
    (r,) = refusals(tmp_path)
    assert r.cause is Cause.KERNEL_LIMIT and r.kernel_limit_raised
    text = render_text(explain(read_trace(tmp_path), None, [], lambda n: n, fit_advice))
    assert "(MaxDynamicSharedMemorySize set to it): over by 34464 B" in text and "raises it to what" in text


@pytest.mark.parametrize(("fields", "result", "cause", "says"), [
    ({"block": (2048, 1, 1)}, 1, Cause.THREADS, "a block of 2048 threads; this kernel accepts at most 1024"),
    ({"block": (1024, 1, 1), "max_threads": 512}, 1, Cause.THREADS, "accepts at most 512 threads per block"),
    ({"block": (1024, 1, 1), "registers": 255}, 701, Cause.REGISTERS,
     "255 registers x 1024 threads: 262144 as warps are given them, over the 65536 of a block"),
    ({"cluster": [3, 1, 1]}, 912, Cause.CLUSTER, "the driver refused its cluster of 3x1x1 (invalid cluster size)"),
], ids=["block-over-1024", "block-over-the-kernel-s-own", "registers", "cluster"])
def test_a_refusal_that_is_not_shared_memory_says_so(tmp_path: Path, fields: dict, result: int, cause: Cause,
                                                      says: str) -> None:
    attributes = refused_attributes()
    attributes.update({k: v for k, v in fields.items() if k in attributes})
    block = fields.get("block", (128, 1, 1))
    extra = {k: v for k, v in fields.items() if k not in attributes and k != "block"}
    # 100000 B over the kernel's unraised limit too: the cause that refuses whatever the bytes comes first
    write(tmp_path, "1.jsonl", [process(1), launch(1, 100000, result=result, block=block, **attributes, **extra)])
    (r,) = refusals(tmp_path)
    assert r.cause is cause
    text = " ".join(render_text(explain(read_trace(tmp_path), published("9.0"), [], lambda n: n,
                                        fit_advice)).split())
    assert says in text and "not shared memory" in text


@pytest.mark.parametrize(("registers", "threads", "cause"), [
    (64, 128, Cause.KERNEL_LIMIT),  # 8192 registers: the block has them
    (128, 512, Cause.KERNEL_LIMIT),  # 65536: exactly the block's
    (128, 513, Cause.REGISTERS),  # 65664 by the product; 69632 as 17 warps are given 4096 each
    (65, 1000, Cause.REGISTERS),  # 65000 by the product, under 65536; 32 warps of 2304 as allocated: 73728
])
def test_registers_of_a_block_as_each_warp_s_are_allocated(tmp_path: Path, registers: int, threads: int,
                                                           cause: Cause) -> None:
    write(tmp_path, "1.jsonl", [process(1), launch(1, 100000, result=701, block=(threads, 1, 1),
                                                   **refused_attributes(registers=registers))])
    assert refusals(tmp_path)[0].cause is cause


def test_over_the_gpu_s_limit_is_said_against_the_gpu(tmp_path: Path) -> None:
    write(tmp_path, "1.jsonl", [process(1), launch(1, 300000, result=1, **refused_attributes()),
                                attribute(232449, 5, result=1)])
    assert {(r.requested_bytes, r.cause) for r in refusals(tmp_path)} == {(300000, Cause.GPU_LIMIT),
                                                                           (232449, Cause.GPU_LIMIT)}


def test_where_the_records_do_not_tell_what_is_known_is_said(tmp_path: Path) -> None:
    # A format 1 record: no attributes at the refusal. Within the GPU's limit, it is not "fits".
    write(tmp_path, "1.jsonl", [process(1, format=1), launch(1, 100000, result=1),
                                attribute(1000, 7, result=1)])
    (launched, attribute_set) = sorted(refusals(tmp_path), key=lambda r: -r.requested_bytes)
    assert launched.cause is Cause.UNKNOWN and attribute_set.cause is Cause.UNKNOWN
    text = " ".join(render_text(explain(read_trace(tmp_path), published("9.0"), [], lambda n: n,
                                        fit_advice)).split())
    assert "to spare" not in text and "the records do not tell why it was refused" in text
    assert "this kernel's own limit was not recorded: above 48 KiB a kernel must first raise" in text
    assert "within what this sm_90 accepts (232448 B with 0 B static)" in text
    bare = " ".join(render_text(explain(read_trace(tmp_path), None, [], lambda n: n, fit_advice)).split())
    assert "no limit of the GPU known here" in bare


def test_identical_requests_are_one_line_with_a_count(tmp_path: Path) -> None:
    # cuDNN's SDPA set the same MaxDynamicSharedMemorySize four times, in each of two workers.
    for pid in (1, 2):
        write(tmp_path, f"{pid}.jsonl", [process(pid), *(attribute(65536, c) for c in range(4))])
    e = explain(read_trace(tmp_path), published("9.0"), [], lambda n: n, fit_advice)
    (r,) = e.requests
    assert (r.count, r.processes, r.pid) == (8, 2, 1)
    text = render_text(e)
    assert text.count("_Z4sdpav") == 1 and "65536 B (cuFuncSetAttribute: success); 8 times in 2 processes" in text
    assert "8 attribute set(s)" in text


def test_bad_lines_leave_the_summary_and_the_exit_code_alone(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "1.jsonl", [process(1), launch(1, 100000, result=1, **refused_attributes()), b"{oops",
                                b"{oops again", b'{"event":"launch","dynamic_bytes":-1}'])
    write(tmp_path, "other.jsonl", [{"step": 1}])
    code, out, err = run_main(["trace", "--from", str(tmp_path), "--arch", "12.0"], capsys)
    assert code == 0 and "1 refusal(s)" in out and "never raised" in out
    assert err.splitlines() == ["warning: lines that are not JSON: 2 skipped (the first: 1.jsonl line 3)",
                                "warning: lines with numbers no collector writes: 1 skipped (the first: 1.jsonl "
                                "line 5)",
                                "warning: files that are not the collector's (their first line is no process "
                                "event): 1 skipped (the first: other.jsonl)"]
    # --strict keeps its one rule: a refusal makes it 1, bad lines do not.
    assert run_main(["trace", "--from", str(tmp_path), "--strict"], capsys)[0] == 1


def test_the_json_keeps_counts_causes_and_what_was_skipped(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "1.jsonl", [process(1), launch(1, 100000, result=1, **refused_attributes()),
                                {"event": "count", "id": 1, "count": 3}, attribute(65536, 2), attribute(65536, 3),
                                {"event": "overflow", "handle": None, "count": 9}, b"{oops"])
    write(tmp_path, "notices.jsonl", [{"event": "unwritable", "pid": 9, "errno": 36, "path": "/t/9.jsonl",
                                       "command": "srun job"}])
    code, out, _ = run_main(["trace", "--from", str(tmp_path), "--arch", "9.0", "--json", "-"], capsys)
    summary = json.loads(out)
    assert code == 0
    assert_valid(summary, "trace")
    refused = next(r for r in summary["requests"] if r["refused"])
    assert (refused["cause"], refused["kernel_limit_bytes"], refused["count"]) == ("kernel_limit", 49152, 3)
    # sm_90 would take it once raised (its limit says fits), so the bytes over the kernel's own limit are said.
    assert (refused["elsewhere"][0]["fits"], refused["over_kernel_limit_bytes"]) == (True, 100000 - 49152)
    assert {r["over_kernel_limit_bytes"] for r in summary["requests"] if not r["refused"]} == {None}
    assert [r["count"] for r in summary["requests"] if r["kind"] == "attribute"] == [2]
    assert summary["past_table"] == [{"kernel": None, "readable": None, "count": 9, "processes": 1}]
    assert summary["unwritable"][0]["reason"] == "File name too long"
    assert [(s["kind"], s["count"]) for s in summary["skipped"]] == [("not_json", 1)]


def test_a_collector_that_could_not_write_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "notices.jsonl", [{"event": "unwritable", "pid": 4242, "errno": 13, "path": "/t/4242.jsonl",
                                       "command": "python serve.py"}])
    _, out, _ = run_main(["trace", "--from", str(tmp_path)], capsys)
    assert "process 4242 (python serve.py) could not write its trace: Permission denied (/t/4242.jsonl)" in out


def test_graph_replays_and_launches_past_the_table_in_the_summary(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def node(node_id: int, dynamic_bytes: int, name: str, exec_graph: str, result: int = 0) -> dict:
        return {"event": "graph_node", "api": "cuGraphInstantiateWithFlags", "domain": "driver", "correlation": 1,
                "exec": exec_graph, "id": node_id, "grid": [1, 1, 1], "block": [128, 1, 1],
                "dynamic_bytes": dynamic_bytes, "static_bytes": 0, "result": result, "name": name}

    write(tmp_path, "1.jsonl", [process(1), node(1, 90000, "_Z5flashv", "0xe1"),
                                node(1, 1024, "_Z4idlev", "0xe2", result=1),
                                {"event": "replay", "exec": "0xe1", "count": 1000},
                                node(1, 300000, "_Z4bigv", "0xe3"), node(2, 4096, "_Z5smallv", "0xe3"),
                                {"event": "replay", "exec": "0xe3", "result": 1},
                                {"event": "function", "api": "cuModuleGetFunction", "handle": "0xa", "name": "_Z4autov"},
                                {"event": "overflow", "handle": "0xa", "count": 4096}])
    code, out, _ = run_main(["trace", "--from", str(tmp_path), "--simulate", "h100", "--json", "-"], capsys)
    requests = {r["kernel"]: r for r in json.loads(out)["requests"]}
    assert code == 0 and requests["_Z5flashv"]["kind"] == "graph replay" and requests["_Z5flashv"]["count"] == 1000
    assert (requests["_Z4bigv"]["cause"], requests["_Z4bigv"]["graph_nodes"]) == ("gpu_limit", 2)
    _, out, _ = run_main(["trace", "--from", str(tmp_path), "--simulate", "h100"], capsys)
    text = " ".join(out.split())
    assert "cuGraphLaunch refused (invalid value); of its 2 kernel nodes, this one asks the most: 300000 B" in text and "over by 67552 B" in text
    assert "graph replay with dynamic shared memory 1024 B (cuGraphInstantiateWithFlags: invalid value); never " \
        "replayed" in text
    assert "4096 launches past the collector's table of configurations" in text and "auto(): 4096 launches" in text
