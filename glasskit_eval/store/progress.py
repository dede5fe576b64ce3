"""Download progress: one line redrawn in place, drawn only when the stream is a terminal.

Logs and pipes (CI) get nothing but the "Downloading ..." line the caller prints;
carriage-return redraws would only fill them with noise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TextIO


class Progress(Protocol):
    def update(self, done: int, total: int | None) -> None: ...

    def close(self) -> None: ...


def progress_line(label: str, done: int, total: int | None, rate: float | None) -> str:
    """``label: 45.2 MiB of 120.0 MiB (37%), 10.1 MiB/s`` (no total: bytes and rate only)."""
    text = f"{label}: {format_size(done)}"
    if total:
        text += f" of {format_size(total)} ({min(100, done * 100 // total)}%)"
    if rate is not None:
        text += f", {format_size(int(rate))}/s"
    return text


def is_terminal(stream: TextIO | None) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class TerminalProgress:
    """Redraws ``progress_line`` at most every ``interval_s``, and once more when done."""

    def __init__(self, stream: TextIO, label: str, *, interval_s: float = 0.2,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.label = label
        self.interval_s = interval_s
        self.clock = clock
        self._started = clock()
        self._first: int | None = None
        self._last_draw: float | None = None
        self._last: tuple[int, int | None] | None = None
        self._width = 0

    def update(self, done: int, total: int | None) -> None:
        now = self.clock()
        if self._first is None:
            self._first = done  # bytes resumed from an earlier run do not count toward the rate
        self._last = (done, total)
        if self._last_draw is not None and now - self._last_draw < self.interval_s and done != total:
            return
        self._draw(now)

    def close(self) -> None:
        if self._last is None:
            return
        self._draw(self.clock())
        self.stream.write("\n")
        self.stream.flush()
        self._last = None

    def _draw(self, now: float) -> None:
        assert self._last is not None
        done, total = self._last
        elapsed = now - self._started
        fresh = done - (self._first or 0)
        rate = fresh / elapsed if elapsed > 0 and fresh > 0 else None
        line = progress_line(self.label, done, total, rate)
        # Pad over a longer previous line instead of relying on terminal escape codes.
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)
        self._last_draw = now


def terminal_progress(stream: TextIO | None, label: str) -> TerminalProgress | None:
    """A progress line on ``stream`` if it is a terminal, else None (draw nothing)."""
    if stream is None or not is_terminal(stream):
        return None
    return TerminalProgress(stream, label)


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
