"""`fit` against hostile input: compiled files that are endless, foreign, cut short or corrupt; options
that would be ignored; absurd sizes; repeated targets; and a local device whose measurement failed."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.compiled import EM_CUDA, MAX_COMPILED_FILE_BYTES
from bisect_smem.app.cli import main as cli
from tests.fit.test_fit import KERNELS
from tests.nvrtc import NvrtcUnavailable, compile_source, supported_archs
from tests.paths import ROOT


def one_line_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["fit", *args])
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    return code, err


@pytest.fixture(scope="module")
def cubin() -> bytes:
    try:
        if 90 not in supported_archs():
            pytest.skip("NVRTC cannot target sm_90")
    except NvrtcUnavailable as exc:
        pytest.fail(f"NVRTC must be installed for the compile checks: {exc}")
    ok, log, _, out = compile_source(KERNELS, "sm_90", [], cubin=True)
    assert ok, log
    return out


def elf_header(machine: int) -> bytes:
    """A 64-bit little-endian ELF header for ``machine`` and nothing else."""
    return b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack("<HHI", 1, machine, 1) + bytes(40)


@pytest.mark.parametrize("option, message", [("--cubin", "is not a cubin: not an ELF file"),
                                             ("--ptx", "is not PTX: not a text file")])
def test_dev_zero_is_refused_at_once(option: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = one_line_error([option, "/dev/zero", "--kernel", "k", "--no-local"], capsys)
    assert code == 2 and message in err


def test_a_file_beyond_the_cap_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "huge.cubin"
    with open(path, "wb") as handle:
        handle.write(elf_header(EM_CUDA))
        handle.truncate(MAX_COMPILED_FILE_BYTES + 1)  # sparse: no disk used
    code, err = one_line_error(["--cubin", str(path), "--kernel", "k", "--no-local"], capsys)
    assert code == 2 and f"more than any compiled kernel file (at most {MAX_COMPILED_FILE_BYTES} B)" in err


def test_an_x86_elf_is_not_a_cubin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x86.o"
    path.write_bytes(elf_header(62) + bytes(200))
    code, err = one_line_error(["--cubin", str(path), "--kernel", "k", "--no-local"], capsys)
    assert code == 2 and "an ELF file for machine 62, not CUDA (190)" in err


@pytest.mark.parametrize("damage", ["cut in half", "cut to the header", "section names out of range",
                                    "section table beyond the end", "name offset beyond the names"])
def test_damaged_cubins_are_one_line(damage: str, cubin: bytes, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    data = bytearray(cubin)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if damage == "cut in half":
        data = data[:len(data) // 2]
    elif damage == "cut to the header":
        data = data[:64]
    elif damage == "section names out of range":
        struct.pack_into("<H", data, 0x3E, shnum + 5)
    elif damage == "section table beyond the end":
        struct.pack_into("<Q", data, 0x28, len(data) - shentsize)
    else:
        for i in range(shnum):
            struct.pack_into("<I", data, shoff + i * shentsize, 0x7FFFFFFF)
    path = tmp_path / "bad.cubin"
    path.write_bytes(bytes(data))
    code, err = one_line_error(["--cubin", str(path), "--kernel", "tiled", "--no-local"], capsys)
    assert code == 2 and "is a cut-short or corrupt cubin" in err and str(path) in err


def test_the_intact_cubin_still_reads(cubin: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ok.cubin"
    path.write_bytes(cubin)
    assert cli.main(["fit", "--cubin", str(path), "--kernel", "small", "--dynamic", "0", "--arch", "9.0",
                     "--no-local", "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["request"]["static_bytes"] in (100, 112)


@pytest.mark.parametrize("args, message", [
    (["100", "--stages", "3"], "--stages applies only to --tile MxNxK"),
    (["100", "--dtype", "fp8"], "--dtype applies only to --tile MxNxK"),
    (["100", "--dtype-a", "fp8", "--epilogue", "1K"], "--dtype-a, --epilogue apply only to --tile MxNxK"),
    (["100", "--schedule", "pingpong"], "--schedule applies only to --tile MxNxK"),
    (["--tile", "-1x2x3"], "--tile must look like 128x256x64 (MxNxK, each 1..65536; got '-1x2x3')"),
    (["--tile", "-128x256x64", "--stages", "2"], "--tile must look like 128x256x64"),
    (["--tile", "1" * 5000 + "x2x3"], "--tile must look like 128x256x64"),
    (["--tile", "\u00b2x2x3"], "--tile must look like 128x256x64"),
    (["100", "--kernel", "mm"], "--kernel names a kernel in --cubin or --ptx"),
    (["99999999999999999999999"], "dynamic bytes must be <= 4294967296 B (4 GiB; got 99999999999999999999999)"),
    (["--dynamic", "5000000K", "--static", "0"], "dynamic bytes must be <= 4294967296 B"),
    (["--tile", "65537x8x8", "--dtype", "fp32"], "tile M must be in 1..65536"),
    (["--tile", "65537x1x1"], "tile M must be in 1..65536"),
    (["--explain", "Required: 99999999999999999999, Hardware limit: 101376"], "Required must be <= 4294967296 B"),
])
def test_ignored_options_and_absurd_sizes_are_refused(args: list[str], message: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, err = one_line_error([*args, "--no-local"], capsys)
    assert code == 2 and message in err, err


def test_an_architecture_named_twice_is_one_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fit", "1000", "--arch", "9.0", "--arch", "9.0", "--arch", "h200", "--arch", "12.0",
                     "--no-local", "--json", "-"]) == 0
    assert [r["target"].split()[0] for r in json.loads(capsys.readouterr().out)["results"]] == ["sm_90", "sm_120"]


def test_a_failed_local_measurement_is_named_with_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    # A sticky fault at 64 KiB poisons every search that would cross it: the ceilings are not measured.
    code = cli.main(["fit", "1000", "--arch", "h200", "--simulate", "h200,sticky=60000"])
    out = capsys.readouterr().out
    assert code == 4
    device = [line for line in out.splitlines() if line.startswith("device 0")]
    assert "unknown" in device[0]
    assert "limit unknown:" in device[1] and "illegal_address" in device[1]


def test_over_somewhere_outranks_an_unknown_device(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "150000", "--arch", "12.0", "--simulate", "h200,sticky=60000", "--json", "-"])
    results = json.loads(capsys.readouterr().out)["results"]
    assert code == 1
    assert [r["verdict"] for r in results] == ["does not fit", "unknown"] and results[1]["error"]


@pytest.mark.parametrize("extra", [["--no-local"], ["--target", "REPORT"]])
def test_no_cuda_is_imported_without_local_devices(extra: list[str], cubin: bytes, tmp_path: Path) -> None:
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    report = tmp_path / "r.json"
    assert cli.main(["--simulate", "h200", "--json", str(report), "--quiet"]) == 0
    args = ["fit", "--cubin", str(path), "--kernel", "tiled", "--dynamic", "1000", "--arch", "9.0",
            *[str(report) if a == "REPORT" else a for a in extra]]
    script = ("import sys; from bisect_smem.app.cli.main import main; code = main(sys.argv[1:]); "
              "loaded = sorted(m for m in sys.modules if m.startswith(('cupy', 'numba', 'cuda')) "
              "or m.endswith(('cupy.backend', 'numba.backend', 'runner'))); print(loaded); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
