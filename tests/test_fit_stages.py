"""`fit --stages auto`: CUTLASS's stage rules checked by hand, many tiles in one table, limits from saved
reports and baselines, and a library's error explained."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bisect_smem.analysis.stages import RULE_SM90, RULE_SM100, GemmSpec, Tile, auto_stages, rule_for
from bisect_smem.app import cli
from bisect_smem.core.errors import UsageError

README = Path(__file__).resolve().parents[1] / "README.md"


def spec(tile: str, a: str, b: str | None = None, epilogue: int = 0, align: int = 1) -> GemmSpec:
    return GemmSpec(Tile.parse(tile), a, b or a, epilogue, align)


# (tile, dtype A, dtype B, epilogue, align, capacity, rule) -> (stages, bytes per stage, used bytes), by hand:
#   sm90:  stage = round_up(A + B, 128) + 16; stages = (floor_128(capacity) - round_up(epilogue, 128)) // stage
#   sm100: stage = A + B + 16;                stages = (capacity - epilogue) // stage
HAND_COMPUTED = [
    # 128x256x64 bf16: A 16384 + B 32768 = 49152 (already 128-aligned) + 16 = 49168; 232448 // 49168 = 4.
    (("128x256x64", "bf16", "bf16", 0, 1, 232448, RULE_SM90), (4, 49168, 196672)),
    (("128x256x64", "bf16", "bf16", 0, 1, 232448, RULE_SM100), (4, 49168, 196672)),
    # The same on sm_120's 101376 B: 2 stages, 3040 B left.
    (("128x256x64", "bf16", "bf16", 0, 1, 101376, RULE_SM100), (2, 49168, 98336)),
    # 128x128x64 bf16: 32768 + 16 = 32784; 232448 // 32784 = 7 (229488, 2960 left) ...
    (("128x128x64", "bf16", "bf16", 0, 1, 232448, RULE_SM90), (7, 32784, 229488)),
    # ... a 2950 B epilogue still leaves room for 7 unrounded (sm100: 229498 // 32784 = 7), but sm_90
    # carves out round_up(2950, 128) = 3072: 229376 // 32784 = 6.
    (("128x128x64", "bf16", "bf16", 2950, 1, 232448, RULE_SM100), (7, 32784, 232438)),
    (("128x128x64", "bf16", "bf16", 2950, 1, 232448, RULE_SM90), (6, 32784, 199776)),
    # 64x60x40 fp16: 5120 + 4800 = 9920; sm90 rounds it to 9984 + 16 = 10000, sm100 takes 9920 + 16 = 9936.
    (("64x60x40", "fp16", "fp16", 0, 1, 232448, RULE_SM90), (23, 10000, 230000)),
    (("64x60x40", "fp16", "fp16", 0, 1, 232448, RULE_SM100), (23, 9936, 228528)),
    # 230015 B would hold 23 stages of 10000 B, but sm90 first rounds the capacity down to 229888: 22.
    (("64x60x40", "fp16", "fp16", 0, 1, 230015, RULE_SM90), (22, 10000, 220000)),
    # fp6 is 0.75 B: 128x128x64 -> 6144 + 6144 + 16 = 12304; 101376 // 12304 = 8.
    (("128x128x64", "fp6", "fp6", 0, 1, 101376, RULE_SM100), (8, 12304, 98432)),
    # Mixed types: A fp8 8192 + B bf16 16384 + 16 = 24592; 232448 // 24592 = 9.
    (("128x128x64", "fp8", "bf16", 0, 1, 232448, RULE_SM90), (9, 24592, 221328)),
    # Block-scaled sm_120, fp4 128x184x128: A 8192 + B 11776 + 16 = 19984 -> 5 stages; with the operand
    # buffers alignas(1024), B takes 12288: 20496 per stage -> 4 stages.
    (("128x184x128", "fp4", "fp4", 0, 1, 101376, RULE_SM100), (5, 19984, 99920)),
    (("128x184x128", "fp4", "fp4", 0, 1024, 101376, RULE_SM100), (4, 20496, 81984)),
    # Not even one stage: 256x256x128 fp32 is 262144 B + 16 per stage.
    (("256x256x128", "fp32", "fp32", 0, 1, 232448, RULE_SM90), (0, 262160, 262160)),
]


@pytest.mark.parametrize("given, expected", HAND_COMPUTED,
                         ids=[f"{g[0]}-{g[1]}-{g[2]}-e{g[3]}-a{g[4]}-{g[5]}-{g[6]}" for g, _ in HAND_COMPUTED])
def test_stage_rules_match_hand_computed_counts(given: tuple, expected: tuple[int, int, int]) -> None:
    tile, a, b, epilogue, align, capacity, rule = given
    plan = auto_stages(spec(tile, a, b, epilogue, align), capacity, rule)
    assert (plan.stages, plan.stage_bytes, plan.used_bytes) == expected
    assert plan.left_bytes == capacity - expected[2]


def test_rule_per_architecture() -> None:
    assert [rule_for(cc) for cc in ((8, 0), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0), None)] == \
        [RULE_SM90, RULE_SM90, RULE_SM90, RULE_SM100, RULE_SM100, RULE_SM100, RULE_SM90]


@pytest.mark.parametrize("build, message", [
    (lambda: Tile.parse("128x256"), "must look like 128x256x64"),
    (lambda: Tile.parse("0x8x8"), "dimensions must be >= 1"),
    (lambda: Tile(70000, 1, 1), "tile M must be in 1..65536"),
    (lambda: spec("8x8x8", "fp5"), "unknown --dtype-a 'fp5'"),
    (lambda: spec("8x8x8", "fp8", epilogue=-1), "--epilogue must be >= 0"),
    (lambda: spec("8x8x8", "fp8", align=1000), "--align must be a power of two"),
])
def test_bad_gemm_specs_say_what_was_received(build, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build()


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["fit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_auto_stages_per_target_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x256x64", "--dtype", "bf16", "--stages", "auto", "--arch", "9.0",
                        "--arch", "12.0", "--arch", "10.0", "--no-local", "--json", "-"], capsys)
    data = json.loads(out)
    assert code == 0 and data["schema"] == "bisect_smem/fit/v1"
    got = {r["target"].split()[0]: (r["stages"], r["stage_rule"], r["used_bytes"], r["left_bytes"], r["verdict"])
           for r in data["results"]}
    assert got == {"sm_90": (4, "sm90", 196672, 35776, "fits with opt-in"),
                   "sm_120": (2, "sm100", 98336, 3040, "fits with opt-in"),
                   "sm_100": (4, "sm100", 196672, 35776, "fits with opt-in")}
    assert data["gemm"] == {"tiles": ["128x256x64"], "dtype_a": "bf16", "dtype_b": "bf16", "stages": "auto",
                            "epilogue_bytes": 0, "align_bytes": 1}
    assert data["request"]["dynamic_bytes"] is None and data["request"]["threads"] == 128


def test_zero_stages_says_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "256x256x128", "--dtype", "fp32", "--stages", "auto", "--arch", "12.0",
                        "--no-local"], capsys)
    row = out.splitlines()[3]
    # One stage of 262160 B against 101376: over by 160784 B.
    assert code == 1 and "0: does not fit" in row and "over by 160784" in row, out


def test_epilogue_and_align_reach_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x184x128", "--dtype", "fp4", "--stages", "auto", "--align", "1024",
                        "--epilogue", "0", "--arch", "12.0", "--no-local", "--json", "-"], capsys)
    (result,) = json.loads(out)["results"]
    assert code == 0 and (result["stages"], result["stage_bytes"]) == (4, 20496)
    code, out, _ = fit(["--tile", "128x128x64", "--dtype", "bf16", "--stages", "auto", "--epilogue", "2950",
                        "--arch", "9.0", "--arch", "10.0", "--no-local", "--json", "-"], capsys)
    assert [r["stages"] for r in json.loads(out)["results"]] == [6, 7]


def test_dtype_a_and_b(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x128x64", "--dtype-a", "fp8", "--dtype-b", "bf16", "--stages", "auto",
                        "--arch", "9.0", "--no-local", "--json", "-"], capsys)
    data = json.loads(out)
    assert data["results"][0]["stages"] == 9 and data["gemm"]["dtype_a"] == "fp8"
    assert "A fp8, B bf16" in data["source"]


MATRIX_ARGS = ["--tile", "128x256x64", "--tile", "128x128x64", "--tile", "256x128x64", "--tile", "128x256x128",
               "--dtype", "bf16", "--stages", "auto", "--arch", "9.0", "--arch", "12.0", "--no-local"]


def test_many_tiles_make_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(MATRIX_ARGS, capsys)
    rows = [line.split() for line in out.splitlines()[1:7]]
    assert code == 0
    assert rows == [["tile", "sm_90", "sm_120"], ["-----------", "-------", "--------"],
                    ["128x256x64", "4", "2"], ["128x128x64", "7", "3"], ["256x128x64", "4", "2"],
                    ["128x256x128", "2", "1"]]


def test_readme_worked_example_is_this_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(MATRIX_ARGS, capsys)
    text = README.read_text()
    block = re.search(r"```\n\$ bisect-smem fit (--tile 128x256x64 .*?)\n(.*?)```", text, re.S)
    assert block, "the README's worked example is missing"
    assert block.group(1).split() == MATRIX_ARGS
    assert block.group(2) == out and code == 0


def test_many_tiles_with_fixed_stages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x256x128", "--tile", "64x64x64", "--stages", "2", "--dtype", "bf16",
                        "--arch", "9.0", "--arch", "12.0", "--no-local"], capsys)
    rows = out.splitlines()
    assert code == 1
    assert rows[3].split() == ["128x256x128", "opt-in", "over", "by", "95232"]
    assert rows[4].split() == ["64x64x64", "fits", "fits"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved report of two simulated devices (one with a lower opt-in limit) and their baselines."""
    folder = tmp_path_factory.mktemp("fleet")
    cli.main(["--simulate", "h200", "--simulate", "h200,optin=180000", "--json", str(folder / "r.json"), "--quiet"])
    cli.main(["--simulate", "rtx-pro-6000", "--save-baseline", str(folder / "baselines"), "--quiet", "--json", "-"])
    assert (folder / "r.json").is_file() and list((folder / "baselines").glob("*/*.json"))
    return folder


