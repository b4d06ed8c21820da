"""The commands the documentation shows, run: every ```console block of README.md and docs/*.md is a list of
``$ bisect-smem ...`` lines, each followed by what the tool printed; this module runs each command through
the real entry point (``python -m bisect_smem``, no GPU: simulated devices and the reports under
tests/data) and writes its output under it. A block whose last line is ``...`` shows only the first lines
of the output. tools/generate.py rewrites the pages with it and, with --check, fails when a page shows
output the tool no longer prints.

Every ``bisect-smem`` command in a ```sh block is checked too, by the tool's own parser (tests/house): a
command the parser refuses cannot stay in the docs, though what needs a GPU is not run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "$ "
ELLIPSIS = "..."
# One width for argparse's help and the tables, and one clock zone, so a page is the same on every machine.
ENV_FIXED = {"COLUMNS": "100", "TZ": "UTC", "LC_ALL": "C.UTF-8", "NO_COLOR": "1"}
# Elapsed times (a replay's "0.01 s") change from run to run: a page may show any.
_SECONDS = re.compile(r"\b\d+(\.\d+)? s\b")
_FENCE = re.compile(r"^```(\w*)\s*$")
_OPERATORS = "<>|&;"


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, and its lines without the fences (0-based line span)."""

    language: str
    start: int  # the index of the line after the opening fence
    lines: tuple[str, ...]


def pages(root: Path = ROOT) -> list[Path]:
    """The pages whose commands are checked: the README and every page of the docs site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, in order."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        out.append(Block(opened.group(1), i + 1, tuple(lines[i + 1:end])))
        i = end + 1
    return out


def commands_in(block: Block) -> list[list[str]]:
    """The ``bisect-smem`` command lines of a block, as argv (after the program's name): continued lines
    joined, comments dropped, and cut at the first shell operator (``> FILE``, ``| head``)."""
    out, joined, pending = [], [], ""
    for line in block.lines:
        if block.language == "console" and not pending and not line.startswith(PROMPT):
            continue  # what the tool printed (which may begin with its own name), not a command
        text = pending + (line[len(PROMPT):] if line.startswith(PROMPT) else line)
        pending = text[:-1] + " " if text.endswith("\\") else ""
        if not pending:
            joined.append(text)
    for text in joined:
        if not text.startswith("bisect-smem ") and text != "bisect-smem":
            continue
        out.append(words(text)[1:])
    return out


def words(text: str) -> list[str]:
    """A shell command line's words, as sh splits them: comments dropped, cut at the first shell operator
    (``> FILE``, ``| head``)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    found = list(lexer)
    cut = next((i for i, w in enumerate(found) if w and set(w) <= set(_OPERATORS)), len(found))
    return found[:cut]


def run(argv: list[str], root: Path = ROOT) -> str:
    """What ``bisect-smem ARGV`` prints on stdout and stderr together, run here with no GPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_SMEM_")}
    env.update(ENV_FIXED)
    env["CUDA_VISIBLE_DEVICES"] = ""  # the docs show simulated and replayed devices, never this machine's
    done = subprocess.run([sys.executable, "-m", "bisect_smem", *argv], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    return done.stdout + done.stderr


def _console(block: Block, root: Path) -> list[str]:
    """The block as it should read now: each command, then its output (cut where the block shows ``...``)."""
    out: list[str] = []
    groups: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith(PROMPT):
            groups.append((line, []))
        elif groups:
            groups[-1][1].append(line)
    for prompt, shown in groups:
        argv = words(prompt[len(PROMPT):])  # the words commands_in checks against the parser
        printed = run(argv[1:], root).rstrip("\n").splitlines() if argv and argv[0] == "bisect-smem" else shown
        if shown and shown[-1] == ELLIPSIS:
            keep = len(shown) - 1
            printed = [*printed[:keep], ELLIPSIS] if len(printed) > keep else printed
        out += [prompt, *_keep_times(printed, shown)]
    return out


def _keep_times(printed: list[str], shown: list[str]) -> list[str]:
    """The printed lines, with the page's own elapsed times where only those differ (they vary per run)."""
    out = []
    for i, new in enumerate(printed):
        old = shown[i] if i < len(shown) else None
        same = old is not None and _SECONDS.sub("T s", old) == _SECONDS.sub("T s", new)
        out.append(old if same else new)
    return out


def regenerate(path: Path, root: Path = ROOT) -> str:
    """The page at ``path`` with every console block's output as the tool prints it now."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for block in reversed(blocks("\n".join(lines))):
        if block.language == "console":
            lines[block.start:block.start + len(block.lines)] = _console(block, root)
    return "\n".join(lines) + "\n"
