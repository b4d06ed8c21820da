"""The seed's kernel: TensorRT-LLM's and FlashInfer's MoE grouped GEMM on sm_120 (--launcher trtllm-moe),
with fusion NONE and FINALIZE, with and without swap_ab, and its sm_90 and sm_100 kernels (the sm_100 rules
one by one in test_moe_launcher_sm100.py), against the committed builds of them
(tests/data/cutlass_truth_moe_*.json, made by tools/cutlass_truth/moe.py from real CUTLASS releases and
FlashInfer's cutlass_extensions; the *_candidates_* tables hold every kernel FlashInfer's generator emits).
FINALIZE at 128x256x128 and 256x128x128 is CUTLASS's own overflow: its auto rule picks 3 stages and the
kernel needs 102400 B of sm_120's 101376."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass import launchers, sm90, sm100, sm120
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app.cli import main as cli
from tests.paths import DATA, ROOT

TABLES = {path.name: json.loads(path.read_text()) for path in sorted(DATA.glob("cutlass_truth_moe_*.json"))}
ROWS = [(name, row) for name, doc in TABLES.items() for row in doc["rows"]]
SM120_OPTIN = 101376


CANDIDATE_TABLES = {name: doc for name, doc in TABLES.items() if "_candidates_" in name}
# The sm_120 tables that hold the seed's kernel (NVFP4, bf16 out); the others hold kernels FlashInfer does not
# generate (fp32 out).
SEED_TABLES = sorted(name for name, doc in TABLES.items() if doc["rows"][0]["arch"] == 120
                     and any(r["a"] == "nvfp4" and r["d"] == "bf16" for r in doc["rows"]))
FAMILIES = {90: "sm90", 120: "sm120"}


def kernel(row: dict, stages: int | None = None, cutlass_version: str = "4.7.0") -> GemmKernel:
    m, n, k = row["tile"]
    return GemmKernel(m, n, k, row["a"], row["b"], row["c"], row["d"], "auto", True, stages, None, row["launcher"],
                      row["fusion"], row["swap_ab"], cutlass_version, tuple(row.get("cluster", (1, 1, 1))),
                      row.get("epilogue", "tma"))


def find(doc: dict, tile: str, fusion: str, swap_ab: bool = False) -> dict:
    """The table's NVFP4 (or, on sm_90, first) row of this tile, fusion and swap_ab, bf16 out, cluster 1x1x1."""
    return next(r for r in doc["rows"] if "x".join(map(str, r["tile"])) == tile and r["fusion"] == fusion
                and r["swap_ab"] == swap_ab and r["d"] == "bf16" and r.get("cluster", [1, 1, 1]) == [1, 1, 1]
                and r["a"] in ("nvfp4", "bf16"))


def test_the_tables_cover_two_releases_and_the_seed() -> None:
    versions = {doc["cutlass_version"] for doc in TABLES.values()}
    assert len(versions) >= 2 and "4.7.0" in versions
    assert {row["arch"] for _, row in ROWS} == {90, 100, 120}
    assert len(SEED_TABLES) >= 4
    for doc in (TABLES[name] for name in SEED_TABLES):
        seed = find(doc, "128x256x128", "finalize")
        assert (seed["stages"], seed["shared_storage_bytes"]) == (3, 102400)


@pytest.mark.parametrize(("table", "row"), ROWS, ids=[f"{t}:{r['name']}" for t, r in ROWS])
def test_the_model_equals_every_build(table: str, row: dict) -> None:
    family = {90: sm90.build, 100: sm100.build, 120: sm120.build}[row["arch"]]
    built = family(kernel(row, cutlass_version=TABLES[table]["cutlass_version"]))
    if not row["builds"]:
        assert not built.builds and built.reason == row["refusal"], built.reason
        return
    # Host-only builds: where the model refuses one, it is the kernel's device code that does (before 4.5.0,
    # sm_120's tiles under 128 wide: tests/data/cutlass_truth_rules_4.4.2.json).
    assert built.builds or built.device_only, built.reason
    assert (built.stages, built.mainloop_bytes, built.epilogue_bytes, built.shared_storage_bytes) == (
        row["stages"], row["mainloop_bytes"], row["epilogue_bytes"], row["shared_storage_bytes"])


@pytest.mark.parametrize("arch", sorted(FAMILIES))
def test_every_generated_kernel_has_a_build_and_every_build_is_generated(arch: int) -> None:
    rows = [r for doc in CANDIDATE_TABLES.values() if doc["cutlass_version"] == "4.7.0" for r in doc["rows"]
            if r["arch"] == arch]
    built = {launchers.Candidate(r["a"], r["b"], r["d"], tuple(r["tile"]), tuple(r["cluster"]), r["fusion"],
                                 r["swap_ab"]) for r in rows}
    assert len(built) == len(rows)
    assert built == set(launchers.CANDIDATES[FAMILIES[arch]])


