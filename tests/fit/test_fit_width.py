"""Every line fit prints fits the terminal's width (COLUMNS), or 100 columns where there is none: the answer
line of every published architecture (730 characters unwrapped), a launcher's tables and notes (240), a
library's tiles with their table and breakdown, a message explained, a traced folder. The words are the
same as unwrapped: only where lines break changes."""

from __future__ import annotations

import pytest

from bisect_smem.app.cli.main import main
from bisect_smem.app.render.width import DEFAULT_WIDTH
from tests.paths import ROOT

TRITON_MESSAGE = "out of resource: shared memory, Required: 262144, Hardware limit: 232448"
COMMANDS = {
    "bytes": ["fit", "100000", "--simulate", "h200"],
    "bytes-verbose": ["fit", "110592", "--no-local", "--verbose"],
    "launcher": ["fit", "--launcher", "trtllm-moe", "--no-local"],
    "launcher-tile": ["fit", "--launcher", "trtllm-moe", "--fusion", "finalize", "--tile", "128x256x128", "--arch",
                      "12.0", "--no-local"],
    "tiles": ["fit", "--tile", "128x256x64", "--tile", "128x128x64", "--dtype", "bf16", "--no-local", "--verbose"],
    "triton": ["fit", "--tile", "128x256x64", "--rule", "triton", "--no-local"],
    "explain": ["fit", "--explain", TRITON_MESSAGE, "--tile", "128x256x64", "--no-local"],
    "trace": ["fit", "--trace", str(ROOT / "tests/data/traces/h200_cutlass_gemm")],
}


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "no-terminal"])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_fit_line_fits(command: str, columns: str | None, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS")
    else:
        monkeypatch.setenv("COLUMNS", columns)
    main(COMMANDS[command])
    out = capsys.readouterr().out
    width = int(columns) if columns else DEFAULT_WIDTH
    assert out.strip(), "nothing printed"
    wide = [line for line in out.splitlines() if len(line) > width]
    assert wide == [], "\n".join(wide)


def test_the_answer_line_wraps_with_every_word_kept(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    main(COMMANDS["bytes"])  # at the tests' own width, where nothing wraps
    whole = capsys.readouterr().out.splitlines()
    assert len(whole[0]) > 700  # the answer of every published architecture and the simulated H200
    monkeypatch.setenv("COLUMNS", "80")
    main(COMMANDS["bytes"])
    narrow = capsys.readouterr().out.splitlines()
    answer = narrow[:next(i for i, line in enumerate(narrow) if line.startswith("kernel: "))]
    assert len(answer) > 8 and all(line.startswith("  ") for line in answer[1:])  # its later rows indented
    assert " ".join(line.strip() for line in answer) == whole[0]
