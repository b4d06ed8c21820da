"""The hardware rules have one home (core/hardware.py): the rules themselves, and no copies elsewhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bisect_smem.core import hardware as hw

PACKAGE = Path(__file__).resolve().parents[1] / "bisect_smem"


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
