"""The C collector and CUDA graphs, through the fake libcupti and a fake driver that holds graphs: an executable
graph's kernel nodes written when it is instantiated, each cuGraphLaunch counted as one replay, refusals at
instantiation and at replay named, kernel nodes changed or added by hand. Checked on the lines as written (the
record contract), before any reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.trace.fake_process import REPLAYS
from tests.trace.fakes import lines, play


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, fakes: Path, collector: Path) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("graphs")
    done = play(fakes, collector, out, "graphs")
    assert done.returncode == 0, done.stderr
    return lines(out)


def _nodes(written: list[dict[str, Any]], exec_graph: str) -> list[dict[str, Any]]:
    return [r for r in written if r["event"] == "graph_node" and r.get("exec") == exec_graph]


def _replays(written: list[dict[str, Any]], exec_graph: str) -> int:
    """The largest count of the exec's successful replays (each count line supersedes the smaller)."""
    return max((r["count"] for r in written if r["event"] == "replay" and r["exec"] == exec_graph
                and "result" not in r), default=0)


def _instantiated(written: list[dict[str, Any]], name: str) -> list[str]:
    """The execs, in order, of which a kernel named ``name`` is a node."""
    execs = [r["exec"] for r in written if r["event"] == "graph_node" and r.get("name") == name and "exec" in r
             and r["api"].startswith("cuGraphInstantiate")]
    return list(dict.fromkeys(execs))


def test_a_captured_kernel_replayed_a_thousand_times_counts_a_thousand_launches(
        written: list[dict[str, Any]]) -> None:
    (captured,) = [r for r in written if r["event"] == "launch" and r.get("name") == "_Z9attentionPf"]
    assert captured["captured"] is True  # the capture itself ran nothing
    first = _instantiated(written, "_Z9attentionPf")[0]
    (node,) = [r for r in _nodes(written, first) if r["api"] == "cuGraphInstantiateWithFlags"
               and r["name"] == "_Z9attentionPf"]
    assert (node["dynamic_bytes"], node["block"], node["result"]) == (100000, [128, 1, 1], 0)
    assert _replays(written, first) == REPLAYS
    # written as it grows: at each power of two, then the final count when the exec was destroyed
    counts = [r["count"] for r in written if r["event"] == "replay" and r["exec"] == first]
    assert counts == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, REPLAYS]


def test_kernel_nodes_of_child_graphs_are_walked_and_other_nodes_skipped(written: list[dict[str, Any]]) -> None:
    first = _instantiated(written, "_Z9attentionPf")[0]
    at_instantiation = [r for r in _nodes(written, first) if r["api"] == "cuGraphInstantiateWithFlags"]
    assert len(at_instantiation) == 2  # the memcpy node is no kernel's
    (child,) = [r for r in at_instantiation if r["name"] != "_Z9attentionPf"]
    assert child["name"].startswith("_ZN7cutlass") and child["dynamic_bytes"] == 4096  # a CUkernel's node
    assert len({r["id"] for r in at_instantiation}) == 2


def test_a_node_changed_in_the_exec_is_written_again_with_its_id(written: list[dict[str, Any]]) -> None:
    first = _instantiated(written, "_Z9attentionPf")[0]
    nodes = [r for r in _nodes(written, first) if r["name"] == "_Z9attentionPf"]
    instantiated, changed = nodes  # set three times to the same parameters: written once
    assert changed["api"] == "cuGraphExecKernelNodeSetParams_v2" and changed["dynamic_bytes"] == 120000
    assert (changed["id"], changed["node"]) == (instantiated["id"], instantiated["node"])


def test_a_refused_instantiation_names_the_node_the_driver_names(written: list[dict[str, Any]]) -> None:
    (refused,) = [r for r in written if r.get("api") == "cuGraphInstantiateWithParams"]
    assert refused["event"] == "graph_node" and "exec" not in refused
    assert (refused["name"], refused["dynamic_bytes"], refused["result"]) == ("_Z6kernelPf", 300000, 1)


def test_a_refused_instantiation_without_a_named_node_names_every_kernel_node(
        written: list[dict[str, Any]]) -> None:
    refused = [r for r in written if r["event"] == "graph_node" and r["correlation"] == 35]
    assert sorted((r["dynamic_bytes"], r["result"], "exec" in r) for r in refused) == [(512, 1, False),
                                                                                       (300000, 1, False)]


def test_refused_replays_are_each_counted_once(written: list[dict[str, Any]]) -> None:
    (refused_exec,) = {r["exec"] for r in written if r["event"] == "graph_node" and r.get("exec")
                       and r["dynamic_bytes"] == 60000}
    refusals = [(r["api"], r["count"], r["result"]) for r in written if r["event"] == "replay"
                and r["exec"] == refused_exec]
    # each launch's first refusal at once, its repeats when the process ends: the reader adds them up
    assert refusals == [("cuGraphUpload", 1, 1), ("cuGraphLaunch", 1, 1), ("cuGraphLaunch", 2, 1)]
    assert _replays(written, refused_exec) == 0


def test_a_handle_instantiated_again_is_another_exec(written: list[dict[str, Any]]) -> None:
    first, again = _instantiated(written, "_Z9attentionPf")
    assert again == f"{first}#2"
    assert _replays(written, again) == 3 and _replays(written, first) == REPLAYS
    assert {r["id"] for r in _nodes(written, first)}.isdisjoint(r["id"] for r in _nodes(written, again))


def test_an_updated_exec_replays_the_new_graphs_nodes(written: list[dict[str, Any]]) -> None:
    first = _instantiated(written, "_Z9attentionPf")[0]
    (node,) = [r for r in written if r.get("api") == "cuGraphExecUpdate_v2"]  # the second update changed nothing
    assert node["exec"] == f"{first}#3" and (node["name"], node["dynamic_bytes"]) == ("_Z6kernelPf", 1024)
    # cuGraphLaunch and cuGraphLaunch_ptsz, two each after the updates
    assert _replays(written, f"{first}#2") == 3 and _replays(written, f"{first}#3") == 4


def test_kernel_nodes_changed_or_added_by_hand_are_nodes_as_built(written: list[dict[str, Any]]) -> None:
    runtime, driver = [r for r in written if r["event"] == "graph_node" and r["correlation"] == 50]
    assert (runtime["api"], runtime["domain"], runtime["dynamic_bytes"]) == ("cudaGraphKernelNodeSetParams",
                                                                             "runtime", 2048)
    assert (driver["api"], driver["name"], driver["block"]) == ("cuGraphKernelNodeSetParams_v2", "_Z6kernelPf",
                                                                [32, 1, 1])
    (added,) = [r for r in written if r.get("api") == "cuGraphAddNode"]  # the memcpy node is not written
    assert added["name"].startswith("_ZN7cutlass") and added["dynamic_bytes"] == 8192
    assert not any("exec" in r for r in (runtime, driver, added))


def test_a_killed_process_keeps_the_replays_counted_so_far(fakes: Path, collector: Path, tmp_path: Path) -> None:
    done = play(fakes, collector, tmp_path, "graphs-killed")
    assert done.returncode == -9
    written = lines(tmp_path)
    (first,) = _instantiated(written, "_Z9attentionPf")
    assert _replays(written, first) == 512  # the last power of two before the kill: a lower bound, never more
