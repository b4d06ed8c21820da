"""`fit --launcher trtllm-moe` without --tile: every kernel FlashInfer's generator emits for the architecture,
each with its stage count, SharedStorageSize and margin, against the committed builds of every one of them
(tests/data/cutlass_truth_moe_candidates_*.json, made by tools/cutlass_truth/moe.py): which tiles fail with
Error Internal on the GPU before anything runs. The table fits one screen."""

from __future__ import annotations

import json

import pytest

from bisect_smem.app.cli import main as cli
from tests.conftest import assert_valid
from tests.paths import DATA, ROOT

OPTIN = {"sm_120": 101376, "sm_90": 232448}
TRUTH = {arch: json.loads((DATA / f"cutlass_truth_moe_candidates_{arch.replace('_', '')}_4.7.0.json").read_text())
         for arch in ("sm_120", "sm_90")}
SCREEN_ROWS, SCREEN_COLUMNS = 40, 100


def listing(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = cli.main(["fit", "--launcher", "trtllm-moe", *args, "--no-local"])
    return code, capsys.readouterr().out.splitlines()


def table(lines: list[str]) -> list[dict[str, str]]:
    """The rows of the one table in ``lines``, by column head (a merged cell reads ``off/on``)."""
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    heads = lines[rule - 1].replace("SharedStorageSize B", "bytes").replace("margin B", "margin").split()
    rows = []
    for line in lines[rule + 1:]:
        if line.startswith("kernels:"):
            break
        cells = line.split(None, len(heads) - 1)
        rows.append(dict(zip(heads, cells, strict=True)))
    return rows


def shown(rows: list[dict[str, str]], build: dict, **fixed: str) -> dict[str, str]:
    """The one row that shows ``build``: its tile, fusion, swap_ab (and cluster) among the row's cells."""
    want = {"tile": "x".join(map(str, build["tile"])), "fusion": build["fusion"],
            "swap_ab": "on" if build["swap_ab"] else "off", "cluster": "x".join(map(str, build["cluster"]))}
    found = [r for r in rows if all(want[k] in r.get(k, fixed.get(k, want[k])).split("/") for k in want)]
    assert len(found) == 1, (want, found)
    return found[0]


def check_against_builds(lines: list[str], arch: str, builds: list[dict]) -> None:
    rows = table(lines)
    for build in builds:
        row = shown(rows, build)
        over = build["shared_storage_bytes"] - OPTIN[arch]
        assert (row["stages"], row["bytes"]) == (str(build["stages"]), str(build["shared_storage_bytes"]))
        assert row["margin"] == (f"over by {over}" if over > 0 else f"{-over} to spare")


def test_every_sm120_kernel_is_listed_with_its_build_on_one_screen(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = listing(capsys, "--arch", "12.0")
    builds = [r for r in TRUTH["sm_120"]["rows"] if r["a"] == "nvfp4"]
    assert code == 1 and len(lines) <= SCREEN_ROWS and max(map(len, lines)) <= SCREEN_COLUMNS, "\n".join(lines)
    assert lines[0] == f"sm_120: {len(builds)} kernels (cluster 1x1x1, epilogue tma, types nvfp4, out fp16/bf16)"
    over = [r for r in builds if r["shared_storage_bytes"] > OPTIN["sm_120"]]
    assert lines[1] == (f"{len(over)} over the opt-in limit of {OPTIN['sm_120']} B, each: it compiles and fails at "
                        "initialize() with Error Internal")
    check_against_builds(lines, "sm_120", builds)
    # The README's kernel: 128x256x128 FINALIZE at CUTLASS 4.7.0's auto count is over by 1024 B.
    seed = shown(table(lines), {"tile": [128, 256, 128], "fusion": "finalize", "swap_ab": False, "cluster": [1, 1, 1]})
    assert seed["margin"] == "over by 1024"


def test_mxfp8_with_mxfp4_weights_is_its_own_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = listing(capsys, "--arch", "12.0", "--dtype-a", "mxfp8", "--dtype-b", "mxfp4")
    builds = [r for r in TRUTH["sm_120"]["rows"] if r["a"] == "mxfp8"]
    assert code == 0 and lines[0].startswith(f"sm_120: {len(builds)} kernels (") and "mxfp8 x mxfp4" in lines[0]
    check_against_builds(lines, "sm_120", builds)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32", "e4m3"])
def test_every_sm90_kernel_is_listed_with_its_build(dtype: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = listing(capsys, "--arch", "9.0", "--dtype", dtype)
    builds = [r for r in TRUTH["sm_90"]["rows"] if r["a"] == dtype]
    assert len(lines) <= SCREEN_ROWS and max(map(len, lines)) <= SCREEN_COLUMNS, "\n".join(lines)
    assert lines[0].startswith(f"sm_90: {len(builds)} kernels (")
    assert code == (1 if any(not r["builds"] or r["shared_storage_bytes"] > OPTIN["sm_90"] for r in builds) else 0)
    check_against_builds(lines, "sm_90", [r for r in builds if r["builds"]])


@pytest.mark.parametrize(("args", "fixed"), [
    (["--fusion", "finalize"], "fusion finalize"),
    (["--swap-ab"], "swap_ab on"),
    (["--d-dtype", "fp16"], "out fp16"),
])
def test_the_options_narrow_the_list(args: list[str], fixed: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, everything = listing(capsys, "--arch", "12.0")
    _, narrowed = listing(capsys, "--arch", "12.0", *args)
    count = int(everything[0].split()[1])
    assert fixed in narrowed[0] and int(narrowed[0].split()[1]) == count // 2, narrowed[0]


@pytest.mark.parametrize(("args", "why"), [
    (["--arch", "12.0", "--d-dtype", "fp32"],
     "sm_120: none: FlashInfer's generator emits sm_120 kernels of these types with output fp16 or bf16 only"),
    (["--arch", "12.0", "--dtype", "bf16"],
     "sm_120: none: the MoE launcher's sm_120 grouped GEMM takes nvfp4, mxfp8 x mxfp4 (got bf16)"),
    (["--arch", "9.0", "--dtype", "nvfp4"], "sm_90: none: FP4 is only supported by SM100"),
])
def test_where_the_generator_emits_none_the_answer_says_why(args: list[str], why: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = listing(capsys, *args)
    assert code == 1 and lines[0] == why


@pytest.mark.parametrize(("args", "message"), [
    (["--fusion", "finalize"], "--fusion applies only to --tile MxNxK"),
    (["--launcher", "trtllm-moe", "--rule", "triton"], "--launcher is CUTLASS's: drop it with --rule triton"),
    (["--launcher", "trtllm-moe", "--schedule", "pingpong"], "--schedule: --launcher trtllm-moe fixes it itself"),
    (["--launcher", "trtllm-moe", "--dtype", "bogus"], "unknown --dtype 'bogus'"),
])
def test_a_list_asked_wrongly_is_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", *args, "--arch", "12.0", "--no-local"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


def test_the_list_in_the_docs_is_this_output(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "docs" / "fit.md").read_text()
    block = next(b for b in text.split("```console\n")[1:] if "--tile" not in b.split("\n", 1)[0])
    command, *shown = block.split("```", 1)[0].splitlines()
    assert command == "$ bisect-smem fit --launcher trtllm-moe --arch 12.0 --no-local"
    code = cli.main(command.split()[2:])
    assert code == 1 and capsys.readouterr().out.splitlines() == shown


@pytest.mark.parametrize(("arch", "args", "pair"), [("sm_120", [], "nvfp4"), ("sm_90", ["--dtype", "e4m3"], "e4m3"),
                                                     ("sm_120", ["--fusion", "finalize", "--swap-ab"], "nvfp4")])
def test_json_gives_every_kernel_as_its_own_result(arch: str, args: list[str], pair: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", "--launcher", "trtllm-moe", "--arch", arch, *args, "--no-local",
                     "--json", "-"])
    data = json.loads(capsys.readouterr().out)
    assert_valid(data, "fit")
    fusion = "finalize" if "finalize" in args else None
    builds = {("x".join(map(str, r["tile"])), r["fusion"], "on" if r["swap_ab"] else "off", r["d"],
               "x".join(map(str, r["cluster"]))): r for r in TRUTH[arch]["rows"]
              if r["a"] == pair and fusion in (None, r["fusion"]) and ("--swap-ab" not in args or r["swap_ab"])}
    got = {(f["tile"], f["fusion"], f["swap_ab"], f["out"], f["cluster"]): r for r in data["results"]
           for f in [r["listed_as"]]}
    assert got.keys() == builds.keys() and code == (1 if any(r["verdict"] == "does not fit" for r in got.values())
                                                     else 0)
    for key, r in got.items():
        assert (r["stages"], r["launch_bytes"]) == (builds[key]["stages"], builds[key]["shared_storage_bytes"])
        assert r["over_bytes"] == builds[key]["shared_storage_bytes"] - OPTIN[arch]