@pytest.mark.parametrize("table", SEED_TABLES)
@pytest.mark.parametrize("tile", ["128x256x128", "256x128x128"])
def test_the_seeds_tiles_are_cutlass_own_overflow(tile: str, table: str, capsys: pytest.CaptureFixture[str]) -> None:
    version = TABLES[table]["cutlass_version"]
    row, swapped = find(TABLES[table], tile, "finalize"), find(TABLES[table], tile, "finalize", True)
    two = sm120.build(kernel(row, 2, version)).shared_storage_bytes
    common = ["fit", "--launcher", "trtllm-moe", "--fusion", "finalize", "--tile", tile, "--arch", "sm_120",
              "--no-local", "--cutlass-version", version]
    code = cli.main(common)
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 1
    assert first == (f"CUTLASS {version}'s auto rule picks {row['stages']} stages; the kernel needs "
                     f"{row['shared_storage_bytes']} B against {SM120_OPTIN} B on sm_120: over by "
                     f"{row['shared_storage_bytes'] - SM120_OPTIN} B. It compiles and fails at initialize() with "
                     f"Error Internal. 2 stages fit (StageCount<2>: {two} B), and so does swap_ab "
                     f"({swapped['shared_storage_bytes']} B).")
    code = cli.main([*common, "--json", "-"])
    data = json.loads(capsys.readouterr().out)
    result = data["results"][0]
    assert (result["builds"], result["verdict"], result["auto_rule_overflows"]) == (True, "does not fit", True)
    assert (result["stages"], result["launch_bytes"], result["version"]) == (3, 102400, version)
    assert result["details"]["swap_ab_bytes"] == swapped["shared_storage_bytes"]
    assert data["gemm"]["fusion"] == "finalize" and data["gemm"]["launcher"] == "trtllm-moe"


def test_fusion_none_fits_and_is_no_overflow(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x256x128", "--arch", "sm_120", "--no-local",
                     "--json", "-"])
    result = json.loads(capsys.readouterr().out)["results"][0]
    assert code == 0 and result["auto_rule_overflows"] is False and result["launch_bytes"] == 98304


@pytest.mark.parametrize(("args", "message"), [
    (["--fusion", "finalize"], "--swap-ab and --epilogue-schedule are the MoE launcher's: add --launcher trtllm-moe"),
    (["--swap-ab"], "--fusion, --swap-ab and --epilogue-schedule are the MoE launcher's"),
    (["--launcher", "trtllm-moe", "--schedule", "pingpong"], "--schedule: --launcher trtllm-moe fixes it itself"),
    (["--launcher", "trtllm-moe", "--rule", "triton"], "--launcher is CUTLASS's: drop it with --rule triton"),
])
def test_launcher_options_refused_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x128", *args, "--arch", "sm_120", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_other_families_and_operands_are_not_guessed(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x128x256", "--arch", "10.3", "--no-local"])
    out = capsys.readouterr().out
    assert code == 4 and "its kernels for cc 10.3 are not modelled" in out
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x128x64", "--arch", "sm_90", "--no-local"])
    out = capsys.readouterr().out
    assert code == 1 and "FP4 is only supported by SM100" in out
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x128x128", "--dtype", "mxfp8", "--arch",
                     "sm_120", "--no-local"])
    out = capsys.readouterr().out
    assert code == 1 and "grouped GEMM takes nvfp4, mxfp8 x mxfp4 (got mxfp8)" in out


def test_the_worked_example_in_the_docs_is_this_output(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # the width tools/doc_commands.py runs the docs' commands at
    text = (ROOT / "docs" / "fit.md").read_text()
    block = text.split("```console\n", 1)[1].split("```", 1)[0].splitlines()
    command, shown = block[0], block[1:]
    assert command.startswith("$ bisect-smem fit ")
    code = cli.main(command.split()[2:])
    assert code == 1 and capsys.readouterr().out.splitlines()[:len(shown)] == shown


def test_mxfp8_activations_with_mxfp4_weights_are_the_launchers_is_mx_fpx_kernel(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = CANDIDATE_TABLES["cutlass_truth_moe_candidates_sm120_4.7.0.json"]
    row = next(r for r in doc["rows"] if r["a"] == "mxfp8" and r["tile"] == [128, 64, 128] and r["fusion"] == "finalize"
               and not r["swap_ab"] and r["d"] == "bf16")
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--dtype-a", "mxfp8", "--dtype-b", "mxfp4", "--fusion",
                     "finalize", "--tile", "128x64x128", "--arch", "sm_120", "--no-local"])
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 0 and (row["stages"], row["shared_storage_bytes"]) == (3, 96256)
    assert first.startswith(f"3 stages fit on sm_120: 96256 of {SM120_OPTIN} B"), first


