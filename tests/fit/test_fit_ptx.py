"""PTX's static shared memory: read in linear time, alignments that PTX allows only, one kernel needs no --kernel."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.compiled import ptx_static, ptx_static_smem
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


@pytest.mark.parametrize("shape", ["20000 entries", "100000 nested blocks"])
def test_many_entries_and_deep_nesting_are_read_in_linear_time(shape: str, tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    if shape == "20000 entries":
        ptx.write_text("".join(f".visible .entry k{i}(\n.param .u64 p)\n{{\n{{ .reg .b32 r; }}\nret;\n}}\n"
                               for i in range(20000)))
        wanted = "k19999"
    else:
        ptx.write_text(ENTRY + "{" * 100000 + ".shared .b8 deep[3];\n" + "}" * 100000 + "ret;\n}\n")
        wanted = "k"
    start = time.monotonic()
    assert ptx_static_smem(ptx, wanted) == (wanted, 0 if shape == "20000 entries" else 3)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("text", [".func ( .param .b32 x {ret;}", ".entry {ret;}", "} .entry k() {ret;}",
                                  ".visible .entry k() { ret;", ".shared .b8 a[3]"])
def test_a_broken_function_or_statement_is_refused_not_a_crash(text: str, tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(text)
    with pytest.raises(UsageError, match=f"^{ptx}: "):
        ptx_static(ptx, None, ptxas=False)


@pytest.mark.parametrize("kernel, start", [(None, "has 20000 kernels: name one with --kernel (k0, k1, "),
                                           ("nope", "no kernel 'nope' in "), ("1", "kernel '1' is ambiguous")])
def test_thousands_of_kernels_are_listed_in_one_short_line(kernel: str | None, start: str, tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text("".join(f".visible .entry k{i}(\n.param .u64 p)\n{{\nret;\n}}\n" for i in range(20000)))
    with pytest.raises(UsageError) as caught:
        ptx_static(ptx, kernel, ptxas=False)
    message = str(caught.value)
    assert start in message and " more" in message and len(message) - len(str(ptx)) < 100, message
