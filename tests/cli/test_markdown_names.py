"""Markdown output shows a name read from a device or a file as itself: no HTML, link, image, emphasis or
code span that the name carries reaches the page a bug report is pasted into."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bisect_smem.app.render.markdown import inert
from tests.conftest import run_main as run
from tests.paths import H200_REPORT

ACTIVE_NAME = ("<img src=x onerror=alert(1)> [click](https://evil.example) ![i](x.png) **bold** _em_ `code` "
               "~~gone~~ &amp; www.evil.example https://bare.example \\")


@pytest.fixture
def active_report(tmp_path: Path) -> Path:
    doc = json.loads(H200_REPORT.read_text())
    doc["devices"][0]["name"] = ACTIVE_NAME
    doc["host"] = "node`<b>x</b>`"
    path = tmp_path / "active.json"
    path.write_text(json.dumps(doc))
    return path


def _unescaped(out: str, char: str) -> list[int]:
    """Where ``char`` stands in ``out`` without the backslash that makes Markdown show it as itself."""
    return [m.start() for m in re.finditer(re.escape(char), out) if out[m.start() - 1] != "\\"]


def test_markdown_escapes_what_a_device_name_would_do(active_report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--simulate", str(active_report), "--format", "markdown"], capsys)
    assert code == 0 and inert(ACTIVE_NAME) in out
    for char in "<>[]`&~":
        assert _unescaped(out, char) == [], (char, out[:400])
    assert "https://" not in out and "www.evil" not in out and "**bold**" not in out


@pytest.mark.parametrize(("text", "shown"), [
    ("<b>", "\\<b\\>"), ("[a](b)", "\\[a\\](b)"), ("https://x", "https\\://x"), ("www.x", "www\\.x"),
    ("H200 | cc 9.0", "H200 | cc 9.0"), ("a\x1bb", "a\\\\x1bb"), ("sm_90", "sm\\_90"),
])
def test_inert_escapes_each_active_form(text: str, shown: str) -> None:
    assert inert(text) == shown