@pytest.mark.parametrize(("arch", "a", "b", "message"), [
    ("sm_120", "mxfp4", "mxfp8", launchers.MIXED),
    ("sm_90", "bf16", "fp16", launchers.MIXED),
    ("sm_120", "mxfp8", "mxfp8", "the MoE launcher's sm_120 grouped GEMM takes nvfp4, mxfp8 x mxfp4 (got mxfp8)"),
    ("sm_90", "e4m3", "e2m1", "Block scaled is only implemented for SM100"),
    ("sm_90", "int8", "int8", "the MoE launcher's sm_90 kernels take bf16, fp16, fp32, e4m3 (got int8)"),
])
def test_the_launchers_own_operand_rules(arch: str, a: str, b: str, message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--dtype-a", a, "--dtype-b", b, "--tile", "128x64x128",
                     "--arch", arch, "--no-local"])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith(f"{arch}: no stage count: {message}"), out


@pytest.mark.parametrize(("dtype", "tile", "extra"), [
    ("fp32", "128x128x32", []),
    ("bf16", "256x128x64", ["--fusion", "finalize", "--swap-ab", "--cluster", "2x1x1"]),
    ("e4m3", "128x256x128", ["--cluster", "2x2x1", "--d-dtype", "fp16"]),
])
def test_sm90_takes_fp32_and_the_autotuners_clusters(dtype: str, tile: str, extra: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    doc = CANDIDATE_TABLES["cutlass_truth_moe_candidates_sm90_4.7.0.json"]
    cluster = [int(c) for c in (extra[extra.index("--cluster") + 1] if "--cluster" in extra else "1x1x1").split("x")]
    row = next(r for r in doc["rows"] if r["a"] == dtype and "x".join(map(str, r["tile"])) == tile
               and r["cluster"] == cluster and r["fusion"] == ("finalize" if "finalize" in extra else "none")
               and r["swap_ab"] == ("--swap-ab" in extra) and r["d"] == ("fp16" if "fp16" in extra else
                                                                         launchers.default_output(dtype)))
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--dtype", dtype, "--tile", tile, *extra, "--arch", "sm_90",
                     "--no-local"])
    first = capsys.readouterr().out.splitlines()[0]
    assert code == 0 and first.startswith(f"{row['stages']} stages fit on sm_90: {row['shared_storage_bytes']} of "
                                          "232448 B"), first


@pytest.mark.parametrize(("args", "note"), [
    (["--d-dtype", "fp32", "--tile", "128x64x128", "--arch", "sm_120"],
     "sm_120: FlashInfer's generator emits no such sm_120 kernel: output fp16 or bf16 only (got fp32)"),
    (["--tile", "128x128x64", "--arch", "sm_120"],
     "sm_120: FlashInfer's generator emits no such sm_120 kernel: no tile 128x128x64 (its tiles: 128x32x128, "
     "128x32x256, 128x64x128, 128x64x256, 128x128x128, 128x128x256, 256x128x128, 128x256x128)"),
    (["--dtype", "bf16", "--tile", "128x64x64", "--cluster", "1x2x1", "--arch", "sm_90"],
     "sm_90: FlashInfer's generator emits no such sm_90 kernel: no cluster 1x2x1 at this tile (its clusters: "
     "1x1x1, 2x1x1)"),
])
def test_a_kernel_the_generator_does_not_emit_is_said_so(args: list[str], note: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["fit", "--launcher", "trtllm-moe", *args, "--no-local"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == note, lines
    cli.main(["fit", "--launcher", "trtllm-moe", *args, "--no-local", "--json", "-"])
    assert json.loads(capsys.readouterr().out)["results"][0]["notes"] == [note.split(": ", 1)[1]]


def test_a_generated_kernel_has_no_such_note(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x64x128", "--arch", "sm_120", "--no-local", "--json",
              "-"])
    assert json.loads(capsys.readouterr().out)["results"][0]["notes"] == []


def test_fp32_out_on_sm120_is_counted_from_its_build_and_said_to_be_no_flashinfer_kernel(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = TABLES["cutlass_truth_moe_sm120_fp32out_4.7.0.json"]
    row = next(r for r in doc["rows"] if r["tile"] == [128, 64, 128] and r["fusion"] == "none" and not r["swap_ab"])
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--d-dtype", "fp32", "--tile", "128x64x128", "--arch", "sm_120",
                     "--no-local"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0].startswith(f"{row['stages']} stages fit on sm_120: {row['shared_storage_bytes']} of")
    assert "emits no such sm_120 kernel: output fp16 or bf16 only (got fp32)" in lines[1]
    refused = next(r for r in doc["rows"] if not r["builds"])
    assert refused["refusal"] == "Specialization requires Stages set to value 2 or more."
