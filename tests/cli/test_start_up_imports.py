"""The commands that measure nothing load nothing that reaches a device: --help, check (with or without
--help) and fit against published rows import no module of devices/, so neither the backends' table nor
a backend (nor CuPy or numba) costs them start-up time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.app.cli import main as cli
from tests.paths import ROOT

SCRIPT = """import contextlib, io, json, sys
from bisect_smem.app.cli import entry
sys.argv = ["bisect-smem", *json.loads(sys.argv[1])]
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        entry.main()
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(argv: list[str]) -> list[str]:
    """The modules a fresh interpreter holds after the entry point ran ``argv``."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(argv)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("start-up") / "report.json"
    assert cli.main(["--simulate", "h200", "--quiet", "--json", str(path)]) == 0
    return path


@pytest.mark.parametrize("argv", [["--help"], ["check", "--help"], ["check", "REPORT"],
                                  ["fit", "--tile", "128x256x64", "--dtype", "bf16", "--arch", "9.0", "--no-local"]],
                         ids=" ".join)
def test_commands_that_measure_nothing_load_no_device_module(argv: list[str], report: Path) -> None:
    loaded = loaded_by([str(report) if word == "REPORT" else word for word in argv])
    assert "bisect_smem.app.cli.main" in loaded  # the command line did load and run
    assert [m for m in loaded if m.startswith("bisect_smem.devices") or m.split(".")[0] in ("cupy", "numba")] == []


def test_a_measuring_command_line_does_read_the_backends_table() -> None:
    # The other side of the line: a run that may measure a real device asks the table what is installed.
    loaded = loaded_by(["--backend", "opencl"])
    assert "bisect_smem.devices.backends.table" in loaded
