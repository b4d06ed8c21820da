"""Recorded requests explained against published and simulated limits (sm_90 and sm_120): bytes over with
the static-footprint rule, refusals worst first, what would not fit elsewhere, and what fit says of a
CUTLASS kernel named in the trace."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest

from bisect_smem.analysis.fit.targets import Target
from bisect_smem.analysis.trace import Explained, explain, fit_advice, shorten
from bisect_smem.core.profiles import find_profile
from bisect_smem.core.trace_read import read_trace

CUTLASS_READABLE = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<5, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedCooperative>, "
    "cute::tuple<cute::C<128>, cute::C<256>, cute::C<64> >, cutlass::bfloat16_t, cute::tuple<long, cute::C<1>, "
    "long>, cutlass::bfloat16_t, cute::tuple<long, cute::C<1>, long> >, void, void> >(T1::Params)")


def published(name: str) -> Target:
    profile = find_profile(name)
    assert profile is not None
    return Target.from_profile(profile)


@pytest.fixture(scope="module")
def explained(recorded: Path) -> Explained:
    return explain(read_trace(recorded), published("9.0"), [published("12.0")], lambda n: n, fit_advice)


def test_refusals_worst_first_with_the_bytes_over(explained: Explained) -> None:
    over = [(r.requested_bytes, r.here.over_bytes if r.here else None) for r in explained.refusals]
    assert over == [(300000, 300000 - 232448), (279552, 47104), (232449, 1)]


def test_static_data_is_aligned_before_the_dynamic_array(explained: Explained) -> None:
    (clustered,) = [r for r in explained.requests if r.kernel == "_Z9clusteredv"]
    assert clustered.here is not None and clustered.here.accepts_bytes == 232448 - 1008  # 1000 B static, 16-aligned
    assert clustered.cluster == (2, 1, 1) and clustered.here.fits


def test_what_would_not_fit_on_sm_120(explained: Explained) -> None:
    over = {(r.requested_bytes, lim.over_bytes) for r in explained.would_not_fit("sm_120")
            for lim in r.elsewhere}
    assert over == {(300000, 300000 - 101376), (279552, 178176), (232449, 131073), (200000, 200000 - 100368)}
    assert all(r.requested_bytes != 1000 for r in explained.would_not_fit("sm_120"))


def test_settings_other_than_the_size_are_listed_apart(explained: Explained) -> None:
    assert [(s.attribute, s.value, s.refused) for s in explained.settings] == [("PreferredSharedMemoryCarveout", 100,
                                                                               False)]


def test_without_limits_requests_are_still_listed(recorded: Path) -> None:
    bare = explain(read_trace(recorded), None, [], lambda n: n, fit_advice)
    assert len(bare.refusals) == 3 and all(r.here is None for r in bare.requests) and bare.here is None


def test_fit_names_the_cutlass_build_of_a_traced_name() -> None:
    lines = fit_advice(CUTLASS_READABLE, 279552, published("9.0"))
    assert lines is not None
    advice = "; ".join(lines)
    assert "5 stages make SharedStorageSize 279552 B, the same as asked" in advice
    assert "128x256x64 bf16, cooperative" in advice and "auto count here: 4 stages, 230400 B" in advice


def test_no_fit_where_the_target_builds_another_family() -> None:
    assert fit_advice(CUTLASS_READABLE, 279552, published("12.0")) is None  # an Sm90 collective: not sm_120's


def test_fit_says_when_the_launcher_asked_otherwise() -> None:
    lines = fit_advice(CUTLASS_READABLE, 280000, published("9.0"))
    assert lines is not None and "the launch asked 280000 B" in lines[1]


def test_no_fit_for_names_it_does_not_model() -> None:
    assert fit_advice("void fill(int)", 1000, published("9.0")) is None
    assert fit_advice(CUTLASS_READABLE, 279552, None) is None


def test_long_names_keep_the_stage_count_when_shortened() -> None:
    short = shorten(CUTLASS_READABLE, 100)
    assert len(short) <= 100 and "MainloopSm90TmaGmmaWarpSpecialized<5," in short


def test_a_real_cutlass_name_demangled_and_explained_by_fit() -> None:
    from bisect_smem.analysis.demangle import demangle_all, demangler

    if demangler() is None:
        pytest.skip("no c++filt to demangle with")
    mangled = (Path(__file__).with_name("cutlass_kernel_name.txt")).read_text().strip()
    readable = demangle_all([mangled])[mangled]
    assert readable.startswith("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<")
    lines = fit_advice(readable, 279552, published("9.0"))
    assert lines is not None and "5 stages make SharedStorageSize 279552 B, the same as asked" in lines[1]
    assert shorten(readable, 96) == "void cutlass::device_kernel<…MainloopSm90TmaGmmaWarpSpecialized<5,…>…>(…)"


def test_fit_gives_no_byte_count_for_column_major_c_and_d() -> None:
    # A real build with column-major C and D: CUTLASS 4.7's SharedStorage is 280576 B there, 1024 B more than
    # fit's model of the builder (row-major C and D) gives, so fit says what it models instead of a number.
    from bisect_smem.analysis.demangle import demangle_all, demangler

    if demangler() is None:
        pytest.skip("no c++filt to demangle with")
    mangled = (Path(__file__).with_name("cutlass_kernel_name_column_major.txt")).read_text().strip()
    lines = fit_advice(demangle_all([mangled])[mangled], 280576, published("9.0"))
    assert lines is not None and "column-major, so no byte count" in lines[1] and len(lines) == 2


def test_a_set_of_exactly_this_gpus_ceiling_says_nothing_of_another_gpu(recorded: Path) -> None:
    # Triton asks MaxDynamicSharedMemorySize = the device's opt-in limit, whatever it needs: on sm_120 it would
    # ask 101376 B. Its launch's dynamic bytes are what would not fit there.
    trace = read_trace(recorded)
    at_ceiling = replace(trace.attribute_sets[0], value=232448, result=0, correlation=99)
    with_ceiling = replace(trace, attribute_sets=(*trace.attribute_sets, at_ceiling))
    e = explain(with_ceiling, published("9.0"), [published("12.0")], lambda n: n, fit_advice)
    assert [r.requested_bytes for r in e.at_ceiling] == [232448]
    assert all(r.requested_bytes != 232448 for r in e.would_not_fit("sm_120"))
    assert {r.requested_bytes for r in e.would_not_fit("sm_120")} == {300000, 279552, 232449, 200000}


def test_fit_reads_a_trace_and_names_what_would_not_fit(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli import main as cli

    assert cli.main(["fit", "--trace", str(recorded), "--arch", "12.0"]) == 1
    out = capsys.readouterr().out
    assert "on sm_120: " in out and "over by 178176 B" in out and "over by 131073 B" in out
    # sm_90's own limit refuses what the traced GPU refused (300000, 279552 and 232449 B), and says so in JSON.
    assert cli.main(["fit", "--trace", str(recorded), "--arch", "9.0", "--json", "-"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["targets"] == ["sm_90"] and summary["limits"] is None
    assert cli.main(["fit", "--trace", str(recorded), "--tile", "128x128x64"]) == 2
    assert "--trace reads the kernels from the trace: drop --tile" in capsys.readouterr().err


def test_the_summary_is_what_its_published_schema_says(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    validator = pytest.importorskip("jsonschema").Draft202012Validator
    fast = pytest.importorskip("fastjsonschema")
    from bisect_smem.app.cli import main as cli
    from bisect_smem.app.outputs.schema_files import published

    schema = json.loads(published("trace"))
    assert cli.main(["trace", "--from", str(recorded), "--arch", "12.0", "--json", "-"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["requests"] and summary["settings"]
    validator(schema).validate(summary)
    fast.compile(schema)(summary)
    request = summary["requests"][0]
    for nonsense in ({**summary, "processes": -1}, {**summary, "requests": "none"}, {k: v for k, v in summary.items()
                                                                                      if k != "limits"},
                     {**summary, "requests": [{**request, "sise_bytes": 1}]},
                     {**summary, "requests": [{k: v for k, v in request.items() if k != "fit"}]},
                     {**summary, "requests": [{**request, "cause": "bad luck"}]},
                     {**summary, "requests": [{**request, "block": [1, 1]}]}):
        assert list(validator(schema).iter_errors(nonsense)), nonsense


def test_the_schema_is_generated_from_the_summarys_records() -> None:
    from bisect_smem.app.outputs.trace_schema import trace_schema
    from bisect_smem.app.render.trace import RequestMade, TraceSummary

    schema = trace_schema()
    assert schema["required"] == [f.name for f in fields(TraceSummary)]
    assert schema["$defs"]["RequestMade"]["required"] == [f.name for f in fields(RequestMade)]
    assert "Triton" in schema["description"] and "Triton" in schema["$defs"]["RequestMade"]["properties"]["fit"][
        "description"]
