"""--cluster picks the 2-SM kernel on sm_100 as KernelScheduleAuto does, and the builders' own refusals
come in their own words, each against a committed compile of it (tests/data/cutlass_truth.json)."""

from __future__ import annotations

import json

import pytest

from bisect_smem.app.cli import main as cli
from tests.paths import DATA

TRUTH = json.loads((DATA / "cutlass_truth.json").read_text())
ROWS = {r["name"]: r for r in TRUTH["rows"]}


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["fit", *args, "--no-local"])
    return code, capsys.readouterr().out


def test_auto_with_a_2x1x1_cluster_is_the_2sm_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    real = ROWS["sm100_bf16_256x128x64_auto_cbf16_dbf16_cluster2x1x1"]
    code, out = fit(["--tile", "256x128x64", "--dtype", "bf16", "--cluster", "2x1x1", "--arch", "sm_100"], capsys)
    assert code == 0 and out.startswith(f"{real['stages']} stages fit on sm_100: {real['shared_storage_bytes']} of ")
    code, out = fit(["--tile", "256x128x64", "--dtype", "bf16", "--arch", "sm_100"], capsys)
    refused = ROWS["sm100_bf16_256x128x64_auto_cbf16_dbf16"]
    assert code == 1 and out.splitlines()[0] == f"sm_100: no stage count: {refused['refusal']}"


@pytest.mark.parametrize(("args", "name"), [
    (["--tile", "128x128x64", "--dtype", "bf16", "--grouped", "--arch", "sm_90"],
     "sm90_bf16_128x128x64_auto_cbf16_dbf16_grouped"),
    (["--tile", "128x192x128", "--dtype", "nvfp4", "--arch", "sm_120"], "sm120_nvfp4_128x192x128_auto_cbf16_dbf16"),
    (["--tile", "1x1x1", "--arch", "sm_90"], "sm90_fp16_1x1x1_auto_cbf16_dbf16"),
    (["--tile", "128x128x8", "--schedule", "cooperative", "--arch", "sm_90"],
     "sm90_fp16_128x128x8_cooperative_cbf16_dbf16"),
    (["--tile", "256x128x64", "--dtype", "bf16", "--schedule", "2sm", "--arch", "sm_100"],
     "sm100_bf16_256x128x64_2sm_cbf16_dbf16"),
    (["--tile", "128x256x256", "--dtype", "nvfp4", "--cluster", "2x1x1", "--arch", "sm_100"],
     "sm100_nvfp4_128x256x256_2sm_cbf16_dbf16_cluster2x1x1"),
    (["--tile", "128x128x128", "--dtype", "mxfp8", "--schedule", "2sm", "--cluster", "2x1x1", "--arch", "sm_100"],
     "sm100_mxfp8_128x128x128_2sm_cbf16_dbf16_cluster2x1x1"),
])
def test_refusals_in_the_builders_words(args: list[str], name: str, capsys: pytest.CaptureFixture[str]) -> None:
    real = ROWS[name]
    code, out = fit(args, capsys)
    assert not real["builds"] and code == 1
    # CUTLASS's words end the line, or stand before the tool's hint (the 2-SM schedule's cluster).
    first = out.splitlines()[0]
    assert first.endswith(f": {real['refusal']}") or f": {real['refusal']} (hint: " in first


def test_the_2sm_kernel_with_tile_m_128_is_the_compiled_one(capsys: pytest.CaptureFixture[str]) -> None:
    real = ROWS["sm100_bf16_128x256x64_auto_cbf16_dbf16_cluster2x1x1"]
    code, out = fit(["--tile", "128x256x64", "--dtype", "bf16", "--cluster", "2x1x1", "--arch", "sm_100"], capsys)
    assert code == 0 and out.startswith(f"{real['stages']} stages fit on sm_100: {real['shared_storage_bytes']} of ")
    # Its epilogue runs 2x2 warps: a 64x64 tile of two 32-column runs, swizzled 64 B (512-B aligned), not 128 B.
    _, out = fit(["--tile", "128x256x64", "--dtype", "bf16", "--cluster", "2x1x1", "--arch", "sm_100", "--verbose"],
                 capsys)
    assert f"{real['epilogue_tensor_bytes']} B  epilogue C/D buffers (64x64 tile, 4 C / 2 D stages)" in out


@pytest.mark.parametrize("cluster", ["2x1", "0x1x1", "4x4x2", "x1x1"])
def test_bad_clusters_are_one_line(cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x64", "--cluster", cluster, "--arch", "sm_90", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--cluster" in err
