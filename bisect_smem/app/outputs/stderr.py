"""The one funnel to stderr: every line for a person (``error: ...``, ``hint: ...``, a note, a comparison
shown beside JSON on stdout) goes through ``say``, made printable (a name read from a device or a file
changes only itself) and never raising: a closed or broken stderr costs no result and no exit code."""

from __future__ import annotations

import sys
from typing import TextIO

from bisect_smem.core.text import printable, printable_lines


def stream() -> TextIO:
    """Where the lines go: the process's stderr now (tests and callers may replace it)."""
    return sys.stderr


def say(message: str, kind: str | None = None, end: str = "\n") -> None:
    """One line ``kind: message`` (error, hint, warning; its own line breaks escaped), or without a kind a
    text printed whole (its line breaks kept), flushed at once."""
    try:
        print(f"{kind}: {printable(message)}" if kind else printable_lines(message), end=end, file=stream(),
              flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # stderr itself is gone: the exit code still says what happened


def is_terminal() -> bool:
    """Whether stderr is a terminal, where a progress line can be redrawn."""
    try:
        return stream().isatty()
    except (OSError, ValueError, AttributeError):
        return False
