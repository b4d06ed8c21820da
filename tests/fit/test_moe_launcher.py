"""The seed's kernel: TensorRT-LLM's and FlashInfer's MoE grouped GEMM on sm_120 (--launcher trtllm-moe),
with fusion NONE and FINALIZE, with and without swap_ab, and its sm_90 kernels (bf16), against the
committed builds of them (tests/data/cutlass_truth_moe_*.json, made by tools/cutlass_truth/moe.py from
real CUTLASS releases and FlashInfer's cutlass_extensions). FINALIZE at 128x256x128 and 256x128x128 is CUTLASS's own overflow:
its auto rule picks 3 stages and the kernel needs 102400 B of sm_120's 101376."""

from __future__ import annotations

import json

import pytest

from bisect_smem.analysis.fit.cutlass import sm90, sm120
from bisect_smem.analysis.fit.cutlass.gemm import GemmKernel
from bisect_smem.app.cli import main as cli
from tests.paths import DATA, ROOT

TABLES = {path.name: json.loads(path.read_text()) for path in sorted(DATA.glob("cutlass_truth_moe_*.json"))}
ROWS = [(name, row) for name, doc in TABLES.items() for row in doc["rows"]]
SM120_OPTIN = 101376


def kernel(row: dict, stages: int | None = None, cutlass_version: str = "4.7.0") -> GemmKernel:
    m, n, k = row["tile"]
    return GemmKernel(m, n, k, row["a"], row["b"], row["c"], row["d"], "auto", True, stages, None, row["launcher"],
                      row["fusion"], row["swap_ab"], cutlass_version)


def test_the_tables_cover_two_releases_and_the_seed() -> None:
    versions = {doc["cutlass_version"] for doc in TABLES.values()}
    assert len(versions) >= 2 and "4.7.0" in versions
    assert {row["arch"] for _, row in ROWS} == {90, 120}
    for doc in (doc for doc in TABLES.values() if doc["rows"][0]["arch"] == 120):
        seed = next(r for r in doc["rows"] if r["name"] == "sm120_moe_128x256x128_finalize")
        assert (seed["stages"], seed["shared_storage_bytes"]) == (3, 102400)


@pytest.mark.parametrize(("table", "row"), ROWS, ids=[f"{t}:{r['name']}" for t, r in ROWS])
def test_the_model_equals_every_build(table: str, row: dict) -> None:
    family = {90: sm90.build, 120: sm120.build}[row["arch"]]
    built = family(kernel(row, cutlass_version=TABLES[table]["cutlass_version"]))
    # Host-only builds: where the model refuses one, it is the kernel's device code that does (before 4.5.0,
    # sm_120's tiles under 128 wide: tests/data/cutlass_truth_rules_4.4.2.json).
    assert (built.builds or built.device_only) and row["builds"]
    assert (built.stages, built.mainloop_bytes, built.epilogue_bytes, built.shared_storage_bytes) == (
        row["stages"], row["mainloop_bytes"], row["epilogue_bytes"], row["shared_storage_bytes"])


@pytest.mark.parametrize("table", sorted(name for name, doc in TABLES.items() if doc["rows"][0]["arch"] == 120))
@pytest.mark.parametrize("tile", ["128x256x128", "256x128x128"])
def test_the_seeds_tiles_are_cutlass_own_overflow(tile: str, table: str, capsys: pytest.CaptureFixture[str]) -> None:
    version = TABLES[table]["cutlass_version"]
    row = next(r for r in TABLES[table]["rows"] if r["name"] == f"sm120_moe_{tile}_finalize")
    swapped = next(r for r in TABLES[table]["rows"] if r["name"] == f"sm120_moe_{tile}_finalize_swap_ab")
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
    (["--fusion", "finalize"], "--fusion and --swap-ab are the MoE launcher's: add --launcher trtllm-moe"),
    (["--swap-ab"], "--fusion and --swap-ab are the MoE launcher's"),
    (["--launcher", "trtllm-moe", "--schedule", "pingpong"], "--schedule: --launcher trtllm-moe fixes it itself"),
    (["--launcher", "trtllm-moe", "--rule", "triton"], "--launcher is CUTLASS's: drop it with --rule triton"),
])
def test_launcher_options_refused_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--tile", "128x128x128", *args, "--arch", "sm_120", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_other_families_and_operands_are_not_guessed(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x128x128", "--arch", "sm_100", "--no-local"])
    out = capsys.readouterr().out
    assert code == 4 and "is modelled for sm120 and sm90; its sm100 kernel is not modelled" in out
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x128x64", "--arch", "sm_90", "--no-local"])
    out = capsys.readouterr().out
    assert code == 1 and "FP4 is only supported by SM100" in out
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--tile", "128x128x128", "--dtype", "mxfp8", "--arch",
                     "sm_120", "--no-local"])
    out = capsys.readouterr().out
    assert code == 1 and "only supports nvfp4" in out


def test_the_worked_example_in_the_docs_is_this_output(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / "fit.md").read_text()
    block = text.split("```console\n", 1)[1].split("```", 1)[0].splitlines()
    command, shown = block[0], block[1:]
    assert command.startswith("$ bisect-smem fit ")
    code = cli.main(command.split()[2:])
    assert code == 1 and capsys.readouterr().out.splitlines()[:len(shown)] == shown