def test_target_report_labels_every_device(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x256x64", "--dtype", "bf16", "--stages", "auto", "--target",
                        str(fleet / "r.json"), "--json", "-"], capsys)
    results = json.loads(out)["results"]
    assert code == 0
    # 180000 B rounded down to 128 B is 179968: 3 stages of 49168 B; the published sm_90 row is not asked for.
    assert [(r["kind"], r["optin_limit_bytes"], r["stages"]) for r in results] == \
        [("measured", 232448, 4), ("measured", 180000, 3)]
    assert all(r["source"] == str(fleet / "r.json") and r["driver_version"] for r in results)
    assert "r.json device 1" in results[1]["target"]


def test_target_baseline_folder(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x256x64", "--dtype", "bf16", "--stages", "auto", "--target",
                        str(fleet / "baselines"), "--arch", "9.0"], capsys)
    lines = out.splitlines()
    assert code == 0
    assert lines[3].startswith("sm_90 ") and lines[3].split()[-5] == "4"
    assert "[baseline " in lines[4] and lines[4].split()[-6:] == ["sm100", "2", "49168", "98336", "3040", "1"]


def test_target_device_without_a_limit_is_named(fleet: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((fleet / "r.json").read_text())
    data["devices"][1].update(measured=None, error="gave up after 6 restarts")
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    code, out, _ = fit(["65536", "--target", str(path)], capsys)
    assert code == 4
    assert "limit unknown: gave up after 6 restarts" in out


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing.json", "cannot read it"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "no baselines in it"),
    (lambda p: (p / "x.json").write_text("{\"schema\": \"other\"}") and p / "x.json", "not a bisect_smem/report/v1"),
    (lambda p: (p / "y.json").write_text("{\"devi") and p / "y.json", "not a readable report or baseline"),
])
def test_bad_targets_are_exit_2(make, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fit(["1000", "--target", str(make(tmp_path))], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


TRITON = ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, "
          "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.")


def test_explain_tritons_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", TRITON, "--tile", "128x128x64", "--dtype", "fp16", "--arch", "9.0",
                        "--arch", "12.0", "--no-local"], capsys)
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == ("Triton: the kernel needs 131072 B of shared memory; the GPU it ran on allows 101376 B: "
                        "over by 29696 B.")
    assert lines[1] == "101376 B is the published opt-in limit of sm_86, sm_89, sm_120, sm_121."
    assert lines[4].split()[-1] == "7" and "101376 to spare" in lines[4]
    assert lines[5].split()[-1] == "3" and "over by 29696" in lines[5]


