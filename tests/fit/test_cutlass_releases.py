"""--cutlass-version: a release is placed by the rules it has. Every release from 4.4.1 on is compiled on one
small case set (tests/data/cutlass_truth_release_<version>.json, made by tools/cutlass_truth/truth.py --set
releases with that release's headers): the model counts each with the rules of the newest release at or
before it where a rule first appears, and each rule changes a build exactly there. CUTLASS 4.4.1 is also
compiled on the full case set (tests/data/cutlass_truth_4.4.1_sm*.json): sm_90's and sm_100's rules are the
same in 4.4.1 as in 4.7.0 on every committed case; 4.4.1's sm_120 block-scaled builder reserved nothing for
the kernel and rounded SFB's N down."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass import (
    CUTLASS_VERSIONS,
    RULES,
    SM100_2SM_EPILOGUE_N,
    SM120_DENSE_PTR_ARRAY,
    SM120_MX_PTR_ARRAY,
    SM120_N_FROM_8,
    SM120_RESERVES,
    SM120_SFB_128,
    rules_release,
    sm90,
    sm100,
    sm120,
)
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app.cli import main as cli
from tests.paths import DATA

TABLES = {path.name: json.loads(path.read_text()) for path in sorted(DATA.glob("cutlass_truth_4.*_sm*.json"))}
FAMILIES = {90: sm90.build, 100: sm100.build, 120: sm120.build}
ROWS = [(name, row) for name, doc in TABLES.items() for row in doc["rows"]]


def kernel(row: dict, version: str) -> GemmKernel:
    m, n, k = row["tile"]
    return GemmKernel(m, n, k, row["a"], row["b"], row["c"], row["d"], row["schedule"], row["grouped"],
                      row["stages"] or None, cutlass_version=version, cluster=tuple(row["cluster"]))


def test_an_older_release_is_committed() -> None:
    assert {doc["cutlass_version"] for doc in TABLES.values()} == {"4.4.1"}
    assert {row["arch"] for _, row in ROWS} == {90, 100, 120} and len(ROWS) >= 80


@pytest.mark.parametrize(("table", "row"), ROWS, ids=[f"{t}:{r['name']}" for t, r in ROWS])
def test_the_releases_rules_equal_its_builds(table: str, row: dict) -> None:
    built = FAMILIES[row["arch"]](kernel(row, TABLES[table]["cutlass_version"]))
    if not row["builds"]:
        assert not built.builds and built.reason == row["refusal"]
        return
    assert (built.stages, built.mainloop_bytes, built.epilogue_bytes, built.shared_storage_bytes) == (
        row["stages"], row["mainloop_bytes"], row["epilogue_bytes"], row["shared_storage_bytes"])
    # A host-only build: where the model refuses it, it is the kernel's device code that does.
    assert built.builds or built.device_only


def test_before_4_5_the_launchers_narrow_sm120_tiles_do_not_compile(capsys: pytest.CaptureFixture[str]) -> None:
    # TensorRT-LLM's pin rounds SFB's N down: a 64-wide tile has no SFB block and its TMA refuses it
    # (tests/data/cutlass_truth_rules_4.4.2.json); from 4.5.0 the same tile builds.
    common = ["fit", "--tile", "128x64x128", "--launcher", "trtllm-moe", "--fusion", "finalize", "--arch", "sm_120",
              "--no-local", "--cutlass-version"]
    code = cli.main([*common, "4.4.2"])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("sm_120: does not build: TMA requires CTA_Tile and SLayout top-level size "
                                        "equivalence. (")
    assert "with CUTLASS 4.4.2's builders" in out
    new = sm120.build(GemmKernel(128, 64, 128, "nvfp4", "nvfp4", grouped=True, launcher="trtllm-moe",
                                 fusion="finalize", cutlass_version="4.5.0"))
    code = cli.main([*common, "4.5.0"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"{new.stages} stages fit on sm_120: {new.shared_storage_bytes} of 101376 B")


def test_dense_grouped_sm120_is_refused_before_4_6() -> None:
    built = sm120.build(GemmKernel(128, 128, 128, "e4m3", "e4m3", grouped=True, schedule="cooperative",
                                   cutlass_version="4.5.3"))
    assert not built.builds and built.reason == "PtrArray kernel is not supported for this collective builder."


RELEASES = {doc["cutlass_version"]: doc for doc in (json.loads(p.read_text())
                                                    for p in sorted(DATA.glob("cutlass_truth_release_*.json")))}
RELEASE_ROWS = [(version, row) for version, doc in RELEASES.items() for row in doc["rows"]]
# The case of the release set that shows each rule.
SHOWN_BY = {SM120_RESERVES: "sm120_mxfp4_128x128x128_auto_cbf16_dbf16_grouped",
            SM120_MX_PTR_ARRAY: "sm120_mxfp8_128x128x128_cooperative_cbf16_dbf16_grouped",
            SM120_SFB_128: "sm120_nvfp4_128x64x128_auto_cbf16_dbf16",
            SM100_2SM_EPILOGUE_N: "sm100_bf16_128x160x64_2sm_cbf16_dbf16_cluster2x1x1",
            SM120_DENSE_PTR_ARRAY: "sm120_e4m3_128x128x128_cooperative_cbf16_dbf16_grouped",
            SM120_N_FROM_8: "sm120_nvfp4_128x16x128_auto_cbf16_dbf16"}


def outcome(row: dict) -> tuple:
    """What a build of a case came to: refused and why, or its stages and bytes."""
    return (row["builds"], row.get("refusal"), row.get("stages"), row.get("shared_storage_bytes"))


def outcomes(version: str) -> dict[str, tuple]:
    return {row["name"]: outcome(row) for row in RELEASES[version]["rows"]}


def test_every_placed_release_is_compiled_on_one_case_set() -> None:
    assert tuple(RELEASES) == CUTLASS_VERSIONS
    assert len({tuple(sorted(outcomes(v))) for v in RELEASES}) == 1
    assert set(SHOWN_BY) == set(RULES) and all(name in outcomes("4.7.0") for name in SHOWN_BY.values())


@pytest.mark.parametrize(("version", "row"), RELEASE_ROWS, ids=[f"{v}:{r['name']}" for v, r in RELEASE_ROWS])
def test_each_release_is_counted_by_the_rules_it_has(version: str, row: dict) -> None:
    built = FAMILIES[row["arch"]](kernel(row, version))
    if not row["builds"]:
        assert (built.builds, built.reason) == (False, row["refusal"])
        return
    assert built.builds or built.device_only
    assert (built.stages, built.mainloop_bytes, built.epilogue_bytes, built.shared_storage_bytes) == (
        row["stages"], row["mainloop_bytes"], row["epilogue_bytes"], row["shared_storage_bytes"])


def test_releases_counted_by_one_rule_set_build_alike() -> None:
    for version in RELEASES:
        assert outcomes(version) == outcomes(rules_release(version)), version
    # 4.6.x builds equal 4.7.0's.
    assert outcomes("4.6.0") == outcomes("4.6.2") == outcomes("4.7.0")


@pytest.mark.parametrize("rule", RULES, ids=[r.first + ":" + r.what[:40] for r in RULES])
def test_each_rule_changes_a_build_where_it_first_appears(rule) -> None:
    before = CUTLASS_VERSIONS[CUTLASS_VERSIONS.index(rule.first) - 1]
    name = SHOWN_BY[rule]
    assert outcomes(before)[name] != outcomes(rule.first)[name]


def test_tensorrt_llms_pin_is_none_of_its_neighbours() -> None:
    # 4.4.2 reserves the kernel's storage as 4.5.0 does, but rounds SFB's N down as 4.4.1 did.
    reserve, rounding = SHOWN_BY[SM120_RESERVES], SHOWN_BY[SM120_SFB_128]
    assert outcomes("4.4.2")[reserve] == outcomes("4.5.0")[reserve] != outcomes("4.4.1")[reserve]
    assert outcomes("4.4.2")[rounding] == outcomes("4.4.1")[rounding] != outcomes("4.5.0")[rounding]


def test_a_release_counted_by_an_earlier_ones_rules_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x128", "--dtype", "e4m3", "--grouped", "--schedule", "cooperative",
                     "--cutlass-version", "4.6.2", "--arch", "sm_120", "--no-local"])
    out = capsys.readouterr().out
    real = RELEASES["4.6.2"]["rows"]
    row = next(r for r in real if r["name"] == "sm120_e4m3_128x128x128_cooperative_cbf16_dbf16_grouped")
    assert code == 0 and out.startswith(f"{row['stages']} stages fit on sm_120: {row['shared_storage_bytes']} of ")
    assert "CUTLASS 4.6.2's builders (4.6.0's rules)" in out
    code = cli.main(["fit", "--tile", "128x128x128", "--dtype", "e4m3", "--grouped", "--schedule", "cooperative",
                     "--cutlass-version", "4.6.2", "--arch", "sm_120", "--no-local", "--json", "-"])
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert code == 0 and (result["version"], result["stage_rule"]) == ("4.6.2", "cutlass 4.6.0 sm120")


def test_a_release_the_model_cannot_place_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x128", "--dtype", "nvfp4", "--cutlass-version", "4.8.0",
                     "--arch", "sm_120", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == ("error: unknown --cutlass-version '4.8.0': the model places "
                                         f"{', '.join(CUTLASS_VERSIONS)}")
