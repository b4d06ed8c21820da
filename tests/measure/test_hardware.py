"""The hardware rules have one home (core/hardware.py): the rules themselves, and no copies elsewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bisect_smem.core import hardware as hw
from tests.paths import PACKAGE


@pytest.mark.parametrize(("value", "multiple", "up", "down"), [
    (0, 128, 0, 0), (1, 128, 128, 0), (128, 128, 128, 128), (129, 128, 256, 128), (232448, 1024, 232448, 232448),
])
def test_rounding(value: int, multiple: int, up: int, down: int) -> None:
    assert hw.round_up(value, multiple) == up
    assert hw.round_down(value, multiple) == down


def test_rounding_refuses_a_zero_multiple() -> None:
    with pytest.raises(ValueError, match="got 0"):
        hw.round_up(5, 0)


@pytest.mark.parametrize(("static", "footprint"), [(0, 0), (1, 16), (16, 16), (17, 32), (49152, 49152)])
def test_the_dynamic_array_starts_16_byte_aligned(static: int, footprint: int) -> None:
    assert hw.static_footprint(static) == footprint
    assert hw.block_request_bytes(1000, static) == 1000 + footprint


def test_the_h200_staircase_formula() -> None:
    # 8 KiB blocks on an H200: (8192 + 1024 reserved) per block, 233472 B per SM -> 25 blocks, smem binds.
    footprint = hw.block_footprint(8192, 128, 1024)
    assert footprint == 9216
    assert hw.blocks_per_sm(footprint, 32, 233472, 32, 2048) == (25, "smem")
    assert hw.blocks_per_sm(hw.block_footprint(0, 128, 1024), 1024, 233472, 32, 2048) == (2, "threads")
    assert hw.blocks_per_sm(0, 32, 233472, 32, 2048) == (32, "blocks")
    assert hw.blocks_per_sm(1024, 32, None, None, None) == (None, None)


@pytest.mark.parametrize(("cc", "registers", "aggr", "clusters"), [
    ((7, 5), False, False, False), ((8, 0), True, False, False), ((8, 9), True, False, False),
    ((9, 0), True, True, True), ((12, 1), True, True, True),
])
def test_the_cc_gates(cc: tuple[int, int], registers: bool, aggr: bool, clusters: bool) -> None:
    assert (hw.has_smem_registers(cc), hw.has_aggr_register(cc), hw.has_clusters(cc)) == (registers, aggr, clusters)


def test_reserved_window_and_cluster_limits() -> None:
    assert hw.default_reserved_bytes((9, 0)) == hw.default_reserved_bytes((8, 0)) == 1024
    assert hw.default_reserved_bytes((7, 5)) == 0
    assert hw.portable_cluster_limit(16) == hw.PORTABLE_CLUSTER_SIZE == 8
    assert hw.portable_cluster_limit(None) is None
    assert hw.DriverAttribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == 97


def _sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for p in sorted(PACKAGE.rglob("*.py")) if p.name != "hardware.py"]


def test_the_round_up_idiom_lives_only_in_core_hardware() -> None:
    copies = [f"{p.relative_to(PACKAGE)}:{i}" for p, text in _sources()
              for i, line in enumerate(text.splitlines(), 1) if "-(-" in line and "//" in line]
    assert copies == []


def test_driver_attribute_ids_are_named_not_numbered() -> None:
    # cuDeviceGetAttribute ids by number (attribute(97, ...), {8: ...}) belong to DriverAttribute.
    pattern = re.compile(r"\battribute\(\s*\d+\s*,|^\s+\d+:\s", re.MULTILINE)
    found = [str(p.relative_to(PACKAGE)) for p, text in _sources() if pattern.search(text)]
    assert found == []


def test_thread_and_cluster_limits_are_not_written_as_literals() -> None:
    # Comparisons with 1024 threads or cluster sizes 8/16 must use the named limits.
    offenders = []
    for path, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Compare):
                literals = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                if 1024 in literals:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


# The fit modules still hold their own gate (the stage rule's cc 10.0); they are exempt until it moves here.
CC_GATE_EXEMPT = {"analysis/stages.py", "analysis/fit.py", "analysis/cubin.py", "app/fit_command.py",
                  "app/fit_render.py"}


def _cc_like(node: ast.AST) -> bool:
    """A literal (MAJOR, MINOR) that reads as a compute capability: (9, 0), (12, 1)."""
    return (isinstance(node, ast.Tuple) and len(node.elts) == 2
            and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts)
            and 1 <= node.elts[0].value <= 15 and 0 <= node.elts[1].value <= 9)


def _names_a_cc(node: ast.AST) -> bool:
    """An expression whose last name says it is a compute capability: cc, x.compute_capability, tuple(cc)."""
    if isinstance(node, ast.Call) and node.args:
        return _names_a_cc(node.args[0])
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name == "cc" or name.endswith("_cc") or "compute_capability" in name


def test_cc_gates_live_only_in_core_hardware() -> None:
    # Every "cc 8.0 and newer" is a named function of core/hardware.py; a profile row's own cc is its data.
    offenders = []
    for path, text in _sources():
        where = str(path.relative_to(PACKAGE))
        if where in CC_GATE_EXEMPT:
            continue
        tree = ast.parse(text)
        row_ccs = {id(k.value) for n in ast.walk(tree) if isinstance(n, ast.Call)
                   for k in n.keywords if k.arg == "compute_capability"} if where == "core/profiles.py" else set()
        for node in ast.walk(tree):
            if _cc_like(node) and id(node) not in row_ccs:
                offenders.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.Compare) and any(isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE)
                                                     for op in node.ops):
                if any(_names_a_cc(side) for side in [node.left, *node.comparators]):
                    offenders.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
