"""The operating-system side of command adapters: process groups and stderr mirroring.

Kept apart from ``process`` (the protocol-speaking evaluator) because it is plain
process plumbing: signalling and sweeping a process group, describing how a process
ended, and copying its stderr to ours while remembering the last lines for errors.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final, TextIO

_STDERR_TAIL_LINES: Final = 20
_STDERR_LINE_CHARS: Final = 500
READ_CHUNK: Final = 1 << 20


async def read_chunks(stream: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """A pipe's data as it arrives, until end of file (a broken pipe counts as the end)."""
    while True:
        try:
            chunk = await stream.read(READ_CHUNK)
        except (ConnectionError, OSError):
            return
        if not chunk:
            return
        yield chunk


# Process groups started and not yet swept, killed at interpreter exit as a last
# resort (for example when the event loop is torn down by a second Ctrl-C).
_live_groups: set[int] = set()
_atexit_registered = False


def track_group(pgid: int) -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_kill_leftover_groups)
        _atexit_registered = True
    _live_groups.add(pgid)


def untrack_group(pgid: int) -> None:
    _live_groups.discard(pgid)


def _kill_leftover_groups() -> None:
    for pgid in list(_live_groups):
        signal_group(pgid, signal.SIGKILL)
    _live_groups.clear()


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def live_group_members(pgid: int) -> bool:
    """Whether any process of the group is still alive (zombies do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # killpg(pgid, 0) also succeeds for zombies, and orphans stay zombies for as long
    # as PID 1 neglects to reap them (common in containers), so read states instead.
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat.rpartition(b")")[2].split()
        # After the command name: state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


def describe_returncode(returncode: int | None) -> str:
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


class StderrMirror:
    """Copies the adapter's stderr to ours line by line and keeps its last lines."""

    def __init__(self, sink: TextIO | None) -> None:
        self._sink = sink
        self.tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)

    async def pump(self, stream: asyncio.StreamReader) -> None:
        partial = bytearray()
        async for chunk in read_chunks(stream):
            partial += chunk
            lines = partial.split(b"\n")
            partial = bytearray(lines.pop())
            # A very long unterminated line is shown rather than held back forever.
            if len(partial) > 64 * 1024:
                lines.append(bytearray(partial))
                partial.clear()
            for line in lines:
                self._emit(line)
        if partial:
            self._emit(bytes(partial))

    def _emit(self, raw: bytes | bytearray) -> None:
        text = bytes(raw).decode("utf-8", errors="replace").rstrip("\r")
        sink = self._sink if self._sink is not None else sys.stderr
        with contextlib.suppress(Exception):
            sink.write(text + "\n")
            sink.flush()
        if len(text) > _STDERR_LINE_CHARS:
            text = text[: _STDERR_LINE_CHARS - 1] + "…"
        self.tail.append(text)

    def render(self) -> str:
        if not self.tail:
            return "It wrote nothing to stderr."
        lines = "\n".join(f"  | {line}" for line in self.tail)
        return f"Last lines of its stderr:\n{lines}"
