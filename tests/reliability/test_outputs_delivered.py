"""Every output goes through one writer (app/outputs/writer.py) and one delivery (app/outputs/delivery.py): the requested
files are written before stdout, so a stdout that fails costs no file; a file is decided by its type,
never by its path; read-only files and this run's own inputs are never replaced; a FIFO without a reader
is refused before measuring; path parts taken from data stay in the folder asked for."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.app.cli import interrupts
from bisect_smem.app.outputs import writer as output
from tests.conftest import one_error
from tests.conftest import run_main as run
from tests.paths import H200_REPORT, ROOT

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
PY = f"{sys.executable} -m bisect_smem"



def shell(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=ENV, timeout=120, cwd=cwd)


@pytest.mark.parametrize("stdout", ["| true", "> /dev/full"], ids=["broken-pipe", "full"])
def test_a_failing_stdout_costs_no_requested_file(stdout: str, tmp_path: Path) -> None:
    plot = "--plot p.png" if _has_matplotlib() else ""
    done = shell(f"set -o pipefail; {PY} --simulate h200 --json r.json --save-baseline D {plot} {stdout}", tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["devices"][0]["index"] == 0
    (baseline,) = (tmp_path / "D").rglob("*.json")
    assert json.loads(baseline.read_text())["schema"] == "bisect_smem/baseline/v1"
    if plot:
        assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert done.stderr.strip().splitlines()[-1].startswith("error: ")


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def test_head_never_loses_the_report(tmp_path: Path) -> None:
    for attempt in range(5):
        target = tmp_path / f"r{attempt}.json"
        done = shell(f"{PY} --simulate h200 --simulate a100 --json {target} | head -1", tmp_path)
        assert "Traceback" not in done.stderr and json.loads(target.read_text())["devices"], done.stderr


def test_a_regular_file_anywhere_is_replaced_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Decided by type: a regular file under /dev/shm is a file like any other, replaced, never appended to.
    folder = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else tmp_path
    target = folder / f"bisect-smem-test-{os.getpid()}.json"
    try:
        for _ in range(2):
            assert run(["--simulate", "h200", "--json", str(target)], capsys)[0] == 0
        assert json.loads(target.read_text())["schema"] == "bisect_smem/report/v1"
    finally:
        target.unlink(missing_ok=True)


def test_the_regular_file_behind_stdout_is_appended_to(tmp_path: Path) -> None:
    # Replaced, the file would hold the report and the text would go to the unlinked old one.
    done = shell(f"{PY} --simulate h200 --json /dev/stdout > out.txt", tmp_path)
    text = (tmp_path / "out.txt").read_text()
    report, _, rest = text.partition("\n}\n")
    assert done.returncode == 0 and json.loads(report + "\n}")["devices"] and rest.startswith("device 0: "), text[:300]


def test_a_fifo_without_a_reader_is_refused_before_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.run import runner

    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    monkeypatch.setattr(runner, "run_all", lambda *a, **k: pytest.fail("measured before the FIFO was checked"))
    code, _, err = run(["--simulate", "h200", "--json", str(fifo)], capsys)
    assert code == 2 and one_error(err) == f"error: cannot write the report to {fifo}: a FIFO with no reader"


def test_fit_json_into_a_fifo_without_a_reader_does_not_block(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    code, _, err = run(["fit", "1000", "--no-local", "--json", str(fifo)], capsys)
    assert code == 2 and "a FIFO with no reader" in one_error(err)


@pytest.mark.parametrize("option", ["--json", "--plot", "--save-baseline"])
def test_a_symlink_loop_as_output_is_refused_before_measuring(option: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.png"
    loop.symlink_to(loop)
    if option == "--plot":
        pytest.importorskip("matplotlib")
    code, out, err = run(["--simulate", "h200", option, str(loop)], capsys)
    assert (code, out) == (2, "") and "Too many levels of symbolic links" in one_error(err)


def test_fit_json_into_a_symlink_loop_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    code, _, err = run(["fit", "1000", "--no-local", "--json", str(loop)], capsys)
    assert code == 2 and "Too many levels of symbolic links" in one_error(err)


@pytest.mark.parametrize("option", ["--json", "--plot", "fit"])
def test_a_read_only_file_is_never_replaced(option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / ("p.png" if option == "--plot" else "r.json")
    target.write_text("keep")
    target.chmod(0o444)
    if option == "--plot":
        pytest.importorskip("matplotlib")
    args = ["fit", "1000", "--no-local", "--json", str(target)] if option == "fit" else \
        ["--simulate", "h200", option, str(target)]
    code, _, err = run(args, capsys)
    assert code == 2 and one_error(err).endswith(f"{target} is read-only") and target.read_text() == "keep"


def test_an_input_is_never_replaced_by_an_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "r.json"
    report.write_text(H200_REPORT.read_text())
    alias = tmp_path / "alias.json"
    os.link(report, alias)
    for target in (report, alias):
        code, _, err = run(["--simulate", str(report), "--json", str(target)], capsys)
        assert code == 2 and f"it is {report}, which this run reads" in one_error(err)
    assert report.read_text() == H200_REPORT.read_text()


def test_save_and_compare_in_one_folder_are_refused_before_measuring(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "b"
    assert run(["--simulate", "h200", "--save-baseline", str(folder)], capsys)[0] == 0
    (path,) = folder.rglob("*.json")
    before = path.read_bytes()
    code, out, err = run(["--simulate", "h200,fewer=1", "--save-baseline", str(folder), "--force",
                          "--compare", str(folder)], capsys)
    assert (code, out) == (2, "") and "are one folder" in one_error(err) and path.read_bytes() == before


def test_the_comparison_runs_before_the_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, new = tmp_path / "good", tmp_path / "new"
    assert run(["--simulate", "h200", "--save-baseline", str(good)], capsys)[0] == 0
    code, out, err = run(["--simulate", "h200,fewer=1", "--save-baseline", str(new), "--force",
                          "--compare", str(good)], capsys)
    assert code == 1 and " 0 regressed" not in out and "regressed" in out and "saved baseline" in err


@pytest.mark.parametrize("evil", ["../../outside/x", "/tmp/x", "..", "a/../../b", "\x1b[2J"])
def test_a_driver_version_from_data_stays_in_the_folder(evil: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "outside").mkdir()
    doc = json.loads(H200_REPORT.read_text())
    doc["devices"][0]["context"]["nvml_driver_version"] = evil
    report = tmp_path / "evil.json"
    report.write_text(json.dumps(doc))
    folder = tmp_path / "b"
    code, _, err = run(["--simulate", str(report), "--save-baseline", str(folder), "--force"], capsys)
    assert code in (0, 4) and "saved baseline" in err, err
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != report]
    (baseline,) = written
    assert baseline.parent.parent == folder and not baseline.name.startswith(".") and baseline.suffix == ".json"
    assert json.loads(baseline.read_text())["provenance"]["driver_version"] == evil  # the data is kept as it was


def test_a_failed_save_leaves_no_empty_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    folder = tmp_path / "a" / "b"
    code, _, err = run(["--simulate", "h200", "--save-baseline", str(folder)], capsys)
    assert code == 2 and "cannot write the baseline to" in err and "No space left on device" in err
    assert not (tmp_path / "a").exists()


def test_a_full_disk_names_the_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    code, _, err = run(["--simulate", "h200", "--plot", str(tmp_path / "p.png")], capsys)
    assert code == 2 and one_error(err) == f"error: cannot write the plot to {tmp_path / 'p.png'}: No space left on device"


def test_fit_full_disk_names_the_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    code, _, err = run(["fit", "1000", "--no-local", "--json", str(tmp_path / "f.json")], capsys)
    assert code == 2 and "cannot write the result to" in one_error(err)


def test_a_blank_plot_is_refused_or_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    code, out, err = run(["--simulate", "h200", "--level", "quick", "--plot", str(tmp_path / "p.png")], capsys)
    assert (code, out) == (2, "") and "--level quick does not measure" in one_error(err)
    report = tmp_path / "r.json"
    doc = json.loads(H200_REPORT.read_text())
    doc["devices"][0]["measured"]["residency"] = []
    report.write_text(json.dumps(doc))
    code, _, err = run(["--simulate", str(report), "--plot", str(tmp_path / "p.png")], capsys)
    assert "warning: the plot" in err and "shows nothing" in err and (tmp_path / "p.png").exists()


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["fit", "--help"], ["merge", "--help"]])
def test_help_and_version_into_a_full_stdout_are_exit_2(args: list[str], tmp_path: Path) -> None:
    done = shell(f"{PY} {' '.join(args)} > /dev/full", tmp_path)
    assert done.returncode == 2 and "No space left on device" in done.stderr


@pytest.mark.parametrize(("args", "option"), [
    (["--json", "m.json", "merge", str(H200_REPORT)], "--json"),
    (["--quiet", "fit", "1000", "--no-local"], "--quiet"),
    (["--simulate=h200", "profiles"], "--simulate"),
    (["--level", "full", "--strict", "merge", str(H200_REPORT)], "--level, --strict"),
])
def test_options_before_a_subcommand_are_refused(args: list[str], option: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(args, capsys)
    assert (code, out) == (2, "") and one_error(err).startswith(f"error: {option} ")


def test_a_signal_after_the_report_was_written_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    real = output.write_atomic

    def then_terminated(path, content, exclusive=False, what=None):
        real(path, content, exclusive, what)
        raise interrupts.Signalled(signal.SIGTERM)

    monkeypatch.setattr(output, "write_atomic", then_terminated)
    report = tmp_path / "r.json"
    code, _, err = run(["--simulate", "h200", "--json", str(report)], capsys)
    assert code == 143 and "no report was written" not in err
    assert one_error(err) == f"error: SIGTERM received; workers ended, written before it: {report}"
    assert json.loads(report.read_text())["devices"]


def test_nothing_written_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.run import runner

    def interrupted(*_args, **_kwargs):
        raise interrupts.Signalled(signal.SIGTERM)

    monkeypatch.setattr(runner, "run_all", interrupted)
    code, _, err = run(["--simulate", "h200", "--json", str(tmp_path / "r.json")], capsys)
    assert code == 143 and one_error(err).endswith("no report was written") and not (tmp_path / "r.json").exists()


def test_a_special_file_is_decided_by_its_type() -> None:
    assert output.check_writable(Path("/dev/null")) is None
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("second", ["--prom", "--nfd", "--plot", "link", "hard-link", "dotted"])
def test_two_outputs_onto_one_file_are_refused_before_measuring(second: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / ("r.svg" if second == "--plot" else "r.json")
    report.write_text("keep")
    alias = {"link": tmp_path / "link.json", "hard-link": tmp_path / "hard.json",
             "dotted": tmp_path / "sub" / ".." / report.name}.get(second, report)
    if second == "link":
        alias.symlink_to(report)
    elif second == "hard-link":
        os.link(report, alias)
    elif second == "dotted":
        (tmp_path / "sub").mkdir()
    option = second if second.startswith("--") else "--prom"
    code, out, err = run(["--simulate", "h200", "--json", str(report), option, str(alias)], capsys)
    assert (code, out) == (2, "") and "is written there too" in one_error(err) and report.read_text() == "keep"


def test_two_outputs_onto_one_new_file_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "new.json"
    code, out, err = run(["--simulate", "h200", "--json", str(target), "--nfd", str(target)], capsys)
    assert (code, out) == (2, "") and "is written there too" in one_error(err) and not target.exists()


def test_a_baseline_onto_the_report_just_written_is_refused(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "b"
    assert run(["--simulate", "h200", "--save-baseline", str(folder)], capsys)[0] == 0
    (path,) = folder.rglob("*.json")
    code, _, err = run(["--simulate", "h200", "--json", str(path), "--save-baseline", str(folder), "--force"], capsys)
    assert code == 2 and "is written there too" in one_error(err)
    assert json.loads(path.read_text())["schema"] == "bisect_smem/report/v1"


def test_the_same_special_file_may_take_several_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["--simulate", "h200", "--json", os.devnull, "--prom", os.devnull, "--nfd", os.devnull], capsys)
    assert code == 0 and err == ""
