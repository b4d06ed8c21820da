"""bisect-smem trace through the real entry point: the command's output and exit code pass through, every
process it starts inherits the collector, an injection already set or a missing command is one line and a
documented code, signals reach the command, and a recorded trace is explained (text and schema-valid JSON)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bisect_smem.app.render.trace import WIDTH
from tests.conftest import assert_valid, one_error, run_main
from tests.paths import H200_REPORT
from tests.trace.fakes import need_cc


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    need_cc()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg"))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)


def after_cupti_line(err: str) -> str:
    """stderr without the line that names the libcupti, which comes before the command runs."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("bisect-smem trace: libcupti"))


@pytest.fixture
def cupti(fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A libcupti to find (the fake): trace needs one before it runs anything."""
    monkeypatch.setenv("BISECT_SMEM_CUPTI_LIBRARY", str(fakes / "libcupti.so.13"))


def test_exit_code_and_output_pass_through(tmp_path: Path, cupti: None, capfd: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main

    code = main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", "sh", "-c", "echo from-the-command; exit 7"])
    out = capfd.readouterr().out
    assert code == 7 and out.startswith("from-the-command\n") and "bisect-smem trace: 0 processes" in out


@pytest.mark.parametrize(("script", "warned"), [
    ('printf "{\\"event\\":\\"process\\",\\"format\\":2,\\"pid\\":1}\\nnot json\\n" > "$BISECT_SMEM_TRACE_DIR/1.jsonl"',
     "warning: lines that are not JSON: 1 skipped (the first: 1.jsonl line 2)"),
    ('rm -r "$BISECT_SMEM_TRACE_DIR"', "could not be explained"),
], ids=["a-bad-line", "the-folder-removed"])
def test_the_exit_code_is_the_command_s_whatever_its_trace_holds(tmp_path: Path, cupti: None, script: str,
                                                                  warned: str,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main

    code = main(["trace", "--no-measure", "--strict", "--out", str(tmp_path / "t"), "--", "sh", "-c",
                 f"{script}; exit 7"])
    out, err = capfd.readouterr()
    assert code == 7 and warned in err, err
    assert ("bisect-smem trace: 1 process" in out) == ("not JSON" in warned)


def test_every_process_inherits_the_collector(tmp_path: Path, cupti: None, capfd: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main

    show = "import os; print(os.environ['CUDA_INJECTION64_PATH'], os.environ['BISECT_SMEM_TRACE_DIR'])"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {show!r}], check=True)"
    code = main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", sys.executable, "-c", child])
    lines = capfd.readouterr().out.splitlines()
    assert code == 0
    injected, folder = lines[0].split(" ")
    assert Path(injected).name.startswith("collector-") and Path(injected).is_file()
    assert folder == str((tmp_path / "t").resolve())


def test_an_injection_already_set_is_refused(tmp_path: Path, cupti: None, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so")
    code, out, err = run_main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", "true"], capsys)
    assert code == 2 and "CUDA_INJECTION64_PATH is already set" in one_error(err) and not (tmp_path / "t").exists()


@pytest.mark.parametrize("measure", [["--no-measure"], ["--simulate", "h200"]])
def test_a_command_not_found(tmp_path: Path, cupti: None, measure: list[str],
                             capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["trace", *measure, "--out", str(tmp_path / "t"), "--", "no-such-command-x"], capsys)
    assert code == 127 and one_error(after_cupti_line(err)) == "error: no-such-command-x: command not found"
    assert not (tmp_path / "t").exists()  # nothing ran in it: the claim is given up


def test_a_command_that_cannot_be_run(tmp_path: Path, cupti: None, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")  # not executable
    code, _, err = run_main(["trace", "--simulate", "h200", "--out", str(tmp_path / "t"), "--", str(script)], capsys)
    assert code == 126 and one_error(after_cupti_line(err)) == f"error: {script}: permission denied (not executable)"
    assert not (tmp_path / "t").exists()  # its limits were kept, and given up with the claim


def test_no_libcupti_says_what_to_install(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_smem.devices.collector import libcupti

    monkeypatch.setattr(libcupti, "candidates", lambda *a, **k: [])
    code, _, err = run_main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", "true"], capsys)
    assert code == 3 and "pip install nvidia-cuda-cupti" in one_error(err)


def test_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["trace", "--no-measure"], capsys)
    assert code == 2 and "trace needs a command" in one_error(err)


def test_an_out_folder_that_holds_a_trace_is_never_overwritten(recorded: Path, cupti: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    before = {p.name: p.read_bytes() for p in recorded.iterdir()}
    code, _, err = run_main(["trace", "--no-measure", "--out", str(recorded), "--", "true"], capsys)
    assert code == 2 and "already holds a trace" in one_error(err)
    assert {p.name: p.read_bytes() for p in recorded.iterdir()} == before


def test_a_recorded_trace_explained_on_a_simulated_h200_and_sm_120(recorded: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["trace", "--from", str(recorded), "--simulate", "h200", "--arch", "12.0"], capsys)
    assert code == 0 and all(len(line) <= WIDTH for line in out.splitlines())
    assert "232449 B (cuFuncSetAttribute: invalid value)" in out and "over by 1 B" in out
    assert "on sm_120: 4 request(s) would not fit" in out
    assert out.index("over by 67552 B") < out.index("over by 47104 B") < out.index("over by 1 B")


def test_strict_and_the_json_summary(recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "s.json"
    code, _, _ = run_main(["trace", "--from", str(recorded), "--simulate", "rtx-pro-6000", "--strict", "--json",
                           str(summary)], capsys)
    document = json.loads(summary.read_text())
    assert code == 1
    assert_valid(document, "trace")
    assert {r["requested_bytes"] for r in document["requests"] if r["here"]["fits"] is False} == \
        {300000, 279552, 232449, 200000}


def test_the_ctypes_collector_when_asked_for_by_name(tmp_path: Path, cupti: None, monkeypatch: pytest.MonkeyPatch,
                                                    capfd: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main
    from bisect_smem.devices.collector import build

    monkeypatch.setenv("BISECT_SMEM_COLLECTOR", "python")  # even where cc would build the C collector
    show = "import os, sitecustomize; print(os.environ.get('CUDA_INJECTION64_PATH'), sitecustomize.__file__)"
    code = main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", sys.executable, "-c", show])
    injected, site = capfd.readouterr().out.splitlines()[0].split(" ")
    assert code == 0 and injected == "None" and site == str(build.SOURCE_DIR / "fallback" / "sitecustomize.py")
    code = main(["trace", "--no-measure", "--out", str(tmp_path / "u"), "--", "sh", "-c", "true"])
    assert code == 3 and "(BISECT_SMEM_COLLECTOR=python)" in one_error(capfd.readouterr().err)


def test_python_commands_get_the_ctypes_collector_without_a_compiler(tmp_path: Path, cupti: None,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capfd: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main
    from bisect_smem.devices.collector import build

    def no_compiler(*_: object) -> Path:
        raise build.CollectorBuildError("no C compiler (cc, gcc or clang) to build the collector")

    monkeypatch.setattr(build, "collector_library", no_compiler)
    show = "import os, sitecustomize; print(os.environ.get('CUDA_INJECTION64_PATH'), sitecustomize.__file__)"
    code = main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", sys.executable, "-c", show])
    injected, site = capfd.readouterr().out.splitlines()[0].split(" ")
    assert code == 0 and injected == "None" and site == str(build.SOURCE_DIR / "fallback" / "sitecustomize.py")
    code = main(["trace", "--no-measure", "--out", str(tmp_path / "u"), "--", "sh", "-c", "true"])
    err = capfd.readouterr().err
    assert code == 3 and "only Python commands are traced" in one_error(err)


def test_the_summary_names_the_cutlass_kernel_and_what_fit_says(recorded: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.analysis.demangle import demangler

    if demangler() is None:
        pytest.skip("no c++filt to demangle with")
    report = H200_REPORT  # measured on the H200
    code, out, _ = run_main(["trace", "--from", str(recorded), "--report", str(report), "--arch", "12.0"], capsys)
    assert code == 0 and "limits of the GPU it ran on: NVIDIA H200" in out
    block = out[out.index("void cutlass::device_kernel<…MainloopSm90TmaGmmaWarpSpecialized<5,…>…>(…)"):]
    assert "asked MaxDynamicSharedMemorySize = 279552 B (cudaFuncSetAttribute: invalid value)" in block
    assert "over by 47104 B" in block and "5 stages make SharedStorageSize 279552 B, the same as asked" in block


def test_a_killed_command_keeps_its_trace(tmp_path: Path, fakes: Path, collector: Path, cupti: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # The command plays CUDA calls through the fakes, then kills itself: 128+9, and every line it wrote stays.
    play = f"{sys.executable} {Path(__file__).with_name('fake_process.py')} {fakes} {collector} killed"
    code, out, _ = run_main(["trace", "--no-measure", "--out", str(tmp_path / "t"), "--", "sh", "-c", play], capsys)
    assert code == 128 + 9
    assert "1 process, 3 kernels, 3 attribute set(s), 3 refusal(s)" in out


def test_from_explains_against_the_limits_recorded_with_the_trace(tmp_path: Path, fakes: Path, collector: Path,
                                                                  cupti: None, capsys: pytest.CaptureFixture[str]) -> None:
    # Traced against a simulated RTX PRO 6000, read back with --from and no device: the same limits, not
    # this machine's (the test machine has no GPU, so only the record can give them).
    out = tmp_path / "t"
    play = f"{sys.executable} {Path(__file__).with_name('fake_process.py')} {fakes} {collector} all"
    code, live, _ = run_main(["trace", "--simulate", "rtx-pro-6000", "--out", str(out), "--", "sh", "-c", play], capsys)
    assert code == 0 and "accepts at most 101376 B" in live
    code, replayed, _ = run_main(["trace", "--from", str(out)], capsys)
    kept = f"  (the trace is kept in {out})\n"
    assert code == 0 and live.endswith(kept)
    assert replayed == live.removesuffix(kept) + "  (limits as recorded with the trace, in limits.json)\n"
    recorded = json.loads((out / "limits.json").read_text())
    assert recorded["here"]["optin_limit_bytes"] == 101376 and recorded["here"]["compute_capability"] == [12, 0]
    assert (out / "limits.json").stat().st_mode & 0o777 == 0o600  # as private as the trace beside it
    # The folder now holds a trace: a second trace into it is refused, and leaves it as it is.
    code, _, err = run_main(["trace", "--no-measure", "--out", str(out), "--", "true"], capsys)
    assert code == 2 and "already holds a trace" in one_error(err)


def test_from_without_recorded_limits_measures_nothing_and_says_so(recorded: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["trace", "--from", str(recorded)], capsys)
    assert code == 0 and "limits: none known here" in out
    assert out.endswith("(no limits were recorded with this trace: give --report or --simulate)\n")


@pytest.mark.parametrize("content, says", [
    ("{", "line 1 column 2"),
    ('{"format": 2, "here": {}}', "not the limits trace records"),
    ('{"format": 1, "here": {"name": "x"}}', "not a record of limits"),
])
def test_damaged_recorded_limits_are_one_line(recorded: Path, tmp_path: Path, content: str, says: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "copy"
    folder.mkdir()
    for path in recorded.glob("*.jsonl"):
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "limits.json").write_text(content)
    code, _, err = run_main(["trace", "--from", str(folder)], capsys)
    assert code == 2 and says in one_error(err) and "limits.json" in one_error(err)


def test_recorded_limits_refuse_values_no_device_has(recorded: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.analysis.fit.targets import Target, target_record
    from bisect_smem.core.profiles import find_profile

    good = target_record(Target.from_profile(find_profile("9.0")))
    for field, value in (("optin_limit_bytes", -1), ("compute_capability", [9]), ("granule_bytes", None),
                         ("kind", "guessed")):
        folder = tmp_path / field
        folder.mkdir()
        (folder / "limits.json").write_text(json.dumps({"format": 1, "here": {**good, field: value}}))
        code, _, err = run_main(["trace", "--from", str(folder)], capsys)
        assert code == 2 and str(folder / "limits.json") in one_error(err), (field, err)


def test_arch_takes_cutlass_s_target_names_as_fit_does(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = run_main(["trace", "--from", str(recorded), "--simulate", "h200", "--arch", "12.0"], capsys)
    for name in ("sm_120a", "sm_120f"):
        assert run_main(["trace", "--from", str(recorded), "--simulate", "h200", "--arch", name], capsys) == plain
