"""The progress line on stderr: one status line for all devices, redrawn a few times a second at most."""

from __future__ import annotations

import os
import threading
import time
from typing import TextIO


class ProgressLine:
    """One status line for all devices, redrawn a few times a second at most. A device silent for more
    than a second shows how long its current probe has been running, so a hang is visible as one.
    Without a capable terminal (TERM=dumb) the line is cleared with spaces, not ESC[K."""

    def __init__(self, stream: TextIO, interval_s: float = 0.25) -> None:
        self.stream, self.interval_s = stream, interval_s
        self.fancy = os.environ.get("TERM", "") not in ("", "dumb")
        self.state: dict[int, tuple[str, float]] = {}
        self.width = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()

    def __call__(self, index: int, text: str) -> None:
        """Device ``index`` is now doing ``text``."""
        with self.lock:
            self.state[index] = (text, time.monotonic())

    def line(self, now: float) -> str:
        """The status line as it reads at ``now``."""
        parts = []
        for index, (text, since) in sorted(self.state.items()):
            running = now - since
            parts.append(f"device {index}: {text}" + (f" (running {running:.0f} s)" if running >= 1 else ""))
        return " | ".join(parts)[:200]

    def _tick(self) -> None:
        while not self.stopped.wait(self.interval_s):
            with self.lock:
                self._draw(self.line(time.monotonic()))

    def _draw(self, text: str) -> None:
        try:
            if self.fancy:
                print(f"\r\033[K{text}", end="", file=self.stream, flush=True)
            else:
                print(f"\r{text.ljust(self.width)}", end="", file=self.stream, flush=True)
            self.width = max(self.width, len(text))
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
