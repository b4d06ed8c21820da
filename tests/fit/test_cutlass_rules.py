"""The build rules a host-only build does not show, each against a compile of it with its device code
(tests/data/cutlass_truth_rules_4.7.0.json, made by tools/cutlass_truth/truth.py --set rules): a
cooperative kernel's tile M, sm_100's capacity in the kernel's device code, CUTLASS's own words for mixed
16-bit operands, block-scaled K below one MMA and too few stages; the 2-SM schedule's hint; and the next
stage count, shown only where it would not fit."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION, sm90, sm100, sm120
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app.cli import main as cli
from tests.paths import DATA

TRUTH = json.loads((DATA / "cutlass_truth_rules_4.7.0.json").read_text())
ROWS = {r["name"]: r for r in TRUTH["rows"]}
# The same set's cases compiled against other releases, where a rule of that release is at stake.
OLDER = {p.name: json.loads(p.read_text()) for p in sorted(DATA.glob("cutlass_truth_rules_4.*.json"))
         if p.name != "cutlass_truth_rules_4.7.0.json"}
OLDER_ROWS = [(doc["cutlass_version"], row) for doc in OLDER.values() for row in doc["rows"]]
HOST = {r["name"]: r for r in json.loads((DATA / "cutlass_truth.json").read_text())["rows"]}
FAMILIES = {90: sm90.build, 100: sm100.build, 120: sm120.build}


def model(row: dict, version: str = CUTLASS_VERSION):
    m, n, k = row["tile"]
    return FAMILIES[row["arch"]](GemmKernel(m, n, k, row["a"], row["b"], row["c"], row["d"], row["schedule"],
                                            row["grouped"], row["stages"] or None, cutlass_version=version,
                                            cluster=tuple(row["cluster"])))


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["fit", *args, "--no-local"])
    return code, capsys.readouterr().out


def test_every_case_was_compiled_with_its_device_code() -> None:
    assert TRUTH["cutlass_version"] == CUTLASS_VERSION
    assert all(r["device"] for r in ROWS.values())
    assert {r["builds"] for r in ROWS.values()} == {True, False} and len(ROWS) >= 15


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_model_equals_every_device_build(name: str) -> None:
    row, built = ROWS[name], model(ROWS[name])
    if not row["builds"]:
        assert (built.builds, built.reason) == (False, row["refusal"])
        return
    assert built.builds
    assert (built.stages, built.mainloop_bytes, built.epilogue_bytes, built.shared_storage_bytes) == (
        row["stages"], row["mainloop_bytes"], row["epilogue_bytes"], row["shared_storage_bytes"])


@pytest.mark.parametrize(("version", "row"), OLDER_ROWS, ids=[f"{v}:{r['name']}" for v, r in OLDER_ROWS])
def test_the_model_equals_older_releases_device_builds(version: str, row: dict) -> None:
    built = model(row, version)
    if not row["builds"]:
        assert (built.builds, built.reason) == (False, row["refusal"])
        return
    assert built.builds and (built.stages, built.shared_storage_bytes) == (row["stages"], row["shared_storage_bytes"])


def test_before_4_5_sm120s_block_scaled_tiles_under_128_wide_do_not_compile() -> None:
    # 4.4.2 rounds SFB's N down to whole 128-row blocks: a 64-wide tile has none, and its TMA refuses it.
    refused = next(r for v, r in OLDER_ROWS if v == "4.4.2" and r["name"] == "sm120_nvfp4_128x64x128_auto_cbf16_dbf16")
    built = model(ROWS["sm120_nvfp4_128x64x128_auto_cbf16_dbf16"])
    assert not refused["builds"] and built.builds and ROWS["sm120_nvfp4_128x64x128_auto_cbf16_dbf16"]["builds"]


def test_cooperative_tile_m_64_is_refused_in_the_kernels_words(capsys: pytest.CaptureFixture[str]) -> None:
    refused = ROWS["sm90_bf16_64x128x64_cooperative_cbf16_dbf16"]
    code, out = fit(["--tile", "64x128x64", "--dtype", "bf16", "--schedule", "cooperative", "--arch", "9.0"], capsys)
    assert code == 1 and out.startswith(f"sm_90: does not build: {refused['refusal']} (")
    # Ping-pong takes the same tile: its two math warp groups each hold a whole tile.
    code, out = fit(["--tile", "64x128x64", "--dtype", "bf16", "--schedule", "pingpong", "--arch", "9.0"], capsys)
    assert code == 0 and " stages fit on sm_90: " in out.splitlines()[0]


def test_the_2sm_schedule_without_a_cluster_keeps_cutlass_words_and_hints(capsys: pytest.CaptureFixture[str]) -> None:
    refused = ROWS["sm100_bf16_128x128x64_2sm_cbf16_dbf16"]
    code, out = fit(["--tile", "128x128x64", "--dtype", "bf16", "--schedule", "2sm", "--arch", "10.0"], capsys)
    assert code == 1
    assert out.splitlines()[0] == (f"sm_100: no stage count: {refused['refusal']} (hint: the 2-SM kernel needs a "
                                   "cluster even along M: --cluster 2x1x1)")
    code, out = fit(["--tile", "128x128x64", "--dtype", "bf16", "--schedule", "2sm", "--cluster", "2x1x1",
                     "--arch", "10.0"], capsys)
    assert code == 0 and "hint" not in out


def test_the_next_stage_count_is_shown_only_where_it_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    # sm_90's auto rule gives bf16 128x32x32 20 stages; 21 would take all 232448 B of the opt-in limit, which fits.
    auto = sm90.build(GemmKernel(128, 32, 32, "bf16", "bf16", schedule="cooperative"))
    more = sm90.build(GemmKernel(128, 32, 32, "bf16", "bf16", schedule="cooperative", stages=auto.stages + 1))
    assert more.builds and more.shared_storage_bytes == 232448
    code, out = fit(["--tile", "128x32x32", "--dtype", "bf16", "--schedule", "cooperative", "--arch", "9.0"], capsys)
    assert code == 0
    assert out.splitlines()[0] == f"{auto.stages} stages fit on sm_90: {auto.shared_storage_bytes} of 232448 B"
    # One more stage of bf16 128x256x64 is over: the host build of 4 stages is the bytes it would need.
    four = HOST["sm100_bf16_128x256x64_1sm_cbf16_dbf16_stages4"]
    code, out = fit(["--tile", "128x256x64", "--dtype", "bf16", "--schedule", "1sm", "--arch", "10.0"], capsys)
    assert code == 0 and out.splitlines()[0].endswith(f"; 4 would need {four['shared_storage_bytes']} B")
