"""The one funnel to stderr: every line for a person (``error: ...``, ``hint: ...``, a note, a comparison
shown beside JSON on stdout) goes through ``say``, made printable (a name read from a device or a file
changes only itself) and never raising: a closed or broken stderr costs no result and no exit code."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from bisect_smem.core.text import printable, printable_lines

LONGEST_WORD = 120  # a path or value quoted longer than this is cut in its middle: its start and end stay
_KEPT = 56  # characters kept at each end of a word that is cut


def bounded(line: str) -> str:
    """``line`` with every word longer than LONGEST_WORD cut in its middle, saying how long it was: a
    4096-character path or a quoted file no longer makes the line a screenful, and the numbers the
    message is about (short words) stay whole."""
    return " ".join(_cut(word) if len(word) > LONGEST_WORD else word for word in line.split(" "))


def _cut(word: str) -> str:
    stem = word.rstrip(":;,.)'\"")
    tail = word[len(stem):]  # the punctuation that ends the word stays after the note of its length
    return f"{stem[:_KEPT]}...{stem[-_KEPT:]} ({len(stem)} characters){tail}"


def stream() -> TextIO:
    """Where the lines go: the process's stderr now (tests and callers may replace it)."""
    return sys.stderr


def say(message: str, kind: str | None = None, end: str = "\n") -> None:
    """One line ``kind: message`` (error, hint, warning; its own line breaks escaped), or without a kind a
    text printed whole (its line breaks kept), flushed at once."""
    try:
        print(f"{kind}: {bounded(printable(message))}" if kind else printable_lines(message), end=end, file=stream(),
              flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # stderr itself is gone: the exit code still says what happened


def is_terminal() -> bool:
    """Whether stderr is a terminal, where a progress line can be redrawn."""
    try:
        return stream().isatty()
    except (OSError, ValueError, AttributeError):
        return False


def replace_closed_stderr() -> None:
    """A stderr the caller closed becomes /dev/null: the lines for a person go nowhere, never to stdout."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - it stays open as the process's stderr


def silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again (a full device, a
    broken pipe: the error was said once already)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
