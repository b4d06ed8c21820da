"""`fit --tile`: the CUTLASS model against real builds of CUTLASS (tests/data/cutlass_truth.json, made by
tools/cutlass_truth/truth.py with nvcc), byte for byte on every row, and the answers a kernel author reads."""

from __future__ import annotations

import itertools
import json
import re

import pytest

from bisect_smem.analysis.fit.cutlass import CUTLASS_VERSION, sm90, sm100, sm120
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app.cli import main as cli
from bisect_smem.core.hardware import gemm_family
from tests.paths import DATA, ROOT

TRUTH = json.loads((DATA / "cutlass_truth.json").read_text())
FAMILIES = {90: sm90.build, 100: sm100.build, 120: sm120.build}
ROWS = TRUTH["rows"]
DEVICE = {r["name"]: r for r in json.loads((DATA / "cutlass_truth_rules_4.7.0.json").read_text())["rows"]}
README = ROOT / "docs" / "fit.md"  # the worked examples live on the fit page


def model(row: dict):
    m, n, k = row["tile"]
    kernel = GemmKernel(m, n, k, row["a"], row["b"], row["c"], row["d"], row["schedule"], row["grouped"],
                        row["stages"] or None, cluster=tuple(row["cluster"]))
    return FAMILIES[row["arch"]](kernel)


def test_the_table_is_big_enough_and_names_its_version() -> None:
    assert TRUTH["cutlass_version"] == CUTLASS_VERSION
    assert len(ROWS) >= 40
    assert {(r["arch"], r["a"] in ("nvfp4", "mxfp4", "mxfp6", "mxfp8"), r["grouped"]) for r in ROWS} >= {
        (90, False, False), (90, False, True), (100, False, False), (100, True, False), (100, False, True),
        (100, True, True), (120, False, False), (120, True, False), (120, False, True), (120, True, True)}


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_the_model_equals_every_real_build(row: dict) -> None:
    built = model(row)
    if not row["builds"]:
        assert not built.builds and built.reason == row["refusal"]
        return
    got = {key: getattr(built, key) for key in ("stages", "mainloop_bytes", "epilogue_bytes", "shared_storage_bytes")}
    assert got == {key: row[key] for key in got}
    assert built.shared_storage_bytes == row["kernel_bytes"]
    # A host-only build of it passes; where the kernel's device code refuses it, the device build says so.
    assert (built.builds or built.device_only) == (row["stages"] >= 2)
    if built.device_only and row["name"] in DEVICE:
        assert (DEVICE[row["name"]]["builds"], DEVICE[row["name"]]["refusal"]) == (False, built.reason)
    assert sum(b for _, b in built.parts) == built.shared_storage_bytes


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["fit", *args, "--no-local"])
    return code, capsys.readouterr().out


SEED = ["--tile", "128x256x128", "--dtype", "nvfp4", "--grouped", "--arch", "12.0", "--arch", "9.0", "--arch", "10.0"]


def row(name: str) -> dict:
    return next(r for r in ROWS if r["name"] == name)


