"""Where a trace is kept, through the real entry point: a folder that holds a trace (running or done) is refused
with options that exist, each trace without --out gets a new numbered folder that the summary names, the folder
is 0700 and its files 0600, an --out too long for the collector is refused before anything runs, and the
notices a collector sends over the notify socket are kept in notices.jsonl."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.app.run import notices, trace_folder
from bisect_smem.devices.collector import build
from bisect_smem.devices.collector.environment import DIR_BYTES
from tests.conftest import one_error, run_main
from tests.trace.fakes import need_cc


@pytest.fixture(autouse=True)
def _environment(tmp_path_factory: pytest.TempPathFactory, fakes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_cc()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg"))
    monkeypatch.setenv("BISECT_SMEM_CUPTI_LIBRARY", str(fakes / "libcupti.so.13"))
    monkeypatch.delenv("CUDA_INJECTION64_PATH", raising=False)


def errors(err: str) -> str:
    return one_error("".join(line + "\n" for line in err.splitlines() if not line.startswith("bisect-smem trace:")))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("measure", [["--no-measure"], ["--simulate", "h200"]])
def test_a_second_trace_into_a_folder_in_use_or_done_is_refused(tmp_path: Path, measure: list[str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    # The first trace runs until the test writes a line to its command's stdin.
    first = subprocess.Popen([sys.executable, "-m", "bisect_smem", "trace", *measure, "--out", str(out), "--",
                              "sh", "-c", "echo started; read line"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert first.stdout is not None and first.stdout.readline() == "started\n"
    for when in ("running", "done"):
        before = sorted(p.name for p in out.iterdir())
        code, _, err = run_main(["trace", *measure, "--out", str(out), "--", "true"], capsys)
        message = errors(err)
        assert code == 2 and f"--out {out} already holds a trace" in message, when
        assert f"--from {out}" in message and "--force" not in message
        assert sorted(p.name for p in out.iterdir()) == before
        if when == "running":
            first.communicate("go\n", timeout=120)
            assert first.returncode == 0


def test_each_trace_without_out_gets_a_new_numbered_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bisect-smem-trace-7").mkdir()  # one more than the highest there, as nsys numbers its reports
    (tmp_path / "bisect-smem-trace-x").mkdir()
    kept = []
    for _ in range(2):
        code, out, _ = run_main(["trace", "--no-measure", "--", "true"], capsys)
        assert code == 0
        kept.append(re.search(r"\(the trace is kept in (\S+)\)\n$", out)[1])
    assert kept == [str(tmp_path / "bisect-smem-trace-8"), str(tmp_path / "bisect-smem-trace-9")]
    assert json.loads((tmp_path / "bisect-smem-trace-9" / trace_folder.CLAIM).read_text())["command"] == ["true"]


def test_with_the_json_summary_on_stdout_the_folder_is_said_on_stderr(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["trace", "--no-measure", "--json", "-", "--out", str(tmp_path / "t"), "--", "true"],
                              capsys)
    assert code == 0 and isinstance(json.loads(out), dict)
    assert err.splitlines()[-1] == f"bisect-smem trace: the trace is kept in {tmp_path / 't'}"


def test_the_folder_is_0700_and_the_tool_s_files_0600(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    code, _, _ = run_main(["trace", "--simulate", "h200", "--out", str(out), "--", "true"], capsys)
    assert code == 0 and mode(out) == 0o700
    assert {p.name: mode(p) for p in out.iterdir()} == {"trace.json": 0o600, "limits.json": 0o600}


def test_an_out_too_long_for_the_collector_is_refused_before_anything_runs(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    fits = tmp_path / ("d" * 200) / ("e" * (DIR_BYTES - 1 - len(str(tmp_path)) - 202))
    too_long = Path(str(fits) + "f")
    assert len(str(fits)) == DIR_BYTES - 1
    code, _, err = run_main(["trace", "--no-measure", "--out", str(too_long), "--", "touch", str(tmp_path / "ran")],
                            capsys)
    assert code == 2 and f"the collector takes at most {DIR_BYTES - 1}" in errors(err)
    assert not (tmp_path / "ran").exists() and not (tmp_path / ("d" * 200)).exists()


def test_the_collector_s_buffer_is_the_one_the_tool_checks() -> None:
    source = (build.SOURCE_DIR / "collector.c").read_text()
    assert re.search(r"#define BSM_DIR_MAX (\d+)", source)[1] == str(DIR_BYTES)


SENDS = """
import json, os, socket
name = os.environ["BISECT_SMEM_TRACE_NOTIFY"]
good = {"event": "unwritable", "pid": os.getpid(), "errno": 13, "path": "/t/1.jsonl", "command": "srv --port 1"}
with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
    for data in [json.dumps(good).encode(), b"not json", json.dumps({**good, "pid": "1"}).encode(),
                 json.dumps({**good, "event": "other"}).encode(), json.dumps({**good, "pid": True}).encode(),
                 json.dumps({**good, "path": "x" * 9000}).encode(), json.dumps({**good, "extra": 1}).encode()]:
        s.sendto(data, "\\0" + name)
print(os.getpid())
"""


def test_notices_sent_while_the_command_runs_are_kept(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main

    out = tmp_path / "t"
    code = main(["trace", "--no-measure", "--out", str(out), "--", sys.executable, "-c", SENDS])
    pid = int(capfd.readouterr().out.splitlines()[0])
    lines = (out / notices.FILE).read_text().splitlines()
    good = {"event": "unwritable", "pid": pid, "errno": 13, "path": "/t/1.jsonl", "command": "srv --port 1"}
    assert code == 0 and [json.loads(line) for line in lines] == [good, good]  # the last one without its extra
    assert mode(out / notices.FILE) == 0o600


@pytest.mark.parametrize("data", [b"", b"[]", b'{"event":"unwritable"}', "\udcff".encode("utf-8", "surrogatepass"),
                                  b'{"event":"unwritable","pid":1,"errno":2.5,"path":"p","command":"c"}'])
def test_what_is_not_a_notice_is_dropped(data: bytes) -> None:
    assert notices.notice(data) is None


def test_the_notices_kept_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setattr(notices, "MAX_NOTICES", 3)
    line = {"event": "unwritable", "pid": 1, "errno": 28, "path": "/t/1.jsonl", "command": "x"}
    with notices.Listener(tmp_path) as listener, listener.receiving(), \
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        assert listener.name is not None
        for pid in range(1, 9):
            sender.sendto(json.dumps({**line, "pid": pid}).encode(), "\0" + listener.name)
    kept = [json.loads(text)["pid"] for text in (tmp_path / notices.FILE).read_text().splitlines()]
    assert kept == [1, 2, 3] and listener.kept == 3
