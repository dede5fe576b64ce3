"""A command adapter's stdin: whole NDJSON lines, each written piece by piece.

A request for a 1080p frame is megabytes of base64. Joined into one line and handed to the
pipe transport, it would exist twice (the line, then the transport's copy of what the pipe
did not take at once), for every call in flight. Written a piece (a strip of the frame) at a
time, waiting for the pipe between pieces, neither copy is made. No other message may come in
between the pieces of a line, so lines are written one at a time, and a short message that
comes up meanwhile (a ``cancel`` notification) follows the line being written.
"""

from __future__ import annotations

import asyncio
import contextlib


class LineWriter:
    """Writes lines to ``stdin``, one at a time."""

    def __init__(self, stdin: asyncio.StreamWriter) -> None:
        self._stdin = stdin
        self._lock = asyncio.Lock()
        self._writing = False
        self._deferred: list[bytes] = []

    async def write_line(self, pieces: list[bytes]) -> None:
        """Write the pieces (consumed: each is dropped once written) as one line.

        Raises ``ConnectionError``/``OSError`` when the adapter stops reading.
        """
        async with self._lock:
            self._writing = True
            try:
                pieces.reverse()
                while pieces:
                    self._stdin.write(pieces.pop())
                    await self._stdin.drain()
            finally:
                self._writing = False
                deferred, self._deferred = self._deferred, []
                for message in deferred:
                    self.write_message(message)

    def write_message(self, message: bytes) -> None:
        """A short message, now or right after the line being written; dropped if stdin is closed."""
        if self._writing:
            self._deferred.append(message)
        elif not self._stdin.is_closing():
            with contextlib.suppress(Exception):
                self._stdin.write(message)