def test_the_seed_kernel_next_to_hopper_and_b200(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit([*SEED, "--json", "-"], capsys)
    got = {r["target"].split()[0]: r for r in json.loads(out)["results"]}
    for target, name in (("sm_120", "sm120_nvfp4_128x256x128_auto_cbf16_dbf16_grouped"),
                         ("sm_100", "sm100_nvfp4_128x256x128_1sm_cbf16_dbf16_grouped")):
        real = row(name)
        assert (got[target]["stages"], got[target]["launch_bytes"], got[target]["mainloop_bytes"],
                got[target]["epilogue_bytes"]) == (real["stages"], real["shared_storage_bytes"],
                                                   real["mainloop_bytes"], real["epilogue_bytes"])
    assert got["sm_120"]["verdict"] == "fits with opt-in" and got["sm_120"]["stages"] == 3
    assert got["sm_90"]["builds"] is False and got["sm_90"]["stages"] is None
    assert (got["sm_120"]["library"], got["sm_120"]["version"], code) == ("CUTLASS", CUTLASS_VERSION, 1)


def readme_block(command: list[str]) -> str:
    """The README's example block that shows ``bisect-smem fit COMMAND --no-local`` and its output."""
    text = README.read_text()
    head = "$ bisect-smem fit " + " ".join(command) + " --no-local\n"
    assert head in text, f"the README has no example of: {head}"
    return text.split(head, 1)[1].split("```", 1)[0]


def test_readme_worked_example_is_this_output(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = fit(SEED, capsys)
    assert readme_block(SEED) == out
    # The README's breakdown for sm_120 is the real build's, byte for byte.
    real = row("sm120_nvfp4_128x256x128_auto_cbf16_dbf16_grouped")
    lines = out.splitlines()
    assert lines[0] == (f"{real['stages']} stages fit on sm_120: {real['shared_storage_bytes']} of 101376 B; "
                        f"4 would need {model(real | {'stages': 4}).shared_storage_bytes} B")
    first_breakdown = lines[lines.index(next(line for line in lines if line.startswith("sm_120: "))):]
    parts = [re.match(r"^\s+(\d+) B  (.+)$", line) for line in first_breakdown[1:]]
    breakdown = {m.group(2): int(m.group(1)) for m in itertools.takewhile(bool, parts)}
    assert breakdown["A tiles"] == real["smem_a_elements"] // 2  # fp4: two elements a byte
    assert breakdown["B tiles"] == real["smem_b_elements"] // 2
    assert breakdown["scale factors SFA"] == real["smem_sfa_elements"]
    assert breakdown["scale factors SFB"] == real["smem_sfb_elements"]
    assert breakdown["mainloop barriers"] == real["mainloop_pipeline_bytes"]
    assert breakdown["epilogue barriers"] == real["epilogue_pipeline_bytes"]
    assert f"{real['shared_storage_bytes']} B = GemmKernel::SharedStorageSize" in out
    plain = row("sm120_nvfp4_128x256x128_auto_cbf16_dbf16")
    assert (f"takes {plain['shared_storage_bytes']} B in {plain['stages']} stages on\nsm_120: the grouped kernel's "
            f"tensor maps and deeper scheduler cost {real['shared_storage_bytes'] - plain['shared_storage_bytes']} B "
            "more") in README.read_text()


def test_five_stages_of_the_128_tile_are_the_error_internal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = fit(["--tile", "128x128x128", "--dtype", "nvfp4", "--stages", "5", "--arch", "12.0"], capsys)
    row = next(r for r in ROWS if r["name"] == "sm120_nvfp4_128x128x128_auto_cbf16_dbf16_stages5")
    auto = next(r for r in ROWS if r["name"] == "sm120_nvfp4_128x128x128_auto_cbf16_dbf16")
    assert auto["stages"] == 4
    assert code == 1 and out.splitlines()[0] == (
        f"5 stages do not fit on sm_120: {row['shared_storage_bytes']} B against 101376 B, over by "
        f"{row['shared_storage_bytes'] - 101376} B. 4 stages fit (StageCount<4>: {auto['shared_storage_bytes']} B).")
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


def test_a_tile_too_big_for_two_stages_does_not_build_and_says_the_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    real = row("sm90_bf16_256x256x128_cooperative_cbf16_dbf16")
    built = model(real)
    code, out = fit(["--tile", "256x256x128", "--dtype", "bf16", "--schedule", "cooperative", "--arch", "9.0"], capsys)
    assert code == 1 and not real["builds"]
    assert out.splitlines()[0] == (f"sm_90: does not build: {real['refusal']} ({built.stages} stage(s) of "
                                   f"{built.stage_bytes} B, {built.shared_storage_bytes} B)")


def test_dtype_a_and_b_reach_the_builder(capsys: pytest.CaptureFixture[str]) -> None:
    real = row("sm90_e4m3-e5m2_128x128x128_auto_cvoid_dbf16")
    code, out = fit(["--tile", "128x128x128", "--dtype-a", "e4m3", "--dtype-b", "e5m2", "--c-dtype", "void",
                     "--arch", "9.0", "--json", "-"], capsys)
    data = json.loads(out)
    assert code == 0 and data["results"][0]["stages"] == real["stages"]
    assert data["results"][0]["launch_bytes"] == real["shared_storage_bytes"]
    assert data["gemm"]["dtype_a"] == "e4m3" and "A e4m3, B e5m2" in data["source"]


def test_the_collective_family_per_architecture() -> None:
    assert [gemm_family(cc) for cc in ((8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1), None)] == \
        [None, None, "sm90", "sm100", "sm100", "sm100", "sm120", "sm120", None]
