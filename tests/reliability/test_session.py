"""A run's state is one Session (core/session.py): what it read, what it planned and wrote, the workers it
started and ended. Two sessions share nothing, each command line runs in one of its own, and a test makes
one instead of clearing or patching module state."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.outputs import writer
from bisect_smem.app.run.requests import build_request
from bisect_smem.app.run.runner import run_all, wait_for_exits
from bisect_smem.core import input as reader
from bisect_smem.core import session as sessions
from bisect_smem.core.session import Session
from tests.paths import H200_REPORT, PACKAGE


def test_a_file_read_is_refused_as_an_output_of_its_own_run_only(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_bytes(H200_REPORT.read_bytes())
    with sessions.begin() as reading:
        reader.read_file(report, 1 << 20)
        assert writer.check_writable(report) == f"it is {report}, which this run reads; write to another file"
    assert reading.reads  # the session kept it, no module did
    with sessions.begin():
        assert writer.check_writable(report) is None


def test_what_a_run_wrote_is_its_own(tmp_path: Path) -> None:
    with sessions.begin() as first:
        writer.write_atomic(tmp_path / "a.json", "{}")
    with sessions.begin() as second:
        assert writer.written() == []
        writer.write_atomic(tmp_path / "b.json", "{}")
    assert (first.written, second.written) == ([str(tmp_path / "a.json")], [str(tmp_path / "b.json")])


def test_each_command_line_runs_in_a_session_of_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.json"
    with sessions.begin() as caller:
        assert main(["--simulate", "h200", "--level", "quick", "--quiet", "--json", str(out)]) == 0
        # Its report is not this session's, so this session may replace it (a command line would refuse
        # only a file that it read itself).
        assert caller.written == [] and caller.planned == {}
        assert main(["check", str(out)]) == 0
        assert caller.reads == {}
    assert json.loads(out.read_text())["backend"] == "sim"
    capsys.readouterr()


def test_a_session_given_to_main_is_the_one_it_fills(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    given = Session()
    out = tmp_path / "report.json"
    assert main(["--simulate", "h200", "--level", "quick", "--quiet", "--json", str(out)], session=given) == 0
    assert given.written == [str(out)] and given.planned == {}
    capsys.readouterr()


def test_the_workers_a_run_ended_are_waited_for_through_its_session() -> None:
    session = Session()
    request = build_request(None, ["h200"], isolate=True)
    (report,) = run_all([request], wait_exits=False, session=session)
    assert report.error is None and len(session.exiting) == 1  # kept for the caller, in the run's session
    assert sessions.current().exiting == []  # not in whatever session this thread has
    wait_for_exits(session)
    assert session.exiting == []


# The modules that keep a run's state keep it in the session: none holds a dict, list or set of its own
# at module level, which a second run (or a test) would find already filled.
RUN_STATE_MODULES = ("core/input.py", "app/outputs/writer.py", "app/run/head_start.py", "app/run/runner.py",
                     "app/cli/interrupts.py", "app/cli/main.py", "app/run/measure.py")


@pytest.mark.parametrize("name", RUN_STATE_MODULES)
def test_no_run_state_in_module_globals(name: str) -> None:
    tree = ast.parse((PACKAGE / name).read_text())
    containers = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
    held = [node.lineno for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
            and (isinstance(node.value, containers) or isinstance(node.value, ast.Call)
                 and getattr(node.value.func, "id", None) in ("dict", "list", "set", "Session"))]
    assert held == []
