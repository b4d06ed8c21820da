"""The commands are thin: they parse, call app/run (which reaches the devices) and hand rows to render, so
the command line imports nothing of devices, and `check` on a saved report loads none of it."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.run.measure import measure_report, plan_measurement
from bisect_smem.app.run.subprocesses import python_environment
from bisect_smem.core.errors import UsageError
from bisect_smem.core.model import Report
from bisect_smem.core.saved import load_report
from tests.paths import H200_REPORT, PACKAGE

# trace still sets up its collector itself until that moves to app/run/traced.py (cli/ruff.toml says the same).
STILL_REACHING_DEVICES = {"trace.py"}

# The whole program, as `bisect-smem ARGS` runs it (the entry point with its head start, then main), with the
# modules of devices it loaded printed after the command's own output.
THROUGH_THE_ENTRY_POINT = """
import sys
from bisect_smem.app.cli import entry
sys.argv = ["bisect-smem", *sys.argv[1:]]
code = entry.main()
print(code, sorted(m for m in sys.modules if m.startswith("bisect_smem.devices")))
"""


def _devices_loaded(*args: str) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", THROUGH_THE_ENTRY_POINT, *args], capture_output=True, text=True,
                          timeout=60, env=python_environment())
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1], done.stdout


@pytest.mark.parametrize("args", [("check", str(H200_REPORT)), ("check", "--help")], ids=["report", "help"])
def test_check_loads_nothing_of_devices(args: tuple[str, ...]) -> None:
    last, output = _devices_loaded(*args)
    assert last == "0 []", output


def test_a_measuring_run_does_load_devices() -> None:
    # The same probe sees devices where they are used: the check above cannot pass for want of looking.
    last, output = _devices_loaded("--simulate", "h200", "--level", "quick", "--quiet", "--format", "json")
    assert last.startswith("0 [") and "'bisect_smem.devices.backends'" in last, output


def test_no_command_imports_devices() -> None:
    reaching = {}
    for path in sorted((PACKAGE / "app" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
        names += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        found = [name for name in names if name.startswith("bisect_smem.devices")]
        if found and path.name not in STILL_REACHING_DEVICES:
            reaching[path.name] = found
    assert reaching == {}


def test_the_command_writes_the_report_that_run_returns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The measuring command adds only its status fields to what run/measure.py measured: a caller of the
    # run layer (the public API) gets the same devices, rows and host.
    out = tmp_path / "report.json"
    assert main(["--simulate", "h200", "--simulate", "a100", "--level", "quick", "--quiet", "--json", str(out)]) == 0
    capsys.readouterr()
    measured = measure_report(plan_measurement(simulate=["h200", "a100"], level="quick"))
    written = load_report(out)
    assert (measured.backend, measured.level, measured.host_context) == (written.backend, written.level, {})
    assert (measured.exit_code, written.exit_code) == (None, 0)  # the status is the command's to add

    def answers(report: Report) -> list[tuple[object, ...]]:
        untimed = [replace(d.measured, timings_s={}, probes={}) for d in report.devices]
        return [(d.index, d.name, d.compute_capability, d.reported, m, d.verdicts, d.error)
                for d, m in zip(report.devices, untimed, strict=True)]

    assert len(measured.devices) == 2 and answers(measured) == answers(written)


def test_a_plan_that_cannot_be_honoured_is_refused_before_measuring() -> None:
    with pytest.raises(UsageError, match="--level full needs the cupy backend"):
        plan_measurement("numba", level="full")
    with pytest.raises(UsageError, match="no such step"):
        plan_measurement(simulate=["h200"], inject_fault=["no-such-step"])
