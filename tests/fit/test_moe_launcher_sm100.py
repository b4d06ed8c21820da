"""The MoE launcher's own sm_100 branch (moe_gemm_tma_ws_launcher.inl, IsSM10x), rule by rule, against
compiled builds of it (tests/data/cutlass_truth_moe_sm100_4.7.0.json, made by tools/cutlass_truth/moe.py
--arch 100 from CUTLASS 4.7.0 and FlashInfer's cutlass_extensions): the 2-SM kernel at cluster 2x1 with the
MMA tile's M twice the generator's, the TMA epilogue or the one with no shared memory, the 128x64 epilogue
tile for NVFP4 at N 256, FINALIZE's scatter fusion, swap_ab's column-major C and D; and the kernels the
generator emits (tests/data/flashinfer_candidates_sm100.json, from FlashInfer's own generator), all at once."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass import epilogue as epi
from bisect_smem.analysis.fit.cutlass import launchers, sm100
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app.cli import main as cli
from tests.conftest import assert_valid
from tests.fit.test_launcher_candidates import listing, table
from tests.paths import DATA

TRUTH = json.loads((DATA / "cutlass_truth_moe_sm100_4.7.0.json").read_text())
ROWS = TRUTH["rows"]
# Some of the same kernels compiled with their device code (--device): each kernel's device-side asserts too.
DEVICE = json.loads((DATA / "cutlass_truth_moe_sm100_device_4.7.0.json").read_text())["rows"]
# The same cases built by FlashInfer's pin, CUTLASS 4.5.0 (test_moe_launcher.py holds the model to every row).
PINNED = {r["name"]: r for r in json.loads((DATA / "cutlass_truth_moe_sm100_4.5.0.json").read_text())["rows"]}
GENERATED = json.loads((DATA / "flashinfer_candidates_sm100.json").read_text())["rows"]
OPTIN = 232448  # B200's opt-in limit
BUILT = [r for r in ROWS if r["builds"]]


def kernel(row: dict, **changed: object) -> GemmKernel:
    """The launcher's kernel of a committed row, as fit is asked for it (the generator's CTA tile)."""
    m, n, k = row["tile"]
    g = GemmKernel(m, n, k, row["a"], row["b"], row["d"], row["d"], "auto", True, None, None, "trtllm-moe",
                   row["fusion"], row["swap_ab"], TRUTH["cutlass_version"], tuple(row["cluster"]), row["epilogue"])
    return GemmKernel(**{**g.__dict__, **changed})


def candidate(row: dict) -> launchers.Candidate:
    return launchers.Candidate(row["a"], row["b"], row["d"], tuple(row["tile"]), tuple(row["cluster"]), row["fusion"],
                               row["swap_ab"], row["epilogue"])


def find(name: str) -> dict:
    return next(r for r in ROWS if r["name"] == name)


def test_the_table_holds_each_family_schedule_epilogue_and_fusion() -> None:
    assert TRUTH["cutlass_version"] == "4.7.0" and {r["arch"] for r in ROWS} == {100}
    assert {r["a"] for r in BUILT} == {"bf16", "fp16", "fp32", "e4m3", "mxfp8", "nvfp4"}
    assert {1, 2} <= {r["cluster"][0] for r in BUILT} and {r["epilogue"] for r in BUILT} == {"tma", "nosmem"}
    assert {(r["fusion"], r["swap_ab"]) for r in BUILT} == {("none", False), ("none", True), ("finalize", False),
                                                            ("finalize", True)}
    assert any(r["dynamic_cluster"] for r in BUILT) and any(not r["builds"] for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_the_model_equals_every_build(row: dict) -> None:
    built = sm100.build(kernel(row))
    if not row["builds"]:
        assert not built.builds and built.reason == row["refusal"], built.reason
        return
    assert built.builds, built.reason
    assert (built.stages, built.mainloop_bytes, built.epilogue_bytes, built.shared_storage_bytes) == (
        row["stages"], row["mainloop_bytes"], row["epilogue_bytes"], row["shared_storage_bytes"])


def test_device_code_refuses_none_of_them() -> None:
    # A 2-SM kernel, the epilogue without shared memory (NVFP4's too, which the generator leaves out), FINALIZE
    # with swap_ab and NVFP4's 128x64 epilogue tile: their device code compiles, to the host build's bytes.
    assert len(DEVICE) == 5 and all(r["device"] and r["builds"] for r in DEVICE)
    for row in DEVICE:
        host = find(row["name"])
        assert (row["stages"], row["shared_storage_bytes"]) == (host["stages"], host["shared_storage_bytes"])
        assert sm100.build(kernel(row)).shared_storage_bytes == row["shared_storage_bytes"]


def test_flashinfers_pin_builds_them_alike_but_the_2sm_epilogues_n_rule() -> None:
    assert len(PINNED) == 43 and PINNED.keys() <= {r["name"] for r in ROWS}
    differ = [r["name"] for r in ROWS if r["name"] in PINNED and r != PINNED[r["name"]]]
    # 4.5.2 added the 2-SM TMA epilogue's assert on a 16-bit tile N over 128 that is no multiple of 64.
    assert differ == ["sm100_moe_bf16_dbf16_128x160x64_cluster2x1x1_none"]
    old = PINNED[differ[0]]
    assert old["builds"] and sm100.build(kernel(old, cutlass_version="4.5.0")).shared_storage_bytes == \
        old["shared_storage_bytes"]
    assert sm100.build(kernel(old)).reason == find(differ[0])["refusal"]


def test_the_generators_kernels_are_flashinfers() -> None:
    assert set(launchers.CANDIDATES["sm100"]) == {candidate(r) for r in GENERATED}
    assert len(launchers.CANDIDATES["sm100"]) == len(GENERATED) == 720


def test_built_rows_are_generated_and_the_refused_are_not() -> None:
    emitted = set(launchers.CANDIDATES["sm100"])
    for row in ROWS:
        generated = candidate(row) in emitted
        # A kernel the generator emits builds; the table's other kernels are there for CUTLASS's refusals.
        assert generated <= row["builds"], row["name"]
        assert launchers.not_generated("sm100", kernel(row)) is None or not generated


@pytest.mark.parametrize("row", [r for r in BUILT if r["cluster"][0] == 2], ids=lambda r: r["name"])
def test_a_2sm_cluster_doubles_the_tiles_m(row: dict) -> None:
    # The MMA tile is twice the generator's M, split over two CTAs: each holds the generator's M rows of A and
    # half the tile's N columns of B, per stage.
    m, n, k = row["tile"]
    assert (row["smem_a_elements"], row["smem_b_elements"]) == (row["stages"] * m * k, row["stages"] * n // 2 * k)
    one_sm = sm100.build(kernel(row, cluster=(1, 1, 1)))
    assert one_sm.shared_storage_bytes != row["shared_storage_bytes"] or one_sm.stages != row["stages"]


@pytest.mark.parametrize("row", [r for r in BUILT if r["epilogue"] == "nosmem"], ids=lambda r: r["name"])
def test_the_epilogue_without_shared_memory_leaves_the_stages_more_room(row: dict) -> None:
    # Its SharedStorage is an empty struct, or for block-scaled kernels the fusion callbacks' empty storage beside
    # a zero-length reduction buffer.
    with_tma = sm100.build(kernel(row, epilogue_schedule="tma"))
    assert row["epilogue_bytes"] == (32 if row["a"] in ("nvfp4", "mxfp8") else 1)
    assert with_tma.epilogue_bytes > 32 and with_tma.stages <= row["stages"]


def test_nvfp4_at_n_256_takes_the_128x64_epilogue_tile() -> None:
    for row in (r for r in BUILT if r["a"] == "nvfp4" and r["tile"][1] == 256):
        two_sm = row["cluster"][0] == 2
        warps = epi.sm100_tmem_warps(two_sm, row["tile"][0] * (2 if two_sm else 1))
        fusion = launchers.fusion_storage(row["fusion"], row["swap_ab"], 256, 16)
        given = epi.sm100(128, 256, 0, 16, warps, True, True, row["swap_ab"], (128, 64), fusion)
        auto = epi.sm100(128, 256, 0, 16, warps, True, True, row["swap_ab"], None, fusion)
        assert given.shared.size == row["epilogue_bytes"] != auto.shared.size, row["name"]
    # MXFP8 activations at N 256 keep EpilogueTileAuto's 128x128 (the launcher's IsFP4 is the activations' type).
    mx = find("sm100_moe_mxfp8_dfp16_128x256x128_cluster1x1x1_finalize_swap_ab")
    assert mx["epilogue_bytes"] == 67584 == sm100.build(kernel(mx)).epilogue_bytes


@pytest.mark.parametrize("row", [r for r in BUILT if r["epilogue"] == "tma"], ids=lambda r: r["name"])
def test_finalize_keeps_one_row_broadcast_of_the_tiles_n(row: dict) -> None:
    # sm_100's scatter fusion: the bias per column in the output type, or with swap_ab the router scales in fp32.
    bytes_per = 4 if row["swap_ab"] else {"fp16": 2, "bf16": 2, "fp32": 4}[row["d"]]
    want = row["tile"][1] * bytes_per if row["fusion"] == "finalize" else 1
    assert row["epilogue_fusion_bytes"] == want
    assert launchers.fusion_storage(row["fusion"], row["swap_ab"], row["tile"][1], 8 * bytes_per).size == want


def test_swap_ab_stores_c_and_d_column_major() -> None:
    row, swapped = (find(f"sm100_moe_bf16_dbf16_128x128x64_cluster1x1x1_none{s}") for s in ("", "_swap_ab"))
    assert (row["epilogue_bytes"], swapped["epilogue_bytes"]) == (17408, 18432)
    warps = epi.sm100_tmem_warps(False, 128)
    assert [epi.sm100(128, 128, 0, 16, warps, False, True, column_major).shared.size
            for column_major in (False, True)] == [17408, 18432]


def test_swap_ab_stores_fp32_in_umma_s_32_bit_m_major_atom() -> None:
    # sm100_smem_selector gives M-major 32-bit C and D the SW128_32B atom (Swizzle<2,5,2>, 512 B aligned), where
    # K-major rows of the same 512 B take Swizzle<3,4,3> (1024 B).
    row = find("sm100_moe_fp32_dfp32_64x192x32_cluster2x1x1_finalize_swap_ab")
    warps = epi.sm100_tmem_warps(True, 128)
    fusion = launchers.fusion_storage("finalize", True, 192, 32)
    assert epi.sm100(64, 192, 0, 32, warps, False, True, True, None, fusion).shared.size == row["epilogue_bytes"] == 34304
    assert epi.sm100_column_major_alignment(512, 32) == 512 and epi.sm100_column_major_alignment(512, 16) == 1024


def test_a_dynamic_cluster_builds_as_the_static_one() -> None:
    names = {r["name"] for r in ROWS}
    twins = [(r, find(r["name"].removesuffix("_dynamic"))) for r in ROWS
             if r["dynamic_cluster"] and r["name"].removesuffix("_dynamic") in names]
    assert twins
    for row, static in twins:
        assert (row["stages"], row["shared_storage_bytes"]) == (static["stages"], static["shared_storage_bytes"])


def test_fit_answers_a_2sm_kernel_without_shared_memory_in_the_epilogue(capsys: pytest.CaptureFixture[str]) -> None:
    row = find("sm100_moe_bf16_dbf16_128x128x64_cluster2x1x1_none_nosmem")
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--dtype", "bf16", "--tile", "128x128x64", "--cluster", "2x1x1",
                     "--epilogue-schedule", "nosmem", "--arch", "10.0", "--no-local"])
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 0 and first.startswith(f"{row['stages']} stages fit on sm_100: {row['shared_storage_bytes']} of "
                                          f"{OPTIN} B"), first


def test_every_generated_kernel_has_a_build() -> None:
    assert set(launchers.CANDIDATES["sm100"]) <= {candidate(r) for r in BUILT if not r["dynamic_cluster"]}


@pytest.mark.parametrize(("act", "weight"), launchers.OPERANDS["sm100"])
def test_every_sm100_kernel_is_listed_with_its_build(act: str, weight: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = listing(capsys, "--arch", "10.0", "--dtype-a", act, "--dtype-b", weight)
    emitted = [c for c in launchers.CANDIDATES["sm100"] if (c.act, c.weight) == (act, weight)]
    assert code == 0 and lines[0].startswith(f"sm_100: {len(emitted)} kernels ("), lines[0]
    rows = table(lines)
    for build in (r for r in BUILT if not r["dynamic_cluster"] and candidate(r) in emitted):
        want = {"tile": "x".join(map(str, build["tile"])), "fusion": build["fusion"],
                "swap_ab": "on" if build["swap_ab"] else "off", "cluster": "x".join(map(str, build["cluster"])),
                "epilogue": build["epilogue"]}
        found = [r for r in rows if all(want[k] in r.get(k, want[k]).split("/") for k in want)
                 and r.get("out", build["d"]) in (build["d"], "fp16/bf16", "bf16/fp16")]
        assert len(found) == 1, (want, found)
        assert (found[0]["stages"], found[0]["bytes"]) == (str(build["stages"]), str(build["shared_storage_bytes"]))
        assert found[0]["margin"] == f"{OPTIN - build['shared_storage_bytes']} to spare"


def test_the_json_list_is_every_generated_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--arch", "10.0", "--dtype-a", "mxfp8", "--dtype-b", "mxfp4",
                     "--fusion", "finalize", "--no-local", "--json", "-"])
    data = json.loads(capsys.readouterr().out)
    assert_valid(data, "fit")
    emitted = [c for c in launchers.CANDIDATES["sm100"] if (c.act, c.weight, c.fusion) == ("mxfp8", "mxfp4", "finalize")]
    assert code == 0 and len(data["results"]) == len(emitted) == 24
    row = find("sm100_moe_mxfp8-mxfp4_dbf16_128x128x128_cluster1x1x1_finalize")
    shown = [r for r in data["results"] if r["listed_as"] == {
        "tile": "128x128x128", "fusion": "finalize", "swap_ab": "off", "cluster": "1x1x1", "epilogue": "tma",
        "types": "mxfp8 x mxfp4", "out": "bf16"}]
    assert [(r["stages"], r["launch_bytes"]) for r in shown] == [(row["stages"], row["shared_storage_bytes"])]


def test_the_epilogue_schedule_narrows_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    _, everything = listing(capsys, "--arch", "10.0", "--dtype", "fp32")
    _, narrowed = listing(capsys, "--arch", "10.0", "--dtype", "fp32", "--epilogue-schedule", "nosmem")
    assert "epilogue nosmem" in narrowed[0] and "fusion none" in narrowed[0]
    # FINALIZE takes the TMA epilogue only: a third of fp32's kernels have none in shared memory.
    assert int(narrowed[0].split()[1]) * 3 == int(everything[0].split()[1])


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--arch", "10.3", "--tile", "128x128x256"], 4, "sm_100 branch is modelled for cc 10.0 (B200, GB200); its "
                                                      "kernels for cc 10.3 are not modelled"),
    (["--arch", "9.0", "--dtype", "bf16", "--tile", "128x128x64", "--epilogue-schedule", "nosmem"], 1,
     "--epilogue-schedule nosmem is its sm_100 choice"),
    (["--arch", "10.0", "--dtype", "e4m3", "--dtype-b", "nvfp4", "--tile", "128x128x128"], 1,
     "the MoE launcher's sm_100 kernels take nvfp4, mxfp8 x mxfp4, mxfp8, e4m3, bf16, fp16, fp32 (got e4m3 x nvfp4)"),
])
def test_what_is_not_the_launchers_sm100_kernel_is_said_so(args: list[str], code: int, message: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    got = cli.main(["fit", "--launcher", "trtllm-moe", *args, "--no-local"])
    out = capsys.readouterr().out
    assert got == code and message in out, out


def test_a_kernel_the_generator_does_not_emit_names_its_epilogues(capsys: pytest.CaptureFixture[str]) -> None:
    row = find("sm100_moe_nvfp4_dbf16_128x128x256_cluster1x1x1_none_nosmem")
    cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x128x256", "--epilogue-schedule", "nosmem", "--arch",
              "10.0", "--no-local"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{row['stages']} stages fit on sm_100: {row['shared_storage_bytes']} of"), lines
    assert lines[1] == ("sm_100: FlashInfer's generator emits no such sm_100 kernel: no nosmem epilogue with fusion "
                        "none here (its epilogues: tma)")


def test_finalize_without_shared_memory_is_listed_as_none_with_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = listing(capsys, "--arch", "10.0", "--dtype", "bf16", "--fusion", "finalize", "--epilogue-schedule",
                          "nosmem")
    assert code == 1 and lines[0] == "sm_100: none: FlashInfer's generator emits sm_100 FINALIZE kernels with the tma " \
                                     "epilogue only"
    # CUTLASS refuses it too, in its words (a compiled case).
    row = find("sm100_moe_bf16_dbf16_128x128x64_cluster1x1x1_finalize_nosmem")
    assert row["refusal"] == "Unsupported data types" == sm100.build(kernel(row)).reason


def test_the_epilogue_schedule_is_the_launchers_option(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x64", "--epilogue-schedule", "nosmem", "--arch", "10.0", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and "--epilogue-schedule are the MoE launcher's: add --launcher trtllm-moe" in err, err
