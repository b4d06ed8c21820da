"""The progress line on stderr: one status line for all devices, redrawn in place a few times a second at
most, never wider than the terminal.

A line wider than the terminal wraps, and a carriage return then goes back only to the start of its last
row: every redraw would leave the rows above behind. So the line is cut to the terminal's width (read
again at every redraw, as a window may be resized), less one column, as some terminals wrap on reaching
the last one."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from typing import TextIO

from bisect_smem.core.text import printable

SEPARATOR = " | "
SHORTEST_PART = 24  # the fewest characters a device's part is cut to before devices are left out ("+3 more")
FALLBACK_COLUMNS = 80  # where the stream is no terminal that can say its width


def stream_columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to, in columns (FALLBACK_COLUMNS where none is known)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = shutil.get_terminal_size((FALLBACK_COLUMNS, 24)).columns
    return columns if columns > 0 else FALLBACK_COLUMNS


def ellipsis_for(stream: TextIO) -> str:
    """``…`` where the stream's encoding can write it, else ``...``."""
    try:
        "…".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "..."
    return "…"


def cut(text: str, width: int, mark: str = "…") -> str:
    """``text`` in at most ``width`` characters, ending in ``mark`` where it was cut."""
    if len(text) <= width:
        return text
    return text[:max(width - len(mark), 0)] + mark if width >= len(mark) else text[:max(width, 0)]


def fitted(parts: list[str], width: int, mark: str = "…") -> str:
    """The parts joined in at most ``width`` characters: each cut to an even share of the width, and where
    a share would be shorter than SHORTEST_PART, the last devices left out and counted (``| +3 more``)."""
    joined = SEPARATOR.join(parts)
    if len(joined) <= width:
        return joined
    for shown in range(len(parts), 0, -1):
        more = f"{SEPARATOR}+{len(parts) - shown} more" if shown < len(parts) else ""
        share = (width - len(more) - len(SEPARATOR) * (shown - 1)) // shown
        if share >= SHORTEST_PART or shown == 1:
            return cut(SEPARATOR.join(cut(p, share, mark) for p in parts[:shown]) + more, width, mark)
    return ""  # no parts


class ProgressLine:
    """One status line for all devices, redrawn a few times a second at most. A device silent for more
    than a second shows how long its current probe has been running, so a hang is visible as one.
    Without a capable terminal (TERM=dumb) the line is cleared with spaces, not ESC[K. ``columns`` says
    the terminal's width (by default, read from ``stream`` at every redraw)."""

    def __init__(self, stream: TextIO, interval_s: float = 0.25, columns: Callable[[], int] | None = None) -> None:
        self.stream, self.interval_s = stream, interval_s
        self.columns = columns or (lambda: stream_columns(stream))
        self.mark = ellipsis_for(stream)
        self.fancy = os.environ.get("TERM", "") not in ("", "dumb")
        self.state: dict[int, tuple[str, float]] = {}
        self.drawn = 0  # the longest line drawn, which spaces must cover without ESC[K
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()

    def __call__(self, index: int, text: str) -> None:
        """Device ``index`` is now doing ``text``."""
        with self.lock:
            self.state[index] = (text, time.monotonic())

    def line(self, now: float, width: int | None = None) -> str:
        """The status line as it reads at ``now``, in at most ``width`` characters (None: whole)."""
        parts = []
        for index, (text, since) in sorted(self.state.items()):
            running = now - since
            parts.append(printable(f"device {index}" + (f" (running {running:.0f} s)" if running >= 1 else "")
                                   + f": {text}"))
        return SEPARATOR.join(parts) if width is None else fitted(parts, width, self.mark)

    def _width(self) -> int:
        return max(self.columns() - 1, 0)

    def _tick(self) -> None:
        while not self.stopped.wait(self.interval_s):
            with self.lock:
                self._draw(self.line(time.monotonic(), self._width()))

    def _draw(self, text: str) -> None:
        try:
            if self.fancy:
                print(f"\r\033[K{text}", end="", file=self.stream, flush=True)
            else:
                # Spaces over what the longest line left, within the width (a wider one would wrap).
                print(f"\r{text.ljust(min(self.drawn, self._width()))}", end="", file=self.stream, flush=True)
            self.drawn = max(self.drawn, len(text))
        except (OSError, ValueError):
            self.stopped.set()

    def close(self) -> None:
        """Stop redrawing and leave the line empty."""
        self.stopped.set()
        self.ticker.join(timeout=1)
        with self.lock:
            self._draw("")
            try:
                print("\r", end="", file=self.stream, flush=True)
            except (OSError, ValueError):
                pass
