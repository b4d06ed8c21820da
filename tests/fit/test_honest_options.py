"""Options that say one thing and count another: --epilogue is the epilogue's storage in the total and the
breakdown, --static is shown wherever it is counted, --threads with --tile is refused, --explain with
--tile suggests only stage counts that fit, CUTLASS's build names (sm_90a) are architectures, and a
byte count explained beside Triton's tiles is not called CUTLASS's."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass import sm90, sm120
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app.cli import main as cli


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["fit", *args, "--no-local"])
    out, err = capsys.readouterr()
    return code, out, err


def test_epilogue_bytes_are_in_the_total_and_the_breakdown(capsys: pytest.CaptureFixture[str]) -> None:
    default = sm90.build(GemmKernel(128, 128, 64, "fp16", "fp16", schedule="cooperative"))
    code, out, _ = fit(["--tile", "128x128x64", "--schedule", "cooperative", "--epilogue", "64K", "--arch", "sm_90",
                        "--json", "-"], capsys)
    result = json.loads(out)["results"][0]
    parts = dict(result["parts"])
    assert code == 0 and parts["epilogue storage (given)"] == 65536
    assert sum(parts.values()) == result["launch_bytes"]
    # Fewer stages than the default epilogue's, and the given storage, not the default's, in the total.
    assert result["stages"] < default.stages
    assert result["launch_bytes"] - 65536 < default.shared_storage_bytes - default.epilogue_bytes


def test_static_bytes_are_shown_where_they_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    built = sm120.build(GemmKernel(128, 128, 128, "nvfp4", "nvfp4"))
    code, out, _ = fit(["--tile", "128x128x128", "--dtype", "nvfp4", "--static", "1024", "--arch", "sm_120"], capsys)
    assert code == 0
    assert out.splitlines()[0].startswith(f"{built.stages} stages fit on sm_120: {built.shared_storage_bytes} B + "
                                          "1024 B static of 101376 B")


def test_threads_with_a_tile_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fit(["--tile", "128x128x64", "--threads", "256", "--arch", "sm_90"], capsys)
    assert code == 2 and err.startswith("error: --threads applies to a size, not to --tile")


def test_explain_with_a_tile_suggests_only_counts_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", "102400", "--launcher", "trtllm-moe", "--fusion", "finalize", "--tile",
                        "128x256x128", "--arch", "sm_120"], capsys)
    row = next(line for line in out.splitlines() if line.startswith("sm_120"))
    cells = [cell for cell in row.split("  ") if cell.strip()]
    assert code == 1 and [c.strip() for c in cells[-3:]] == ["does not fit", "over by 1024", "2 (auto 3 is over)"]


@pytest.mark.parametrize(("name", "key"), [("sm_90a", "sm_90"), ("sm_100a", "sm_100"), ("SM_120A", "sm_120"),
                                           ("sm_120f", "sm_120")])
def test_cutlass_build_targets_are_architectures(name: str, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["1000", "--arch", name], capsys)
    assert code == 0 and out.startswith(f"{key}: fits without opt-in")


def test_a_byte_count_beside_triton_tiles_is_not_cutlass(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", "300000", "--tile", "128x128x64", "--rule", "triton", "--arch", "sm_90"], capsys)
    assert code == 1 and "CUTLASS" not in out
    assert out.splitlines()[0] == "the kernel needs 300000 B of shared memory per block (Triton's tiles below)."


@pytest.mark.parametrize(("explain", "message"), [
    ("0", "error: --explain 0: a kernel that needs no shared memory never fails for lack of it"),
    ("out of resource: shared memory, Required: 2, Hardware limit: 1",
     "error: --explain's Hardware limit must be >= 49152 B: no GPU allows a block 1 B of shared memory"),
])
def test_explain_of_what_no_gpu_says_is_refused(explain: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fit(["--explain", explain, "--arch", "sm_90"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(message)
