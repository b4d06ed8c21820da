"""`fit --rule triton`: the model of Triton's matmul against every committed record of real Triton builds
(tests/data/triton_matmul_*.json, made by tools/triton_truth/collect.py: the H200's launches, and
compile-only builds for other architectures), and the answers a Triton user reads."""

from __future__ import annotations

import json
import re

import pytest

from bisect_smem.analysis.fit.triton import TRITON_VERSION
from bisect_smem.analysis.fit.triton.rule import TritonKernel, not_modelled, refusal, shared_of, stages_giving
from bisect_smem.app.cli import main as cli
from bisect_smem.core.hardware import has_native_fp8_mma_sync, tensor_core_mma
from tests.paths import DATA, ROOT

FILES = sorted(DATA.glob("triton_matmul_sm*.json"))
DOCS = {path.name: json.loads(path.read_text()) for path in FILES}
H200 = DOCS["triton_matmul_sm90.json"]


def arch_of(doc: dict) -> tuple[int, int]:
    """The architecture a record file was made for: the GPU's, or the compile-only target's."""
    target = doc["target"]
    if "compute_capability" in target:
        major, minor = target["compute_capability"].split(".")
        return int(major), int(minor)
    return divmod(target["compile_only_arch"], 10)


def kernel_of(record: dict, stages: int | None = None) -> TritonKernel:
    # Records made before B's layout was an option stored B N-major.
    return TritonKernel(record["BLOCK_M"], record["BLOCK_N"], record["BLOCK_K"], record["dtype"],
                        stages or record["num_stages"], record["num_warps"], record.get("b_layout", "n"),
                        "descriptor" if record.get("descriptor") else "pointer")


RECORDS = [(name, i, r) for name, doc in DOCS.items() for i, r in enumerate(doc["records"])]


def test_the_records_name_their_triton_version_and_cover_the_h200() -> None:
    assert {doc["triton_version"] for doc in DOCS.values()} == {TRITON_VERSION}
    assert H200["target"]["name"] == "NVIDIA H200" and len(H200["records"]) == 342
    assert any(r.get("out_of_resources") for r in H200["records"]) and any(r.get("loads") for r in H200["records"])
    assert all("compile_only_arch" in doc["target"] and doc["kind"] == "compile-only"
               for name, doc in DOCS.items() if "compute_capability" not in doc["target"])
    kmajor = DOCS["triton_matmul_sm90_fp8_kmajor.json"]
    assert kmajor["target"]["name"] == "NVIDIA H200" and {r["b_layout"] for r in kmajor["records"]} == {"k"}
    assert sum(r["compiled"] for r in kmajor["records"]) >= 100


@pytest.mark.parametrize("name, index, record", RECORDS, ids=[f"{n[15:-5]}-{i}" for n, i, _ in RECORDS])
def test_the_model_equals_every_record(name: str, index: int, record: dict) -> None:
    cc = arch_of(DOCS[name])
    kernel = kernel_of(record)
    reason = refusal(kernel, cc)
    if not record["compiled"]:
        # What Triton refused, the model refuses, in Triton's words where the record has them.
        assert reason is not None
        assert reason in record.get("error_message", reason)
        return
    if record.get("descriptor") and not_modelled(kernel, cc) is not None:
        # The descriptor kernel's types and targets the rule leaves out: said so, never another kernel's bytes.
        assert reason.startswith("not modelled: this rule is the pointer-arithmetic matmul")
        return
    assert reason is None
    assert shared_of(kernel, record["num_stages"], cc).shared == record["shared"]


@pytest.mark.parametrize("record", [r for r in H200["records"] if r.get("out_of_resources")][:12],
                         ids=lambda r: f"{r['dtype']}-{r['BLOCK_M']}x{r['BLOCK_N']}x{r['BLOCK_K']}-s{r['num_stages']}")
def test_tritons_own_message_is_reproduced(record: dict) -> None:
    required, limit = re.search(r"Required: (\d+), Hardware limit: (\d+)", record["out_of_resources"]).groups()
    assert int(required) == shared_of(kernel_of(record), record["num_stages"], (9, 0)).shared
    assert int(limit) == H200["target"]["max_shared_mem_optin_bytes"] < int(required)


def fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["fit", "--rule", "triton", *args, "--no-local"])
    out, err = capsys.readouterr()
    return code, out, err


