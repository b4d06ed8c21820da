"""fit is a thin command: it parses, asks the public API, and hands the Fit to render/. Its JSON is made in
render/, its files go out through Delivery, and it does not reach into the trace command."""

from __future__ import annotations

import ast
import json

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.outputs import writer
from bisect_smem.core.errors import OutputError
from tests.paths import PACKAGE

FIT_MODULES = [PACKAGE / "app" / "cli" / "fit.py"]


def _imported(path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("path", FIT_MODULES, ids=lambda p: p.name)
def test_fit_asks_the_api_and_makes_no_json_and_writes_no_file_itself(path) -> None:
    imported = _imported(path)
    assert "bisect_smem.api" in imported
    assert not any(name.startswith("bisect_smem.app.cli.trace") for name in imported)
    assert "json" not in imported  # its JSON is render/fit_json.py's
    assert "write_atomic" not in path.read_text()  # files go through Delivery


def test_a_json_file_written_goes_through_the_one_writer(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fit.json"
    assert main(["fit", "1000", "--arch", "9.0", "--no-local", "--json", str(path)]) == 0
    assert json.loads(path.read_text())["results"][0]["verdict"] == "fits without opt-in"
    capsys.readouterr()

    def full_disk(path, content, **_: object) -> None:
        raise OutputError(f"cannot write the fit result to {path}: No space left on device")

    # A disk that fills between the check and the write: the answer is still printed, then the one line, exit 2.
    monkeypatch.setattr(writer, "write_atomic", full_disk)
    assert main(["fit", "1000", "--arch", "9.0", "--no-local", "--json", str(tmp_path / "again.json")]) == 2
    printed = capsys.readouterr()
    assert printed.out.startswith("sm_90: fits without opt-in") and "No space left on device" in printed.err
