"""fit --ptx equals fit --cubin: on NVRTC output of generated kernels of every shared-memory form, and
on hand-written PTX of the forms NVRTC never writes (checked against ptxas -v and the cubin ptxas
assembles, where ptxas is installed). What the PTX reader cannot read is one error line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.compiled import cubin_static_smem, ptx_static
from bisect_smem.devices.ptxas import find_ptxas, ptxas_smem
from tests.conftest import one_error, run_main
from tests.fit.ptx_kernels import generate
from tests.nvrtc import NvrtcUnavailable, compile_source, supported_archs

SEEDS = range(48)
ARCHS = (75, 80, 86, 90, 100, 120)
HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
PTXAS = find_ptxas()
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="no ptxas installed to check the PTX reader against")


def entry(body: str, name: str = "k") -> str:
    """A PTX entry whose body is ``body``, with registers for the uses below."""
    return f".visible .entry {name}(.param .u64 p)\n{{\n.reg .b64 %rd<30>;\n{body}ret;\n}}\n"


def func(body: str, name: str) -> str:
    """A PTX .func with no parameters whose body is ``body``."""
    return f".func {name}()\n{{\n.reg .b64 %rd<30>;\n{body}ret;\n}}\n"


def use(*names: str) -> str:
    """Instructions that take each variable's address and store through it, so ptxas keeps them."""
    return "".join(f"mov.u64 %rd{i + 1}, {n};\nst.shared.u64 [%rd{i + 1}], %rd{i + 1};\n" for i, n in enumerate(names))


# (id, PTX after the header, the entry k's static bytes worked out by hand from the layout in ptx.py)
FORMS = [
    ("extern-unsized-is-dynamic", ".extern .shared .align 16 .b8 dyn[];\n" + entry(use("dyn")), 0),
    ("extern-rounds-static-to-16", ".extern .shared .align 4 .b8 dyn[];\n"
     + entry(".shared .align 1 .b8 a[33];\n" + use("a", "dyn")), 48),
    ("extern-rounds-to-its-align", ".extern .shared .align 128 .b8 dyn[];\n"
     + entry(".shared .align 1 .b8 a[33];\n" + use("a")), 128),
    ("func-body-called", func(".shared .align 4 .b8 buf[40000];\n" + use("buf"), "helper")
     + entry("call.uni helper, ();\n"), 40000),
    ("func-called-through-func", func(".shared .align 4 .b8 deep[100];\n" + use("deep"), "g")
     + func("call.uni g, ();\n", "f") + entry("call.uni f, ();\n"), 100),
    ("func-address-taken", func(".shared .align 4 .b8 F[100];\n" + use("F"), "f")
     + entry("mov.u64 %rd1, f;\nld.param.u64 %rd2, [p];\nst.global.u64 [%rd2], %rd1;\n"), 100),
    ("func-not-called", func(".shared .align 4 .b8 F[100];\n" + use("F"), "f") + entry(""), 0),
    ("funcs-in-declaration-order", ".func g();\n" + func(".shared .align 1 .b8 F[1];\n" + use("F") + "call.uni g, ();\n", "f")
     + func(".shared .align 16 .b8 G[1];\n" + use("G"), "g") + entry("call.uni f, ();\n"), 2),
    ("entry-then-module-then-funcs", ".shared .align 8 .b8 M[1];\n"
     + func(".shared .align 16 .b8 F[1];\n" + use("F", "M"), "f")
     + entry(".shared .align 2 .b8 E[3];\n" + use("E") + "call.uni f, ();\n"), 17),
    ("module-unused-not-counted", ".shared .align 4 .b8 unused[100];\n" + entry(".shared .b8 a[3];\n" + use("a")), 3),
    ("entry-local-unused-counted", entry(".shared .align 1 .b8 a[5];\n"), 5),
    ("multi-dimensional", entry(".shared .align 4 .b32 a[64][64];\n" + use("a")), 16384),
    ("vector-v4", entry(".shared .b8 c[1];\n.shared .v4 .f32 a[3];\n" + use("a", "c")), 64),
    ("vector-v2-aligned", entry(".shared .align 4 .v2 .b64 a[3];\n" + use("a")), 48),
    ("b128", entry(".shared .b8 c[1];\n.shared .b128 a[2];\n" + use("a", "c")), 48),
    ("comma-list", entry(".shared .b32 A[3], B, C[2][2];\n" + use("A", "B", "C")), 32),
    ("scalar-f16x2", entry(".shared .b8 c[1];\n.shared .f16x2 h;\n" + use("c", "h")), 8),
    ("line-comment", entry("// .shared .align 4 .b8 gone[1000];\n.shared .b8 a[2];\n" + use("a")), 2),
    ("block-comment", entry("/* .shared .align 4 .b8 gone[1000];\n.shared .b8 gone2[9]; */\n"
                            ".shared .b8 a[/* 1000 */ 2];\n" + use("a")), 2),
    ("hex-and-octal-counts", entry(".shared .align 0x10 .b8 a[0x10], b[010];\n" + use("a", "b")), 24),
    ("module-linkage", ".visible .shared .b32 V[7];\n.weak .shared .b32 W[2];\n.extern .shared .b32 X[1];\n"
     + entry(use("V", "W", "X")), 40),
    ("debug-lines-and-sections", '.file 1 "/src//a/*b*/.cu"\n' + entry(".loc 1 5 3\n.shared .b8 a[7];\n" + use("a"))
     + ".section .debug_abbrev\n{\n.b8 1\n.b8 17 }\n", 7),
]


