"""PTX's static shared memory: read in linear time, alignments that PTX allows only, one kernel needs no --kernel."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.compiled import ptx_static_smem
from bisect_smem.core.errors import UsageError

ENTRY = ".visible .entry k(\n.param .u64 p)\n{\n"


def test_twenty_thousand_shared_lines_are_fast(tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text("".join(f".shared .align 4 .b32 s{i}[1];\n" for i in range(20000)) + ENTRY + "ret;\n}\n")
    start = time.monotonic()
    name, total = ptx_static_smem(ptx, None)
    assert (name, total) == ("k", 0) and time.monotonic() - start < 5


@pytest.mark.parametrize("align, message", [("0", "has .align 0"), ("3", "has .align 3")])
def test_alignments_that_are_not_powers_of_two_are_refused(align: str, message: str, tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(ENTRY + f".shared .align {align} .b8 buf[64];\nret;\n}}\n")
    with pytest.raises(UsageError, match=message):
        ptx_static_smem(ptx, None)


def test_the_only_kernel_needs_no_name(tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(ENTRY + ".shared .align 16 .b8 buf[64];\nret;\n}\n")
    assert ptx_static_smem(ptx, None) == ("k", 64)
