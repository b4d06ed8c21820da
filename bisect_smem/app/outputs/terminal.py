"""The width text for stdout is laid out in: what ``COLUMNS`` says, else the width of the terminal stdout
is, else (a file, a pipe) DEFAULT_WIDTH; never fewer than NARROWEST columns."""

from __future__ import annotations

import os
import sys

from bisect_smem.app.render.width import DEFAULT_WIDTH, NARROWEST


def text_width() -> int:
    """The columns a line of text on stdout may take."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return max(int(given), NARROWEST)
    try:
        # The stdout this process writes to now (not the one it started with): a capture is no terminal.
        columns = os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return DEFAULT_WIDTH
    return max(columns, NARROWEST) if columns > 0 else DEFAULT_WIDTH
