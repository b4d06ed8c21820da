"""`fit --explain`: a library's shared-memory error read back (Triton's OutOfResources message, or a
CUTLASS kernel's byte count), per target, with the stage counts of --tile that fit; several tiles in
one answer; and the stage options' bad input."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.analysis.fit.cutlass.sm90 import build as sm90_build
from bisect_smem.analysis.fit.triton.rule import TritonKernel, shared_of
from bisect_smem.app.cli import main as cli

TRITON = ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, "
          "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.")


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["fit", *args, "--no-local"])
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_tritons_message_with_a_tile(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", TRITON, "--tile", "128x128x64", "--dtype", "fp16", "--arch", "9.0",
                        "--arch", "12.0"], capsys)
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == ("Triton: the kernel needs 131072 B of shared memory; the GPU it ran on allows 101376 B: "
                        "over by 29696 B.")
    assert lines[1] == "101376 B is the published opt-in limit of sm_86, sm_89, sm_120, sm_121."
    # With Triton's message the tile is Triton's: its num_stages that load on each target.
    kernel = TritonKernel(128, 128, 64, "fp16")
    most = {cc: max(s for s in range(1, 17) if shared_of(kernel, s, cc).shared <= limit)
            for cc, limit in (((9, 0), 232448), ((12, 0), 101376))}
    sm90 = next(line for line in lines if line.startswith("sm_90"))
    sm120 = next(line for line in lines if line.startswith("sm_120"))
    assert "101376 to spare" in sm90 and sm90.split()[-1] == str(most[(9, 0)])
    assert "over by 29696" in sm120 and sm120.split()[-1] == str(most[(12, 0)])


def test_explain_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", TRITON, "--arch", "12.0", "--json", "-"], capsys)
    data = json.loads(out)
    assert code == 1
    assert data["explain"] == {"kind": "triton", "required_bytes": 131072, "hardware_limit_bytes": 101376,
                               "limit_matches": ["sm_86", "sm_89", "sm_120", "sm_121"]}
    assert data["results"][0]["over_bytes"] == 29696 and data["alternatives"] == []


def test_explain_a_cutlass_byte_count(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", "196608", "--arch", "12.0", "--arch", "9.0", "--tile", "128x256x128",
                        "--dtype", "e4m3"], capsys)
    lines = out.splitlines()
    built = sm90_build(GemmKernel(128, 256, 128, "e4m3", "e4m3"))
    assert code == 1 and "CUTLASS" in lines[0]
    assert lines[3].startswith("sm_120") and "over by 95232" in lines[3]
    assert lines[4].startswith("sm_90") and "35840 to spare" in lines[4] and lines[4].split()[-1] == str(built.stages)


def test_many_tiles_with_fixed_stages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x256x128", "--tile", "64x64x64", "--stages", "2", "--dtype", "e4m3",
                        "--arch", "9.0", "--arch", "12.0"], capsys)
    rows = out.splitlines()
    assert code == 1
    assert rows[0].startswith("128x256x128: 2 stages fit on sm_90: ")
    assert rows[1].startswith("128x256x128: 2 stages do not fit on sm_120: ") and "over by" in rows[1]
    assert rows[2].startswith("64x64x64: 2 stages fit on sm_90: ")
    # sm_120's auto schedule is the cooperative kernel, whose device code asserts tile M >= 128.
    assert rows[3].startswith("64x64x64: sm_120: does not build: Cooperative kernel requires Tile Size")


@pytest.mark.parametrize("args, message", [
    (["--explain", "Error Internal"], "--explain takes Triton's message"),
    (["--explain", "1000", "--tile", "8x8x8", "--stages", "2"], "drop --stages"),
    (["--explain", "1000", "100"], "give the dynamic size once"),
    (["--tile", "8x8x8", "--stages", "0"], "must be >= 1 (got 0)"),
    (["--tile", "8x8x8", "--stages", "most"], "expected a whole number or 'auto'"),
    (["--tile", "8x8x8", "--dtype-b", "fp5"], "unknown --dtype-b 'fp5'"),
    (["--tile", "8x8x8", "--epilogue", "12XB"], "--epilogue must be a byte count"),
    (["--tile", "8x8x8", "--warps", "8"], "--warps is Triton's: add --rule triton"),
    (["100", "--rule", "triton"], "--rule applies only to --tile MxNxK"),
])
def test_bad_stage_options_are_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fit(args, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
