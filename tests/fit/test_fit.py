"""`fit`: sizes, the tile formula, cubin and PTX reading, and the answers per architecture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.targets import FitRequest, Target, evaluate
from bisect_smem.app.cli import main as cli
from bisect_smem.core.errors import UsageError
from bisect_smem.core.profiles import PROFILES, ArchProfile, find_profile
from bisect_smem.core.sizes import parse_size
from tests.nvrtc import NvrtcUnavailable, compile_source, supported_archs


def fit_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = cli.main(["fit", *args, "--json", "-", "--no-local"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("text, expected", [
    ("110592", 110592), ("108KiB", 110592), ("99K", 101376), ("99kb", 101376), ("1.5KiB", 1536), ("1MiB", 1048576),
    (" 0 ", 0), ("227 KiB", 232448),
])
def test_human_sizes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text, message", [
    ("-5", "must be a byte count"), ("12XB", "must be a byte count"), ("abc", "must be a byte count"),
    ("0.5", "whole number of bytes"), ("", "must be a byte count"),
])
def test_bad_sizes_say_what_was_received(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_size(text)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.key)
def test_fit_for_every_profile(profile: ArchProfile, capsys: pytest.CaptureFixture[str]) -> None:
    optin = profile.max_smem_per_block_optin_bytes
    for dynamic, verdict in ((1024, "fits without opt-in"), (optin, "fits with opt-in"), (optin + 1, "does not fit")):
        code, data = fit_json([str(dynamic), "--arch", profile.key], capsys)
        (result,) = data["results"]
        assert result["verdict"] == verdict
        assert result["over_bytes"] == dynamic - optin
        assert code == (1 if verdict == "does not fit" else 0)
    # 1 B of static data takes 16 B: the largest dynamic size beside it is 15 B smaller.
    code, data = fit_json([str(optin - 16), "--static", "1", "--arch", profile.key], capsys)
    assert code == 0 and data["results"][0]["over_bytes"] == 0
    code, data = fit_json([str(optin - 15), "--static", "1", "--arch", profile.key], capsys)
    assert code == 1 and data["results"][0]["over_bytes"] == 1


def test_blocks_per_sm_follow_the_footprint() -> None:
    target = Target.from_profile(find_profile("h200"))
    assert evaluate(FitRequest(115712), target).blocks_per_sm == 2
    assert evaluate(FitRequest(115713), target).blocks_per_sm == 1
    assert evaluate(FitRequest(0, threads=1024), target).blocks_per_sm == 2


def test_local_simulated_device_is_measured(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "100000", "--arch", "h200", "--simulate", "rtx-pro-6000", "--json", "-"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    kinds = [(r["kind"], r["optin_limit_bytes"]) for r in data["results"]]
    assert kinds == [("published", 232448), ("measured", 101376)]


@pytest.mark.parametrize("args, message", [
    (["12XB"], "must be a byte count like 110592, 108KiB or 99K (got '12XB')"),
    ([], "fit needs a size"),
    (["100", "--tile", "1x1x1"], "give the dynamic size once"),
    (["100", "--arch", "k80"], "unknown profile 'k80'"),
    (["100", "--static", "49153"], "static bytes must be in 0..49152"),
    (["--cubin", "x.cubin", "--kernel", "k", "--ptx", "y.ptx"], "give --cubin or --ptx, not both"),
    (["--cubin", "/nonexistent.cubin", "--kernel", "k"], "cannot read /nonexistent.cubin"),
    (["--tile", "1x1", "--stages", "2"], "--tile must look like"),
])
def test_fit_bad_input_is_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fit", *args, "--no-local"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err


KERNELS = r'''
extern "C" __global__ void tiled(float* out) {
    __shared__ float tile[1024];
    __shared__ double extra[3];
    tile[threadIdx.x] = threadIdx.x; extra[threadIdx.x % 3] = 1.0;
    __syncthreads();
    out[threadIdx.x] = tile[(threadIdx.x + 1) % 1024] + extra[0];
}
extern "C" __global__ void small(float* out) {
    __shared__ unsigned char s[100];
    s[threadIdx.x % 100] = threadIdx.x; __syncthreads(); out[0] = s[7];
}
'''


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        if 90 not in supported_archs():
            pytest.skip("NVRTC cannot target sm_90")
    except NvrtcUnavailable as exc:
        pytest.fail(f"NVRTC must be installed for the compile checks: {exc}")
    folder = tmp_path_factory.mktemp("compiled")
    files = {}
    for kind, cubin in (("cubin", True), ("ptx", False)):
        ok, log, _, out = compile_source(KERNELS, "sm_90", [], cubin=cubin)
        assert ok, log
        files[kind] = folder / f"kernels.{kind}"
        files[kind].write_bytes(out.rstrip(b"\0") if not cubin else out)
    return files


@pytest.mark.parametrize("kind", ["cubin", "ptx"])
def test_static_shared_memory_is_read_from_the_compiled_file(kind: str, compiled: dict[str, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    for kernel, static in (("tiled", 4096 + 24), ("small", 100)):
        code, data = fit_json([f"--{kind}", str(compiled[kind]), "--kernel", kernel, "--dynamic", "1000",
                               "--arch", "h200"], capsys)
        assert code == 0
        # PTX declares the exact sizes; a cubin section may be padded to 16 B.
        assert data["request"]["static_bytes"] in (static, -(-static // 16) * 16), data["source"]
        assert data["request"]["total_bytes"] == 1000 + -(-static // 16) * 16


def test_an_unknown_kernel_lists_the_kernels(compiled: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fit", "--cubin", str(compiled["cubin"]), "--kernel", "nope", "--no-local"]) == 2
    err = capsys.readouterr().err
    assert "no kernel 'nope'" in err and "kernels: small, tiled" in err