@pytest.fixture
def no_ptxas(monkeypatch: pytest.MonkeyPatch) -> None:
    """fit --ptx with the PTX reader alone, as where no CUDA toolkit is installed."""
    monkeypatch.setattr("bisect_smem.devices.ptxas.find_ptxas", lambda: None)


def fit_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    """fit through the real entry point, its JSON parsed."""
    code, out, err = run_main(["fit", *args, "--no-local", "--json", "-"], capsys)
    assert code in (0, 1), err
    return code, json.loads(out)


def assert_ptx_fits_as_cubin(ptx: Path, cubin: Path, kernel: str, cc: int,
                             capsys: pytest.CaptureFixture[str]) -> dict:
    """fit --ptx and fit --cubin of one kernel, at the cubin's opt-in ceiling: the same request and
    verdicts, byte for byte. Returns fit --ptx's JSON."""
    arch = ["--kernel", kernel, "--arch", f"{cc // 10}.{cc % 10}"]
    _, first = fit_json(["--cubin", str(cubin), *arch, "--dynamic", "0"], capsys)
    static = first["request"]["static_bytes"]
    ceiling = first["results"][0]["optin_limit_bytes"] - -(-static // 16) * 16  # exactly fills the block
    cubin_code, by_cubin = fit_json(["--cubin", str(cubin), *arch, "--dynamic", str(ceiling)], capsys)
    ptx_code, by_ptx = fit_json(["--ptx", str(ptx), *arch, "--dynamic", str(ceiling)], capsys)
    assert cubin_code == 0 and by_cubin["results"][0]["over_bytes"] == 0, by_cubin
    assert (ptx_code, by_ptx["request"], by_ptx["results"]) == (cubin_code, by_cubin["request"], by_cubin["results"])
    return by_ptx


def nvrtc_pair(source: str, arch: str, folder: Path) -> tuple[Path, Path]:
    """PTX and cubin of one source from NVRTC, written to ``folder``."""
    try:
        if int(arch[3:]) not in supported_archs():
            pytest.skip(f"NVRTC cannot target {arch}")
    except NvrtcUnavailable as exc:
        pytest.fail(f"NVRTC must be installed for the compile checks: {exc}")
    paths = []
    for kind, cubin in (("ptx", False), ("cubin", True)):
        ok, log, _, image = compile_source(source, arch, [], cubin=cubin)
        assert ok, log
        paths.append(folder / f"k.{kind}")
        paths[-1].write_bytes(image if cubin else image.rstrip(b"\0"))
    return paths[0], paths[1]


@pytest.mark.usefixtures("no_ptxas")
@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}-sm_{ARCHS[s % len(ARCHS)]}")
def test_generated_kernels_read_from_ptx_fit_as_their_cubin(seed: int, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    cc = ARCHS[seed % len(ARCHS)]
    source = generate(seed)
    ptx, cubin = nvrtc_pair(source.text, f"sm_{cc}", tmp_path)
    for kernel in source.kernels:
        by_ptx = assert_ptx_fits_as_cubin(ptx, cubin, kernel, cc, capsys)
        assert "read from the PTX (no ptxas found" in by_ptx["source"], by_ptx["source"]
    if PTXAS is not None:
        answer = ptxas_smem(PTXAS, ptx, f"sm_{cc}")
        assert answer.smem_bytes == {k: cubin_static_smem(cubin, k)[1] for k in source.kernels}, source.text


@pytest.mark.parametrize("ptx_text, expected", [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_every_shared_form_is_read_as_laid_out(ptx_text: str, expected: int, tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(HEAD + ptx_text)
    assert ptx_static(ptx, "k", ptxas=False).static_bytes == expected


@needs_ptxas
@pytest.mark.usefixtures("no_ptxas")
@pytest.mark.parametrize("ptx_text", [f[1] for f in FORMS], ids=[f[0] for f in FORMS])
def test_every_shared_form_fits_as_the_cubin_ptxas_assembles(ptx_text: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    ptx, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    ptx.write_text(HEAD + ptx_text)
    done = subprocess.run([str(PTXAS), "-arch=sm_90", str(ptx), "-o", str(cubin)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert_ptx_fits_as_cubin(ptx, cubin, "k", 90, capsys)


DYNAMIC_ONLY = 'extern __shared__ float dyn[];\nextern "C" __global__ void k(float* out) { dyn[threadIdx.x] = 1; ' \
               "__syncthreads(); out[threadIdx.x] = dyn[threadIdx.x + 1]; }\n"
HELPER_ONLY = "__device__ __noinline__ float helper(int i) { __shared__ float buf[10000]; buf[i] = i; __syncthreads(); " \
              'return buf[i + 1]; }\nextern "C" __global__ void k(float* out) { out[threadIdx.x] = helper(threadIdx.x); }\n'


@pytest.mark.parametrize("reader", ["reader alone", "ptxas where found"])
def test_extern_shared_is_dynamic_not_one_static_byte(reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # NVRTC 13 writes `.extern .shared .align 16 .b8 dyn[];`: fit --ptx said "over by 16 B" at the ceiling.
    if reader == "reader alone":
        monkeypatch.setattr("bisect_smem.devices.ptxas.find_ptxas", lambda: None)
    ptx, cubin = nvrtc_pair(DYNAMIC_ONLY, "sm_90", tmp_path)
    assert "\n.extern .shared .align 16 .b8 dyn[];" in ptx.read_text()
    by_ptx = assert_ptx_fits_as_cubin(ptx, cubin, "k", 90, capsys)
    assert by_ptx["request"]["static_bytes"] == 0 and by_ptx["results"][0]["verdict"] == "fits with opt-in"


@pytest.mark.usefixtures("no_ptxas")
def test_shared_memory_of_a_called_helper_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A __noinline__ helper's __shared__ float buf[10000] was "fits, 0 B static"; the cubin says 40000 B.
    ptx, cubin = nvrtc_pair(HELPER_ONLY, "sm_90", tmp_path)
    assert ".func" in ptx.read_text()
    by_ptx = assert_ptx_fits_as_cubin(ptx, cubin, "k", 90, capsys)
    assert by_ptx["request"]["static_bytes"] == 40000
    code, over = fit_json(["--ptx", str(ptx), "--kernel", "k", "--arch", "9.0", "--dynamic", "204800"], capsys)
    assert code == 1 and over["results"][0]["over_bytes"] == 204800 + 40000 - 232448


REFUSED = [
    (".shared .b32 a[2] = {1, 2};", "take no initializer"),
    (".shared::cta .b32 a[2];", "are declared in .shared, not .shared::cta"),
    (".shared .v8 .b32 a[2];", ".v8 is not an element type of .shared"),
    (".shared .pred a[2];", ".pred is not an element type of .shared"),
    (".shared .b8 a[];", "only an .extern array's first size may be left out"),
    (".shared .b8 a[0];", "has 0 B"),
    (".shared .b8 a[12345678901234567];", "is not name[count]"),
    (".extern .shared .b8 a[];", ".extern before .shared is not read here"),
    (".shared .align 3 .b8 a[4];", "has .align 3"),
    (".shared .b8 a[4]; /* never closed", "a /* comment is never closed"),
    (".shared .align 4;", "no element type of .shared"),
    ("#define N 4\n.shared .b8 a[N];", "uses the preprocessor"),
]


@pytest.mark.parametrize("declaration, message", REFUSED, ids=[r[0].split(";")[0] for r in REFUSED])
def test_what_the_reader_cannot_read_is_one_error_line(declaration: str, message: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # ptxas refuses each of these too, so with or without it the answer is the reader's one line.
    ptx = tmp_path / "k.ptx"
    ptx.write_text(HEAD + entry(declaration + "\n"))
    code, out, err = run_main(["fit", "--ptx", str(ptx), "--no-local", "--arch", "9.0"], capsys)
    assert (code, out) == (2, "") and message in one_error(err) and str(ptx) in err


def fake_ptxas(folder: Path, log: str, code: int = 0) -> Path:
    """A ptxas that answers with ``log`` (real ptxas 13.0 -v lines) and ``code``, to reach the branches
    that real ptxas and this reader reach only when one of them is wrong."""
    script = folder / "ptxas"
    script.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 13.0, "
                      f"V13.0.88'; exit 0; fi\ncat >&2 <<'LOG'\n{log}\nLOG\nexit {code}\n")
    script.chmod(0o755)
    return script


def test_ptxas_is_preferred_where_it_disagrees_and_both_numbers_are_named(tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(HEAD + entry(".shared .b8 a[7];\n" + use("a")))
    ptxas = fake_ptxas(tmp_path, "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                                 "ptxas info    : Used 8 registers, used 0 barriers, 64 bytes smem")
    found = ptx_static(ptx, None, ptxas=ptxas)
    assert (found.static_bytes, found.source) == (64, "ptxas 13.0 -v (the PTX reader says 7 B)")


def test_a_ptxas_that_fails_leaves_the_reader_s_number_with_why(tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(HEAD + entry(".shared .b8 a[7];\n" + use("a")))
    ptxas = fake_ptxas(tmp_path, "ptxas fatal   : Unsupported .version 8.0; current version is '7.0'", code=255)
    found = ptx_static(ptx, None, ptxas=ptxas)
    assert found.static_bytes == 7
    assert found.source == "read from the PTX (ptxas could not assemble it: ptxas fatal   : Unsupported " \
                           ".version 8.0; current version is '7.0')"


def test_ptxas_reads_what_the_reader_refuses(tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(HEAD + entry(".shared .b8 a[4]; /* never closed"))
    ptxas = fake_ptxas(tmp_path, "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                                 "ptxas info    : Used 8 registers, used 0 barriers, 4 bytes smem")
    found = ptx_static(ptx, None, ptxas=ptxas)
    assert (found.kernel, found.static_bytes) == ("k", 4)
    assert found.source == "ptxas 13.0 -v (the PTX reader refused it: a /* comment is never closed)"


@needs_ptxas
def test_the_note_names_ptxas_when_it_agrees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(HEAD + entry(".shared .b8 a[7];\n" + use("a")))
    code, out, err = run_main(["fit", "--ptx", str(ptx), "--no-local", "--arch", "9.0"], capsys)
    assert code == 0, err
    assert "static 7 B of k, read from the PTX; ptxas " in out and " -v agrees" in out, out


def test_ptxas_is_found_under_cuda_home_when_not_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    ptxas = fake_ptxas(tmp_path / "bin", "")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert find_ptxas() == ptxas


def test_older_ptxas_lines_with_cmem_after_smem_are_read(tmp_path: Path) -> None:
    # CUDA 11's ptxas -v: "Used 10 registers, 33 bytes smem, 352 bytes cmem[0]"; an entry without smem says none.
    ptx = tmp_path / "k.ptx"
    ptx.write_text(HEAD + entry(".shared .b8 a[33];\n" + use("a")) + entry("", "k2"))
    ptxas = fake_ptxas(tmp_path, "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                                 "ptxas info    : Used 10 registers, 33 bytes smem, 352 bytes cmem[0]\n"
                                 "ptxas info    : Compiling entry function 'k2' for 'sm_90'\n"
                                 "ptxas info    : Used 4 registers, 352 bytes cmem[0]")
    assert ptxas_smem(ptxas, ptx, "sm_90").smem_bytes == {"k": 33, "k2": 0}


def test_ptxas_is_found_in_nvidia_s_cuda_13_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # nvidia-cuda-nvcc 13 installs site-packages/nvidia/cu13/bin/ptxas, beside the nvrtc wheel's nvidia/cu13/lib.
    (tmp_path / "nvidia" / "cu13" / "bin").mkdir(parents=True)
    ptxas = fake_ptxas(tmp_path / "nvidia" / "cu13" / "bin", "")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    for name in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("bisect_smem.devices.toolkit.SYSTEM_CUDA", str(tmp_path / "no-toolkit"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    assert find_ptxas() == ptxas
