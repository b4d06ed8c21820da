"""The progress line in a real terminal: four simulated devices measured at --level full in a tmux pane 80
columns wide. Every redraw fits in the pane (a wider line wraps, and a carriage return cannot go back over
the rows above, which stay behind), and once the command has ended no progress is left on the screen.
Also the line itself: cut to the width it is given, devices left out and counted where they cannot all fit."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from bisect_smem.app.run.progress import SHORTEST_PART, ProgressLine, cut, fitted
from tests.conftest import consumer_tool
from tests.processes import CMD, ENV

COLUMNS = 80
DEVICES = ("h200", "h200", "a100", "rtx-pro-6000")
ENDS_WITHIN_S = 600  # a bound for a loaded machine, not a timing: the run takes seconds on an idle one
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _tmux(tool: str, socket: Path, *args: str) -> str:
    return subprocess.run([tool, "-S", str(socket), "-f", "/dev/null", *args], check=True, capture_output=True,
                          text=True, timeout=60).stdout


def test_four_devices_leave_no_progress_behind_at_80_columns(tmp_path: Path) -> None:
    tmux = consumer_tool("tmux", "`make tool-deps` installs it as root")
    socket, log, done = tmp_path / "tmux.sock", tmp_path / "pane.log", tmp_path / "exit"
    simulate = " ".join(f"--simulate {d}" for d in DEVICES)
    script = tmp_path / "run.sh"
    # The command waits until the pane's output is logged, so that every byte of the progress is seen.
    script.write_text(f"export PYTHONPATH={shlex.quote(ENV['PYTHONPATH'])}\n"
                      f"{shlex.quote(tmux)} -S {shlex.quote(str(socket))} wait-for go\n"
                      f"{shlex.join(CMD)} {simulate} --level full > {tmp_path / 'report.txt'}\n"
                      f"echo $? > {done}\n"
                      "exec sleep 600\n")
    _tmux(tmux, socket, "new-session", "-d", "-x", str(COLUMNS), "-y", "40", f"bash {shlex.quote(str(script))}")
    try:
        _tmux(tmux, socket, "pipe-pane", "-o", f"cat >> {shlex.quote(str(log))}")
        _tmux(tmux, socket, "wait-for", "-S", "go")
        deadline = time.monotonic() + ENDS_WITHIN_S
        while not done.exists() or not done.read_text().strip():
            assert time.monotonic() < deadline, f"the run did not end within {ENDS_WITHIN_S} s"
            time.sleep(0.5)
        # -J joins rows that a line wrapped onto, so a line wider than the pane shows as one.
        screen = _tmux(tmux, socket, "capture-pane", "-p", "-J", "-S", "-")
    finally:
        subprocess.run([tmux, "-S", str(socket), "kill-server"], capture_output=True, timeout=60)
    assert done.read_text().strip() == "0", (tmp_path / "report.txt").read_text()[-2000:]
    drawn = [ESCAPE.sub("", piece) for piece in re.split(r"[\r\n]", log.read_text(errors="replace"))]
    assert any(piece.startswith("device 0") for piece in drawn), "the progress line was never drawn"
    assert max(len(piece) for piece in drawn) < COLUMNS, max(drawn, key=len)
    lines = screen.splitlines()
    assert not [line for line in lines if "device " in line], screen
    assert max(len(line) for line in lines) <= COLUMNS, screen


class Sink:
    def __init__(self) -> None:
        self.text = ""
        self.encoding = "utf-8"

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("width", [20, 40, 79, 119, 200])
def test_the_line_never_exceeds_its_width(width: int) -> None:
    printer = ProgressLine(Sink(), interval_s=60, columns=lambda: width + 1)  # type: ignore[arg-type]
    try:
        for device in range(8):
            printer(device, f"default ceiling: probe {device + 10} at {232448 - device} B, verified over every byte")
        line = printer.line(time.monotonic(), width)
        assert len(line) <= width, line
        assert line.startswith("device 0")
        # Every device that is shown gets at least SHORTEST_PART characters, the rest are counted.
        if width < 8 * SHORTEST_PART:
            assert re.search(r"\+\d more$", line), line
    finally:
        printer.close()


def test_a_line_that_fits_is_whole_and_a_cut_one_says_so() -> None:
    assert fitted(["device 0: a", "device 1: b"], 80) == "device 0: a | device 1: b"
    assert cut("device 0: optin: probe 4 at 2000 B", 12) == "device 0: o…"
    assert cut("device 0: optin", 12, "...") == "device 0:..."
    assert fitted(["device 0: " + "x" * 100], 30) == "device 0: " + "x" * 19 + "…"


def test_without_escapes_the_spaces_stay_within_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    sink = Sink()
    printer = ProgressLine(sink, interval_s=60, columns=lambda: 30)  # type: ignore[arg-type]
    printer(0, "x" * 100)
    printer._draw(printer.line(time.monotonic(), 29))
    printer.close()
    assert max(len(piece) for piece in sink.text.split("\r")) <= 29, sink.text


def test_no_progress_where_stderr_is_no_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from bisect_smem.app.cli.main import main

    # Measured in workers (as a terminal's run is), without --quiet: a log file gets no redraws.
    assert main(["--simulate", "h200", "--simulate", "a100", "--level", "quick"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "device 0" not in err, err
