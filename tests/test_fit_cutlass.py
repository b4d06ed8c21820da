"""`fit --tile`: the CUTLASS model against real builds of CUTLASS (tests/data/cutlass_truth.json, made by
tools/cutlass_truth/truth.py with nvcc), byte for byte on every row, and the answers a kernel author reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION, sm90, sm100, sm120
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app import cli

TRUTH = json.loads((Path(__file__).parent / "data" / "cutlass_truth.json").read_text())
FAMILIES = {90: sm90.build, 100: sm100.build, 120: sm120.build}
ROWS = TRUTH["rows"]
README = Path(__file__).resolve().parents[1] / "README.md"


def model(row: dict):
    m, n, k = row["tile"]
    kernel = GemmKernel(m, n, k, row["a"], row["b"], row["c"], row["d"], row["schedule"], row["grouped"],
                        row["stages"] or None)
    return FAMILIES[row["arch"]](kernel)


def test_the_table_is_big_enough_and_names_its_version() -> None:
    assert TRUTH["cutlass_version"] == CUTLASS_VERSION
    assert len(ROWS) >= 40
    assert {(r["arch"], r["a"] in ("nvfp4", "mxfp4", "mxfp6", "mxfp8"), r["grouped"]) for r in ROWS} >= {
        (90, False, False), (90, False, True), (100, False, False), (100, True, False), (120, False, False),
        (120, True, False)}


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_the_model_equals_every_real_build(row: dict) -> None:
    built = model(row)
    if not row["builds"]:
        assert not built.builds and built.reason == row["refusal"]
        return
    if built.reason and "not modelled" in built.reason:
        # A family the model does not cover yet gives no number at all, never a wrong one.
        assert built.shared_storage_bytes is None and built.stages is None
        return
    got = {key: getattr(built, key) for key in ("stages", "mainloop_bytes", "epilogue_bytes", "shared_storage_bytes")}
    assert got == {key: row[key] for key in got}
    assert built.shared_storage_bytes == row["kernel_bytes"]
    assert built.builds == (row["stages"] >= 2)
    assert sum(b for _, b in built.parts) == built.shared_storage_bytes


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["fit", *args, "--no-local"])
    return code, capsys.readouterr().out


def test_the_seed_kernel_next_to_hopper_and_b200(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x256x128", "--dtype", "nvfp4", "--arch", "12.0", "--arch", "9.0", "--arch", "10.0",
                     "--json", "-"], capsys)
    got = {r["target"].split()[0]: r for r in json.loads(out)["results"]}
    assert (got["sm_120"]["stages"], got["sm_120"]["shared_storage_bytes"], got["sm_120"]["verdict"]) == \
        (3, 97280, "fits with opt-in")
    assert (got["sm_100"]["stages"], got["sm_100"]["shared_storage_bytes"]) == (4, 210944)
    assert got["sm_90"]["builds"] is False and got["sm_90"]["stages"] is None
    assert got["sm_120"]["cutlass_version"] == CUTLASS_VERSION and code == 1


def test_readme_worked_example_is_this_output(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = fit(["--tile", "128x256x128", "--dtype", "nvfp4", "--arch", "12.0", "--arch", "9.0", "--arch", "10.0"],
                 capsys)
    assert out.splitlines()[0] == "3 stages fit on sm_120: 97280 of 101376 B; 4 would need 124928 B"
    assert out in README.read_text()


def test_five_stages_of_the_128_tile_are_the_error_internal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x128x128", "--dtype", "nvfp4", "--stages", "5", "--arch", "12.0"], capsys)
    row = next(r for r in ROWS if r["name"] == "sm120_nvfp4_128x128x128_auto_cbf16_dbf16_stages5")
    assert code == 1 and out.splitlines()[0] == (
        f"5 stages do not fit on sm_120: {row['shared_storage_bytes']} B against 101376 B, over by "
        f"{row['shared_storage_bytes'] - 101376} B")
    code, out = fit(["--tile", "128x128x128", "--dtype", "nvfp4", "--arch", "12.0"], capsys)
    assert code == 0 and out.startswith("4 stages fit on sm_120: 88064 of 101376 B")


def test_sm100_bf16_one_sm(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x256x64", "--dtype", "bf16", "--schedule", "1sm", "--arch", "10.0"], capsys)
    assert code == 0 and out.startswith("3 stages fit on sm_100: 215040 of 232448 B")


@pytest.mark.parametrize("dtype, arch, why", [("nvfp4", "9.0", "no block-scaled MMA"), ("fp4", "9.0", "no e2m1 MMA"),
                                              ("bf16", "12.0", "only supports F8F6F4"),
                                              ("e4m3", "8.0", "no CUTLASS 3.x/4.x collective")])
def test_types_an_arch_has_no_mma_for_get_no_stage_count(dtype: str, arch: str, why: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x128x128", "--dtype", dtype, "--arch", arch], capsys)
    assert code == 1 and "no stage count" in out.splitlines()[0] and why in out.splitlines()[0]
