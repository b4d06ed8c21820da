"""The public API: its names are a committed list and everything else is private; importing it loads
nothing else; docs/api.md's examples run as they are written; its answers are the command line's, field
for field; and bad values are the project's errors, naming what was given."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bisect_smem
from bisect_smem import api
from bisect_smem.app.cli.main import main
from bisect_smem.core.errors import BackendUnavailable, BaselineError, BisectSmemError, UsageError
from bisect_smem.core.jsonable import to_jsonable
from tests.conftest import gpu_unavailable_reason
from tests.paths import H200_REPORT, ROOT

# The public names. A change here is a change of the API that users see: add a name with its docs/api.md
# entry; never rename or drop one without a deprecation.
PUBLIC = [
    "ArchProfile", "BackendUnavailable", "BaselineError", "BisectSmemError", "Fit", "FitResult",
    "MeasurementError", "Target", "TraceExplanation", "UsageError", "explain_trace", "fit_bytes", "fit_cubin",
    "fit_launcher", "fit_tile", "fit_triton", "measure_limits", "profile", "profiles", "published_limits",
    "read_limits",
]
TRACE = ROOT / "tests/data/traces/h200_cutlass_gemm"


def test_the_public_names_are_the_committed_list() -> None:
    assert bisect_smem.__all__ == PUBLIC and api.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(bisect_smem, name) is getattr(api, name)
    assert set(PUBLIC) <= set(dir(bisect_smem))


def test_no_other_name_is_public() -> None:
    with pytest.raises(AttributeError):
        bisect_smem.fit_size  # noqa: B018 - a name of the modules behind the API is not the API's
    public_functions = {name for name, value in vars(api).items()
                        if callable(value) and getattr(value, "__module__", None) == api.__name__
                        and not name.startswith("_")}
    assert public_functions <= set(PUBLIC)


def test_every_public_function_is_typed_and_documented() -> None:
    for name in PUBLIC:
        value = getattr(bisect_smem, name)
        assert value.__doc__, name
        if callable(value) and not isinstance(value, type):
            assert "return" in value.__annotations__, name


def test_importing_the_package_loads_nothing_else() -> None:
    code = "import bisect_smem, sys; print(sorted(m for m in sys.modules if m.startswith('bisect_smem')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "['bisect_smem']"


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL)


def test_the_docs_examples_run_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _python_blocks(ROOT / "docs" / "api.md")
    assert len(blocks) >= 5 and any("fit.fits" in b for b in blocks)
    monkeypatch.chdir(ROOT)  # the trace example names a committed folder from the checkout's root
    namespace: dict[str, object] = {}
    for block in blocks:  # in order, in one namespace, as a reader runs them
        exec(compile(block, "docs/api.md", "exec"), namespace)  # noqa: S102 - the page's own examples


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    main([*argv, "--json", "-"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("fit", "argv"), [
    (lambda: bisect_smem.fit_bytes(100_000, static_bytes=1000, threads=256),
     ["fit", "100000", "--static", "1000", "--threads", "256", "--no-local"]),
    (lambda: bisect_smem.fit_tile(["128x256x64", (128, 128, 64)], dtype="bf16", options={"schedule": "pingpong"}),
     ["fit", "--tile", "128x256x64", "--tile", "128x128x64", "--dtype", "bf16", "--schedule", "pingpong", "--no-local"]),
    (lambda: bisect_smem.fit_triton(128, 256, 64, num_stages=3, num_warps=8, targets=["sm_90", "sm_120"]),
     ["fit", "--tile", "128x256x64", "--rule", "triton", "--stages", "3", "--warps", "8", "--arch", "9.0", "--arch",
      "12.0", "--no-local"]),
    (lambda: bisect_smem.fit_launcher(dtype="bf16", options={"fusion": "finalize"}, targets="sm_90"),
     ["fit", "--launcher", "trtllm-moe", "--dtype", "bf16", "--fusion", "finalize", "--arch", "9.0", "--no-local"]),
    (lambda: bisect_smem.fit_bytes(200_000, targets=bisect_smem.read_limits(H200_REPORT)),
     ["fit", "200000", "--target", str(H200_REPORT)]),
], ids=["bytes", "cutlass-tiles", "triton-config", "launcher", "saved-report"])
def test_the_api_answers_what_the_command_line_answers(fit, argv: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    answer = fit()
    document = _cli_json(argv, capsys)
    assert [to_jsonable(r) for r in answer.results] == document["results"] and answer.results
    assert answer.source == document["source"]


def test_a_trace_is_explained_as_fit_explains_it(capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.render.trace import render_json

    explained = bisect_smem.explain_trace(TRACE, "sm_120")
    assert json.loads(render_json(explained)) == _cli_json(["fit", "--trace", str(TRACE), "--arch", "12.0"], capsys)
    assert isinstance(explained, bisect_smem.TraceExplanation)


def test_measured_limits_are_the_simulated_devices() -> None:
    a100, h200 = bisect_smem.measure_limits(simulate=["a100", "h200"])
    assert (a100.optin_limit_bytes, h200.optin_limit_bytes) == (166912, 232448)
    assert bisect_smem.fit_bytes(200_000, targets=[a100, h200]).results[0].verdict == "does not fit"


def test_without_a_gpu_measuring_is_backend_unavailable() -> None:
    if gpu_unavailable_reason() is None:
        pytest.skip("a GPU is visible here: it would be measured")
    with pytest.raises(BackendUnavailable):
        bisect_smem.measure_limits()


@pytest.mark.parametrize(("call", "says"), [
    (lambda: bisect_smem.fit_bytes(-5), "dynamic bytes must be >= 0 (got -5)"),
    (lambda: bisect_smem.fit_bytes("100K"), "dynamic_bytes must be a whole number (got '100K')"),  # type: ignore[arg-type]
    (lambda: bisect_smem.fit_bytes(1000, threads=0), "threads must be in 1..1024 (got 0)"),
    (lambda: bisect_smem.fit_tile("1x2"), "must look like 128x256x64"),
    (lambda: bisect_smem.fit_tile("128x256x64", stages=0), "stages must be >= 1"),
    (lambda: bisect_smem.fit_tile("128x256x64", library="cublas"), "unknown library 'cublas'; valid: cutlass, triton"),
    (lambda: bisect_smem.fit_tile("128x256x64", options={"num_warps": 4}), "has no option 'num_warps'"),
    (lambda: bisect_smem.fit_tile("128x256x64", options={"schedule": "fast"}), "schedule must be one of"),
    (lambda: bisect_smem.fit_tile("128x256x64", options={"grouped": "yes"}), "grouped is on or off"),
    (lambda: bisect_smem.fit_triton(128, 256, 64, num_warps=3), "--warps must be one of 1, 2, 4, 8, 16 (got 3)"),
    (lambda: bisect_smem.profile("sm_99"), "unknown profile 'sm_99'; valid: sm_70"),
    (lambda: bisect_smem.fit_bytes(1000, targets="volta2"), "unknown profile 'volta2'"),
    (lambda: bisect_smem.read_limits("/nonexistent.json"), "not a readable report or baseline"),
    (lambda: bisect_smem.fit_cubin("/nonexistent.cubin"), "cannot read /nonexistent.cubin"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_bad_values_are_usage_errors_naming_them(call, says: str) -> None:
    with pytest.raises((UsageError, BaselineError), match=re.escape(says)) as raised:
        call()
    assert isinstance(raised.value, BisectSmemError) and raised.value.exit_code == 2


def test_the_api_prints_and_writes_nothing() -> None:
    # A library call says nothing on stdout or stderr and writes no file: it imports none of the wings that do.
    source = (ROOT / "bisect_smem" / "api.py").read_text()
    for wing in ("bisect_smem.app.cli", "bisect_smem.app.outputs", "bisect_smem.app.render"):
        assert wing not in source


@pytest.mark.parametrize("ptx", [False, True], ids=["cubin", "ptx"])
def test_a_compiled_kernel_fits_as_fit_says(ptx: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fit.test_fit import KERNELS
    from tests.nvrtc import NvrtcUnavailable, compile_source

    try:
        ok, log, _, out = compile_source(KERNELS, "sm_90", [], cubin=not ptx)
    except NvrtcUnavailable as exc:
        pytest.fail(f"NVRTC must be installed for the compile checks: {exc}")
    assert ok, log
    path = tmp_path / ("kernels.ptx" if ptx else "kernels.cubin")
    path.write_bytes(out.rstrip(b"\0") if ptx else out)
    answer = bisect_smem.fit_cubin(path, "small", ptx=ptx, dynamic_bytes=1000, targets="sm_90")
    document = _cli_json(["fit", "--ptx" if ptx else "--cubin", str(path), "--kernel", "small", "--dynamic", "1000",
                          "--arch", "9.0", "--no-local"], capsys)
    assert [to_jsonable(r) for r in answer.results] == document["results"]
    assert answer.source == document["source"] and "static" in answer.source
    assert answer.request.static_bytes > 0


def test_a_third_librarys_rule_is_asked_through_the_api_by_its_own_options(monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.analysis.fit.rules import RULES
    from tests.fit.toy.rule import ToyRule

    rule = ToyRule()
    monkeypatch.setitem(RULES, rule.name, rule)  # the one registry line
    answer = bisect_smem.fit_tile("128x128x64", library="toy", options={"toy_depth": 3}, targets="sm_90")
    document = _cli_json(["fit", "--tile", "128x128x64", "--rule", "toy", "--toy-depth", "3", "--arch", "sm_90",
                          "--no-local"], capsys)
    assert [to_jsonable(r) for r in answer.results] == document["results"] and answer.source == "depth 3: Toy 0.1"
    with pytest.raises(UsageError, match="Toy has no option 'warps'"):
        bisect_smem.fit_tile("128x128x64", library="toy", options={"warps": 4})