def test_explain_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", TRITON, "--arch", "12.0", "--no-local", "--json", "-"], capsys)
    data = json.loads(out)
    assert code == 1
    assert data["explain"] == {"kind": "triton", "required_bytes": 131072, "hardware_limit_bytes": 101376,
                               "limit_matches": ["sm_86", "sm_89", "sm_120", "sm_121"]}
    assert data["results"][0]["over_bytes"] == 29696


def test_explain_a_cutlass_byte_count(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--explain", "196608", "--arch", "12.0", "--arch", "9.0", "--tile", "128x256x128",
                        "--dtype", "bf16", "--no-local"], capsys)
    lines = out.splitlines()
    assert code == 1 and "CUTLASS" in lines[0]
    assert lines[3].startswith("sm_120") and "over by 95232" in lines[3] and lines[3].split()[-1] == "1"
    assert lines[4].startswith("sm_90") and "35840 to spare" in lines[4] and lines[4].split()[-1] == "2"


@pytest.mark.parametrize("args, message", [
    (["--explain", "Error Internal"], "--explain takes Triton's message"),
    (["--explain", "1000", "--tile", "8x8x8", "--stages", "2"], "drop --stages"),
    (["--explain", "1000", "100"], "give the dynamic size once"),
    (["--tile", "8x8x8", "--stages", "0"], "must be >= 1 (got 0)"),
    (["--tile", "8x8x8", "--stages", "most"], "expected a whole number or 'auto'"),
    (["--tile", "8x8x8", "--dtype-b", "fp5"], "unknown --dtype-b 'fp5'"),
    (["--tile", "8x8x8", "--epilogue", "12XB"], "--epilogue must be a byte count"),
    (["--tile", "8x8x8", "--align", "48"], "--align must be a power of two (got 48)"),
])
def test_bad_stage_options_are_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fit([*args, "--no-local"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
