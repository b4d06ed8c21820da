"""The README and the docs site show only commands the tool takes: every ``bisect-smem`` command of a ```sh
or ```console block is read by the tool's own parser, every console block is the tool's output (checked
current by tools/generate.py --check in test_generated), and the README stays a front page."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_smem.app.cli.main import build_parser
from tests.paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import doc_commands  # noqa: E402

FRONT_PAGE_LINES = 200


def _shown() -> list[tuple[str, list[str]]]:
    out = []
    for page in doc_commands.pages(ROOT):
        for block in doc_commands.blocks(page.read_text(encoding="utf-8")):
            if block.language in ("sh", "console"):
                out += [(f"{page.relative_to(ROOT)}:{block.start}", argv) for argv in doc_commands.commands_in(block)]
    return out


SHOWN = _shown()


def test_the_docs_show_commands() -> None:
    # The pages' blocks are found at all: a change of fence or prompt would empty every check below.
    assert len(SHOWN) >= 20
    assert any(argv[:1] == ["fit"] for _, argv in SHOWN)


@pytest.mark.parametrize(("where", "argv"), SHOWN, ids=[f"{w} {' '.join(a)[:40]}" for w, a in SHOWN])
def test_every_command_shown_is_one_the_parser_takes(where: str, argv: list[str]) -> None:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            build_parser().parse_args(argv)
        except SystemExit as ended:
            assert ended.code in (0, None), f"{where}: bisect-smem {' '.join(argv)}: {err.getvalue().strip()}"


def test_a_renamed_option_in_a_page_is_refused() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as ended:
        build_parser().parse_args(["--levle", "quick"])
    assert ended.value.code == 2


def test_a_console_block_cut_short_keeps_its_first_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ bisect-smem check tests/data/h200_report.json\nstale\n...\n```\n")
    assert doc_commands.regenerate(page, ROOT) == (
        "```console\n$ bisect-smem check tests/data/h200_report.json\nsmem ok: 1 GPU, opt-in 232448 B\n```\n")
    page.write_text("```console\n$ bisect-smem profiles\nold\n...\n```\n")
    lines = doc_commands.regenerate(page, ROOT).splitlines()
    assert lines[2].startswith("profile") and lines[3] == "..."


def _table_rows(text: str) -> list[str]:
    """The lines of ``text``'s tables, outside fenced blocks."""
    rows, fenced = [], False
    for line in text.splitlines():
        fenced = fenced != line.startswith("```")
        if not fenced and line.startswith("|"):
            rows.append(line)
    return rows


def test_no_table_cell_holds_a_pipe_in_code() -> None:
    # GitHub splits a table row at a pipe inside a code span unless it is escaped (\|); the docs site's
    # Markdown keeps the code span whole and prints the backslash. Either way one of them shows it wrong.
    for page in doc_commands.pages(ROOT):
        for row in _table_rows(page.read_text(encoding="utf-8")):
            spans = re.findall(r"`([^`]*)`", row)
            assert not [s for s in spans if "|" in s], f"{page.relative_to(ROOT)}: {row}"


def test_the_site_prints_no_backslash_before_a_pipe_in_code() -> None:
    import markdown
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    extensions = [e if isinstance(e, str) else next(iter(e)) for e in config["markdown_extensions"]]
    for page in (ROOT / config["docs_dir"]).rglob("*.md"):
        html = markdown.markdown(page.read_text(encoding="utf-8"), extensions=extensions)
        assert not re.findall(r"<code>[^<]*\\\|[^<]*</code>", html), page.relative_to(ROOT)


def test_outputs_lists_every_published_schema() -> None:
    from bisect_smem.app.outputs.schema_files import KINDS, published

    page = (ROOT / "docs" / "outputs.md").read_text(encoding="utf-8")
    listed = {m[0]: m[1] for m in re.findall(r"^\| `(\w+)` \| `(urn:[^`]+)` \|", page, re.MULTILINE)}
    assert set(listed) == set(KINDS)
    for kind in KINDS:
        assert listed[kind] == json.loads(published(kind))["$id"], kind


def _install_page() -> str:
    return (ROOT / "docs" / "install.md").read_text(encoding="utf-8")


def test_install_says_how_to_install_before_a_release() -> None:
    # No release is on a package index: a name pip would look up there finds nothing.
    for page in doc_commands.pages(ROOT):
        assert not re.search(r"pip install '?bisect-smem\[", page.read_text(encoding="utf-8")), page
    shown = "\n".join(line for b in doc_commands.blocks(_install_page()) if b.language == "sh" for line in b.lines)
    assert "pip install '.[cuda13]'" in shown and "make wheel" in shown


def test_the_completion_and_man_lines_work_on_a_fresh_home(tmp_path: Path) -> None:
    lines = [line.split("#")[0] for b in doc_commands.blocks(_install_page()) if b.language == "sh"
             for line in b.lines if "bisect-smem completion" in line or "bisect-smem man" in line]
    assert len(lines) == 3
    home, tools = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    tools.mkdir()
    (tools / "bisect-smem").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bisect_smem "$@"\n')
    (tools / "bisect-smem").chmod(0o755)
    env = {**os.environ, "HOME": str(home), "PATH": f"{tools}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    for line in lines:
        done = subprocess.run(["bash", "-ec", line], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, (line, done.stderr)
    share = ROOT / "bisect_smem" / "share"
    for made, shipped in ((".local/share/bash-completion/completions/bisect-smem", "bisect-smem.bash"),
                          (".zfunc/_bisect-smem", "_bisect-smem"), (".local/share/man/man1/bisect-smem.1", "bisect-smem.1")):
        assert (home / made).read_text() == (share / shipped).read_text(), made


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= FRONT_PAGE_LINES
    first_screen = "\n".join(readme.splitlines()[:60])
    for shown in ("make run", "make test", "bisect-smem trace", "docs/trace.md", "NVIDIA H200"):
        assert shown in first_screen, shown
    for link in ("docs/index.md", "docs/fleets.md", "docs/outputs.md", "docs/exit-codes.md", "docs/speed.md"):
        assert (ROOT / link).exists() and f"({link}" in readme, link
