"""A one-line progress bar for long benchmark runs (no dependency)."""

from __future__ import annotations

import sys
from typing import TextIO


class Progress:
    """``[#####.....] 12/48 label`` on ``out`` (stderr by default).

    On a terminal the line is redrawn in place; elsewhere (a log file) each update is its own line,
    so logs stay readable.
    """

    def __init__(self, total: int, out: TextIO | None = None, width: int = 30):
        self.total, self.width = max(total, 1), width
        self.out = out if out is not None else sys.stderr
        self.tty = hasattr(self.out, "isatty") and self.out.isatty()
        self._last = 0

    def update(self, done: int, label: str = "") -> None:
        """Show ``done`` of ``total`` steps finished, working on ``label``."""
        filled = self.width * min(done, self.total) // self.total
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} {label}"
        if self.tty:
            self.out.write("\r" + line.ljust(self._last))
            self._last = len(line)
        else:
            self.out.write(line + "\n")
        self.out.flush()

    def close(self) -> None:
        """End the in-place line on a terminal."""
        if self.tty and self._last:
            self.out.write("\r" + " " * self._last + "\r")
            self.out.flush()
        self._last = 0
