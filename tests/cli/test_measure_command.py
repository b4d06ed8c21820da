"""The measuring command: every output target, empty paths, options that would be ignored, baselines
saved exclusively and only from complete runs, messages that say what happened, the progress line, and
the help's defaults read from where they are defined."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import build_parser, main
from bisect_smem.app.outputs import writer as output
from bisect_smem.app.run.progress import ProgressLine
from bisect_smem.core.errors import OutputError
from bisect_smem.core.levels import DEFAULT_LEVEL, LEVELS
from bisect_smem.core.search import DEFAULT_CONFIRM


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--json", ""], "--json was given an empty path"),
    (["--plot", ""], "--plot was given an empty path"),
    (["--save-baseline", ""], "--save-baseline was given an empty path"),
    (["--compare", ""], "--compare was given an empty path"),
    (["--force"], "--force only applies to --save-baseline"),
    (["--allow-missing"], "--allow-missing only applies to --compare"),
    (["--inline", "--probe-timeout", "2"], "--inline measures in this process"),
    (["--inline", "--device-timeout", "9"], "drop --probe-timeout/--device-timeout or drop --inline"),
])
def test_options_that_would_be_ignored_are_usage_errors(args: list[str], fragment: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["--simulate", "h200", *args], capsys)
    assert code == 2 and out == ""
    assert fragment in one_error_line(err)


def test_a_repeated_simulate_key_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["--simulate", "h200,hole=1,hole=2"], capsys)
    assert code == 2 and "hole is given twice" in one_error_line(err)


def test_compare_with_a_file_says_it_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text("{}")
    code, _, err = run_main(["--simulate", "h200", "--compare", str(good)], capsys)
    assert code == 2 and f"baseline folder {good} is a file, not a folder" in one_error_line(err)


def test_save_baseline_into_a_file_is_refused_before_measuring(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = run_main(["--simulate", "h200", "--save-baseline", str(blocker / "sub")], capsys)
    assert code == 2 and out == "" and "is a file, not a folder" in one_error_line(err)


@pytest.mark.parametrize("option", ["--save-baseline", "--compare"])
def test_a_device_node_as_a_baseline_folder_says_what_it_is(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    for path in ("/dev/null", "/dev/null/sub") if option == "--save-baseline" else ("/dev/null",):
        code, out, err = run_main(["--simulate", "h200", option, path], capsys)
        line = one_error_line(err)
        assert code == 2 and out == "" and "/dev/null is a character device, not a folder" in line, line


def test_save_baseline_into_an_unwritable_folder_is_refused_before_measuring(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == tmp_path else real_access(p, mode))
    code, out, err = run_main(["--simulate", "h200", "--save-baseline", str(tmp_path / "new")], capsys)
    assert code == 2 and out == "" and f"folder {tmp_path} is not writable" in one_error_line(err)


def test_an_existing_baseline_is_refused_before_measuring_and_before_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    saved = tmp_path / "b"
    assert run_main(["--simulate", "h200", "--save-baseline", str(saved)], capsys)[0] == 0
    from bisect_smem.app.run import runner

    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("measured although the baseline exists"))
    report = tmp_path / "r.json"
    code, out, err = run_main(["--simulate", "h200", "--save-baseline", str(saved), "--json", str(report)], capsys)
    assert code == 2 and out == "" and "exists; use --force" in one_error_line(err)
    assert not report.exists()


def test_two_writers_of_one_baseline_cannot_both_succeed(tmp_path: Path) -> None:
    target = tmp_path / "600.1.json"
    output.write_atomic(target, "first\n", exclusive=True)
    with pytest.raises(OutputError, match="it exists"):
        output.write_atomic(target, "second\n", exclusive=True)
    assert target.read_text() == "first\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["600.1.json"]


def test_a_run_with_error_rows_saves_no_baseline_without_force(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "b"
    code, _, err = run_main(["--simulate", "h200,sticky=200000", "--max-restarts", "0", "--save-baseline", str(saved)], capsys)
    assert code == 2 and "ERROR rows" in err and "--force" in err
    assert not saved.exists() or not any(saved.rglob("*.json"))
    code, _, err = run_main(["--simulate", "h200,sticky=200000", "--max-restarts", "0", "--save-baseline", str(saved),
                                "--force"], capsys)
    assert code == 4 and "saved baseline" in err and len(list(saved.rglob("*.json"))) == 1


def test_force_onto_a_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "b"
    assert run_main(["--simulate", "h200", "--save-baseline", str(saved)], capsys)[0] == 0
    (path,) = saved.rglob("*.json")
    path.unlink()
    path.mkdir()
    code, _, err = run_main(["--simulate", "h200", "--save-baseline", str(saved), "--force"], capsys)
    assert code == 2 and f"cannot write the baseline to {path}" in one_error_line(err.replace("\n", "\n")
                                                                                   .split("saved")[0])


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_files_get_the_umasks_mode(tmp_path: Path, umask: int, capsys: pytest.CaptureFixture[str]) -> None:
    old = os.umask(umask)
    try:
        out = tmp_path / "r.json"
        assert run_main(["--simulate", "h200", "--json", str(out)], capsys)[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_an_existing_files_mode_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    out.chmod(0o640)
    output.write_atomic(out, "new")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640


def test_a_symlink_is_written_through(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run_main(["--simulate", "h200", "--json", str(link)], capsys)[0] == 0
    assert link.is_symlink() and json.loads(real.read_text())["schema"] == "bisect_smem/report/v1"


def test_a_fifo_is_written_not_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import threading
    import time

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # The reader is there before the run starts: a FIFO without one is refused before measuring.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(reader, True)
    got: list[bytes] = []

    def read() -> None:
        while True:
            chunk = os.read(reader, 1 << 16)
            if chunk:
                got.append(chunk)
            elif got:
                return
            else:
                time.sleep(0.001)  # no writer has connected yet: a FIFO reads as empty until one does

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        code = run_main(["--simulate", "h200", "--json", str(fifo)], capsys)[0]
        thread.join(timeout=30)
    finally:
        os.close(reader)
    assert code == 0 and stat.S_ISFIFO(fifo.stat().st_mode)
    assert json.loads(b"".join(got))["devices"][0]["index"] == 0


@pytest.mark.parametrize("target", ["/dev/null"])
def test_a_device_node_is_written_not_replaced(target: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = os.stat(target)
    assert run_main(["--simulate", "h200", "--json", target], capsys)[0] == 0
    after = os.stat(target)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


@pytest.mark.parametrize(("error", "text"), [(errno.ENOSPC, "No space left on device"),
                                             (errno.EROFS, "Read-only file system")])
def test_a_failed_baseline_write_is_one_line(tmp_path: Path, error: int, text: str,
                                             capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(fd: int) -> None:
        raise OSError(error, text)

    monkeypatch.setattr(os, "fsync", failing)
    code, _, err = run_main(["--simulate", "h200", "--save-baseline", str(tmp_path / "b")], capsys)
    assert code == 2 and "cannot write the baseline to" in err and text in err
    assert "Traceback" not in err and not list((tmp_path / "b").rglob("*.json"))


def test_a_read_only_folder_is_refused_before_measuring(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.statvfs

    class ReadOnly:
        def __init__(self, result: os.statvfs_result) -> None:
            self.f_flag = result.f_flag | os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda p: ReadOnly(real(p)) if Path(p) == tmp_path else real(p))
    code, out, err = run_main(["--simulate", "h200", "--json", str(tmp_path / "r.json")], capsys)
    assert code == 2 and out == "" and "read-only file system" in one_error_line(err)


def test_gave_up_with_no_restarts_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    main(["--simulate", "h200,sticky=200000", "--max-restarts", "0", "--json", str(out), "--quiet"])
    capsys.readouterr()
    error = json.loads(out.read_text())["devices"][0]["error"]
    assert "gave up after 0 restarts (--max-restarts 0)" in error and "1 restarts" not in error


def test_simulated_runs_honour_a_given_probe_timeout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code = main(["--simulate", "h200,hang=100000", "--probe-timeout", "1", "--max-restarts", "2",
                 "--json", str(out), "--quiet"])
    capsys.readouterr()
    dev = json.loads(out.read_text())["devices"][0]
    # the timeout given, not the default 5 s, ended the probes (a time bound would measure the machine's load)
    assert code == 4 and dev["events"] and all(e["what"] == "timeout" for e in dev["events"])
    assert all("did not finish within 1 s" in e["detail"] for e in dev["events"])


def test_help_lists_the_simulate_keys(capsys: pytest.CaptureFixture[str]) -> None:
    text = build_parser().format_help()
    for key in ("flaky=P", "hole=BYTES", "sticky=BYTES", "hang=BYTES", "seed=N", "optin=BYTES", "fewer=N",
                "smem_per_sm=BYTES", "reserved=BYTES"):
        assert key in text.replace("\n", " ").replace("  ", " "), key


class Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


@pytest.mark.parametrize(("term", "escape"), [("dumb", False), ("", False), ("xterm-256color", True)])
def test_progress_uses_escapes_only_on_capable_terminals(term: str, escape: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", term)
    sink = Sink()
    printer = ProgressLine(sink, interval_s=0.01)  # type: ignore[arg-type]
    printer(0, "default: probe 1 at 4096 B")
    import time

    time.sleep(0.1)
    printer.close()
    assert "probe 1 at 4096 B" in sink.text
    assert ("\033[K" in sink.text) == escape


def test_progress_shows_a_probe_that_keeps_running() -> None:
    printer = ProgressLine(Sink(), interval_s=60)  # type: ignore[arg-type]
    try:
        printer(0, "optin: probe 3 at 1000 B")
        printer(0, "optin: probe 4 at 2000 B")
        import time

        now = time.monotonic()
        assert printer.line(now) == "device 0: optin: probe 4 at 2000 B"
        assert printer.line(now + 3.2) == "device 0 (running 3 s): optin: probe 4 at 2000 B"
    finally:
        printer.close()


def test_help_shows_the_defaults_from_their_definitions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"default {DEFAULT_LEVEL}" in text and f"(default {DEFAULT_CONFIRM})" in text
    assert "{" + ",".join(LEVELS) + "}" in text