def most_that_loaded(dtype: str, tile: tuple[int, int, int]) -> tuple[int, dict]:
    """The largest num_stages of this tile that the H200 loaded, and the first one it refused."""
    rows = [r for r in H200["records"] if r["dtype"] == dtype and (r["BLOCK_M"], r["BLOCK_N"], r["BLOCK_K"]) == tile]
    loaded = max(r["num_stages"] for r in rows if r.get("loads"))
    return loaded, next(r for r in rows if r["num_stages"] == loaded + 1)


@pytest.mark.parametrize("dtype, tile", [("fp16", (128, 256, 64)), ("bf16", (128, 128, 128)),
                                         ("fp32", (128, 128, 64)), ("fp16", (256, 64, 128))])
def test_auto_gives_the_most_stages_the_h200_loaded(dtype: str, tile: tuple[int, int, int],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    loaded, refused = most_that_loaded(dtype, tile)
    warps = refused["num_warps"]
    code, out, _ = fit(["--tile", "x".join(map(str, tile)), "--dtype", dtype, "--warps", str(warps),
                        "--stages", "auto", "--arch", "9.0"], capsys)
    assert code == 0, out
    assert out.splitlines()[0].startswith(f"num_stages {loaded} fits on sm_90: ")
    assert out.splitlines()[0].endswith(f"; {loaded + 1} would need {refused['shared']} B")
    assert f"Triton {TRITON_VERSION}" in out


def test_json_names_the_version_and_every_byte(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x128x64", "--dtype", "bf16", "--arch", "9.0", "--arch", "12.0", "--json", "-"],
                       capsys)
    data = json.loads(out)
    assert code == 0 and data["gemm"]["triton_version"] == TRITON_VERSION and data["gemm"]["rule"] == "triton"
    for r in data["results"]:
        assert (r["library"], r["version"], r["builds"]) == ("Triton", TRITON_VERSION, True)
        assert r["launch_bytes"] == r["total_bytes"] <= r["optin_limit_bytes"]
        assert r["launch_bytes"] == max(r["mainloop_bytes"], r["epilogue_bytes"])
        assert r["details"] == {"warps": 4} and r["labels"]["launch"] == "metadata.shared"


def test_fixed_stages_that_do_not_load_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    loaded, refused = most_that_loaded("fp16", (128, 256, 64))
    code, out, _ = fit(["--tile", "128x256x64", "--dtype", "fp16", "--warps", "8", "--stages", str(loaded + 1),
                        "--arch", "9.0"], capsys)
    assert code == 1
    assert out.splitlines()[0] == (f"num_stages {loaded + 1} does not fit on sm_90: {refused['shared']} B against "
                                   f"232448 B, over by {refused['shared'] - 232448} B (OutOfResources)")


def test_explain_tritons_message_with_its_tile(capsys: pytest.CaptureFixture[str]) -> None:
    loaded, refused = most_that_loaded("fp16", (128, 256, 64))
    message = "triton.runtime.errors.OutOfResources: " + refused["out_of_resources"]
    code, out, _ = fit(["--explain", message, "--tile", "128x256x64", "--dtype", "fp16", "--warps", "8",
                        "--arch", "9.0", "--arch", "12.0"], capsys)
    lines = out.splitlines()
    need = refused["shared"]
    assert code == 1
    assert lines[0].startswith(f"Triton: the kernel needs {need} B of shared memory; the GPU it ran on allows 232448 B")
    # On the H200 the message came from num_stages it names; sm_120's mma.sync keeps one buffer fewer.
    on_120 = stages_giving(TritonKernel(128, 256, 64, "fp16", None, 8), (12, 0), need)
    assert lines[2] == (f"Required: {need} B is 128x256x64 fp16 (num_warps 8) with num_stages "
                        f"{refused['num_stages']} on sm_90; num_stages {on_120[0]} on sm_120.")
    assert on_120 == [refused["num_stages"] + 1]
    sm90 = next(line for line in lines if line.startswith("sm_90"))
    assert sm90.split()[-1] == str(loaded)


@pytest.mark.parametrize("args, message", [
    (["--tile", "128x128x64", "--dtype", "e5m2"],
     "--rule triton takes --dtype fp16, bf16, fp32 (tf32), fp8 (e4m3) or int8; got 'e5m2'"),
    (["--tile", "128x128x64", "--warps", "6"], "--warps must be one of 1, 2, 4, 8, 16 (got 6)"),
    (["--tile", "128x128x64", "--warps", "32"], "--warps must be one of 1, 2, 4, 8, 16 (got 32)"),
    (["--tile", "128x128x64", "--loads", "tma"], "--loads: invalid choice: 'tma'"),
    (["--tile", "128x128x64", "--warps", "\u0664"], "--warps must be a whole number in ASCII digits"),
    (["--tile", "128x128x64", "--stages", "17"], "--stages must be in 1..16 for --rule triton (got 17)"),
    (["--tile", "128x128x64", "--schedule", "pingpong"], "--schedule is CUTLASS's: drop it with --rule triton"),
    (["--tile", "128x128x64", "--grouped", "--c-dtype", "fp32"], "--c-dtype, --grouped are CUTLASS's"),
])
def test_bad_triton_options_are_one_line_exit_2(args: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fit(args, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("args, why, exit_code", [
    (["--tile", "128x128x16", "--dtype", "fp8", "--arch", "9.0"], "K >= 32", 1),
    (["--tile", "128x128x64", "--dtype", "fp8", "--arch", "8.0"], "fp8e4nv not supported", 1),
    (["--tile", "96x128x64", "--dtype", "fp16", "--arch", "9.0"], "BLOCK sizes other than", 4),
    (["--tile", "128x128x64", "--dtype", "fp16", "--arch", "7.5"], "not for this architecture", 4),
    (["--tile", "128x128x64", "--dtype", "fp16", "--arch", "11.0"], "not for this architecture", 4),
])
def test_no_stage_count_where_triton_refuses_or_the_model_stops(args: list[str], why: str, exit_code: int,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # Triton refusing to compile is a does-not-build (1); what the model does not cover is unknown (4).
    code, out, _ = fit(args, capsys)
    assert code == exit_code and "no num_stages" in out.splitlines()[0] and why in out.splitlines()[0], out


def test_tf32_is_the_fp32_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    # tl.dot multiplies fp32 operands as tf32 by default on NVIDIA: the same compile, the same bytes.
    answers = [fit(["--tile", "128x128x32", "--dtype", dtype, "--arch", "9.0", "--arch", "12.0"], capsys)[:2]
               for dtype in ("tf32", "fp32")]
    assert answers[0] == answers[1] and answers[0][0] == 0


def test_int8_is_answered_with_its_int32_accumulator(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = fit(["--tile", "128x128x64", "--dtype", "int8", "--stages", "3", "--arch", "9.0", "--json", "-"],
                       capsys)
    result = json.loads(out)["results"][0]
    assert code == 0 and result["launch_bytes"] == shared_of(TritonKernel(128, 128, 64, "int8"), 3, (9, 0)).shared
    assert result["details"] == {"warps": 4}


def test_the_points_cover_every_num_warps_and_type_on_every_target() -> None:
    points = {arch_of(doc): doc["records"] for name, doc in DOCS.items() if name.endswith("_points.json")}
    assert set(points) == {(8, 0), (9, 0), (10, 0), (12, 0)}
    for records in points.values():
        assert {r["num_warps"] for r in records} == {1, 2, 4, 8, 16}
        assert {"int8", "tf32", "fp16", "fp8e4m3", "fp32"} == {r["dtype"] for r in records}
        assert any(not r["compiled"] for r in records)  # a refusal: int8 at K 16


def test_two_warps_on_hopper_fall_back_to_mma_sync(capsys: pytest.CaptureFixture[str]) -> None:
    # wgmma takes whole warp groups: with 2 warps the dot is mma.sync, which keeps num_stages - 1 buffers.
    real = next(r for r in DOCS["triton_matmul_sm90_points.json"]["records"] if (
        r["dtype"], r["BLOCK_M"], r["BLOCK_N"], r["BLOCK_K"], r["num_warps"], r["num_stages"]) == ("fp16", 128, 128, 64,
                                                                                                  2, 3))
    two, four = (shared_of(TritonKernel(128, 128, 64, "fp16", 3, warps), 3, (9, 0)) for warps in (2, 4))
    assert (two.mma.version, two.a.count, four.mma.version, four.a.count) == (2, 2, 3, 3)
    assert two.shared == real["shared"] == 2 * (128 * 64 + 64 * 128) * 2
    code, out, _ = fit(["--tile", "128x128x64", "--warps", "2", "--stages", "3", "--arch", "9.0", "--verbose"], capsys)
    assert code == 0 and "mma v2 (mma.sync" in out and f"num_stages 3 fits on sm_90: {two.shared} of" in out


def descriptor_row(arch: str, dtype: str, stages: int) -> dict:
    return next(r for r in DOCS[f"triton_matmul_{arch}_desc.json"]["records"] if (
        r["dtype"], r["BLOCK_M"], r["BLOCK_N"], r["BLOCK_K"], r["num_warps"], r["num_stages"]) == (
        dtype, 128, 256, 64, 4, stages))


def test_the_tensor_descriptor_matmul_is_its_own_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    # Its mbarriers and C staged for the TMA store make it another kernel than the pointer matmul.
    real = descriptor_row("sm90", "fp16", 3)
    code, out, _ = fit(["--tile", "128x256x64", "--loads", "descriptor", "--stages", "3", "--arch", "9.0"], capsys)
    pointer = shared_of(TritonKernel(128, 256, 64, "fp16", 3), 3, (9, 0)).shared
    assert code == 0 and out.splitlines()[0].startswith(f"num_stages 3 fits on sm_90: {real['shared']} of 232448 B")
    assert real["shared"] != pointer and "tensor descriptors (TMA)" in out.splitlines()[1]


def test_the_descriptor_matmul_is_not_answered_for_the_other_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    real = descriptor_row("sm90", "fp8e4m3", 3)
    code, out, _ = fit(["--tile", "128x256x64", "--loads", "descriptor", "--dtype", "fp8", "--arch", "9.0"], capsys)
    pointer = shared_of(TritonKernel(128, 256, 64, "fp8", 3), 3, (9, 0)).shared
    assert real["compiled"] and real["shared"] > pointer  # C staged through shared memory: far above
    assert code == 4 and "not modelled: this rule is the pointer-arithmetic matmul" in out.splitlines()[0]
    code, out, _ = fit(["--tile", "128x256x64", "--loads", "descriptor", "--b-layout", "k", "--arch", "9.0"], capsys)
    assert code == 4 and "B N-major, on sm_90 on only" in out.splitlines()[0]  # compiled with B N-major only


README = ROOT / "docs" / "fit.md"  # the worked examples live on the fit page
README_EXAMPLE = ["--rule", "triton", "--tile", "128x256x64", "--dtype", "fp16", "--warps", "8", "--arch", "9.0",
                  "--arch", "12.0"]


def test_readme_triton_example_is_this_output(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["fit", *README_EXAMPLE, "--no-local"])
    out = capsys.readouterr().out
    head = "$ bisect-smem fit " + " ".join(README_EXAMPLE) + " --no-local\n"
    text = README.read_text()
    assert code == 0 and head in text
    assert text.split(head, 1)[1].split("```", 1)[0] == out
    # Its sm_90 answer is what the H200 did: the most num_stages it loaded, and Triton's Required for one more.
    loaded, refused = most_that_loaded("fp16", (128, 256, 64))
    assert out.splitlines()[0].startswith(f"num_stages {loaded} fits on sm_90")
    assert out.splitlines()[0].endswith(f"{loaded + 1} would need {refused['shared']} B")
    assert f"{len(H200['records'])} configs" in text


def test_tritons_mma_per_architecture() -> None:
    ccs = ((7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1), None)
    assert [tensor_core_mma(cc) for cc in ccs] == [None, "mma.sync", "mma.sync", "mma.sync", "wgmma", "tcgen05",
                                             "tcgen05", None, "mma.sync", "mma.sync", None]
    assert [has_native_fp8_mma_sync(cc) for cc in ccs[1:-1]] == [False, False, True, False, False, False, False,
                                                                 True, False]


@pytest.mark.parametrize("dtype, warps, stages", [("fp16", 4, 3), ("int8", 2, 3), ("fp16", 8, 2)])
def test_one_more_stage_is_named_only_where_it_would_not_fit(dtype: str, warps: int, stages: int,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # A count the user chose, with room for more: the next stage's bytes fit too, so they are no limit.
    more = shared_of(TritonKernel(128, 128, 64, dtype, stages, warps), stages + 1, (9, 0)).shared
    assert more <= 232448  # the case is one where the next stage fits sm_90
    code, out, _ = fit(["--tile", "128x128x64", "--dtype", dtype, "--warps", str(warps), "--stages", str(stages),
                        "--arch", "9.0"], capsys)
    assert code == 0, out
    assert out.splitlines()[0].startswith(f"num_stages {stages} fits on sm_90: ")
    assert "would need" not in out.splitlines()[0]
