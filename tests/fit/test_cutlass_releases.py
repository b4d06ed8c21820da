"""--cutlass-version: the rules of each release where they differ, against real builds of that release
(tests/data/cutlass_truth_<version>_sm*.json, made by tools/cutlass_truth/truth.py with that release's
headers; sm_90's and sm_100's rules are the same in 4.4.1 as in 4.7.0 on every committed case). CUTLASS 4.4.1's sm_120 block-scaled builder reserved nothing for the kernel and rounded SFB's
N down; its dense sm_120 builder took no grouped kernel."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass import sm90, sm100, sm120
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


def test_the_releases_differ_where_the_builder_changed(capsys: pytest.CaptureFixture[str]) -> None:
    old, new = (sm120.build(GemmKernel(128, 64, 128, "nvfp4", "nvfp4", grouped=True, launcher="trtllm-moe",
                                       fusion="finalize", cutlass_version=v)) for v in ("4.4.1", "4.7.0"))
    assert old.stages > new.stages
    code = cli.main(["fit", "--tile", "128x64x128", "--launcher", "trtllm-moe", "--fusion", "finalize",
                     "--cutlass-version", "4.4.1", "--arch", "sm_120", "--no-local"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"{old.stages} stages fit on sm_120: {old.shared_storage_bytes} of 101376 B")
    assert "with CUTLASS 4.4.1's builders" in out


def test_dense_grouped_sm120_is_refused_before_4_7(capsys: pytest.CaptureFixture[str]) -> None:
    built = sm120.build(GemmKernel(128, 128, 128, "e4m3", "e4m3", grouped=True, schedule="cooperative",
                                   cutlass_version="4.5.0"))
    assert not built.builds and built.reason == "PtrArray kernel is not supported for this collective builder."
