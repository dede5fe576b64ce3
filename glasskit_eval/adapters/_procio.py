"""The operating-system side of command adapters: process groups and stderr mirroring.

Kept apart from ``process`` (the protocol-speaking evaluator) because it is plain
process plumbing: signalling and sweeping a process group, describing how a process
ended, and copying its stderr to ours while remembering the last lines for errors.

A descendant that calls ``setsid()`` (a daemonizing helper) leaves the adapter's process
group, and once its parent exits nothing links it to us. Each adapter is therefore
started with a random tag in its environment (:data:`TAG_VARIABLE`), which every
descendant inherits, and the sweep also finds processes by that tag (Linux ``/proc``).
Only a descendant that replaces its whole environment escapes it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import secrets
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final, TextIO

from ..support.interrupts import on_forced_exit
from ..support.outside import inline, quoted_lines

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


#: The environment variable that marks an adapter's descendants (its value is per adapter).
TAG_VARIABLE: Final = "GLASSKIT_EVAL_ADAPTER_TAG"

# Process groups (with their tags) started and not yet swept, killed at interpreter exit,
# or before a forced exit (a second Ctrl-C), as a last resort.
_live_groups: dict[int, str | None] = {}
_atexit_registered = False


def new_tag() -> str:
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def track_group(pgid: int, tag: str | None = None) -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_kill_leftover_groups)
        on_forced_exit(_kill_leftover_groups)
        _atexit_registered = True
    _live_groups[pgid] = tag


def untrack_group(pgid: int) -> None:
    _live_groups.pop(pgid, None)


def _kill_leftover_groups() -> None:
    for pgid, tag in list(_live_groups.items()):
        signal_group(pgid, signal.SIGKILL)
        if tag is not None:
            signal_tagged(tag, signal.SIGKILL)
    _live_groups.clear()


def tagged_processes(tag: str) -> list[int]:
    """Live processes (zombies excluded) whose environment carries ``tag``; [] without /proc."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    needle = f"{TAG_VARIABLE}={tag}".encode()
    me = os.getpid()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue  # gone, or not ours to read (then not ours to signal either)
        if needle in environ.split(b"\0") and stat.rpartition(b")")[2].split()[:1] not in ([b"Z"], [b"X"]):
            found.append(int(entry.name))
    return found


def signal_tagged(tag: str, sig: signal.Signals) -> None:
    for pid in tagged_processes(tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


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


def pipe_holders(fds: list[int]) -> list[str]:
    """Other processes holding the far end of these pipes open, as ``pid N (command line)``.

    Read from ``/proc/*/fd`` (a pipe's two ends share its inode); [] without ``/proc``.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    wanted = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            wanted.add(f"pipe:[{os.fstat(fd).st_ino}]")
    me = str(os.getpid())
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or entry.name == me:
            continue
        try:
            links = {os.readlink(link) for link in (entry / "fd").iterdir()}
            argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        if links & wanted:
            command = inline(" ".join(a.decode("utf-8", "replace") for a in argv))
            found.append(f"pid {entry.name} ({command[:120]})")
    return sorted(found, key=lambda text: int(text.split()[1]))


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


#: What interpreters say when the script they were given does not exist (Node, Python).
_MISSING_SCRIPT = ("Cannot find module", "can't open file")
#: A stderr line that says what went wrong, as opposed to a stack frame or a version banner.
_TELLING = re.compile(r"\b(error|fatal|exception|cannot|can't|not found|no such|denied|failed)\b", re.IGNORECASE)


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
            # Led by "| ": an adapter's line starting with "::" would be a GitHub workflow command.
            sink.write(quoted_lines(text) + "\n")
            sink.flush()
        if len(text) > _STDERR_LINE_CHARS:
            text = text[: _STDERR_LINE_CHARS - 1] + "…"
        self.tail.append(text)

    def render(self, *, just_shown: bool = False) -> str:
        """The stderr tail for an error message; ``just_shown``: the mirror printed it right above.

        A start-up failure is printed right after the mirrored lines: quoting them again would
        show the same stack twice (Node's missing-module stack is a dozen lines).
        """
        if not self.tail:
            return "It wrote nothing to stderr."
        if just_shown and self._sink is not None:
            written = [line for line in self.tail if line.strip()]
            telling = next((line for line in reversed(written) if _TELLING.search(line)),
                           written[-1] if written else "")
            text = f"Its stderr is printed above; the line that tells why:\n  | {inline(telling.strip())}"
            if any(marker in line for line in self.tail for marker in _MISSING_SCRIPT):
                text += ("\nThe script in the adapter command was not found: check its path (a relative path is "
                         "resolved from the current directory).")
            return text
        lines = "\n".join(f"  | {inline(line)}" for line in self.tail)
        return f"Last lines of its stderr:\n{lines}"


#: After SIGKILL, how long to wait for the group to be gone; and how often to look.
_KILL_WAIT_S = 2.0
_POLL_S = 0.02


class GroupReaper:
    """Ends a command adapter's process group and every process carrying its tag.

    ``exited`` says whether the leader's exit has been seen (the caller watches it by
    its exit status). Descendants that left the group with ``setsid()`` are found by
    the environment tag.
    """

    def __init__(self, proc: Any, tag: str | None, exited: Callable[[], bool]) -> None:
        self._proc = proc
        self._tag = tag
        self._exited = exited
        self._swept = False

    def _escaped(self) -> list[int]:
        return tagged_processes(self._tag) if self._tag is not None else []

    def _gone(self) -> bool:
        return self._exited() and not live_group_members(self._proc.pid) and not self._escaped()

    async def terminate(self, terminate_grace_s: float) -> None:
        """SIGTERM, then SIGKILL, the process group until none of it is left."""
        pgid = self._proc.pid
        if self._gone():
            self._swept = True
            untrack_group(pgid)
            return
        for sig, wait_s in ((signal.SIGTERM, terminate_grace_s), (signal.SIGKILL, _KILL_WAIT_S)):
            signal_group(pgid, sig)
            if self._tag is not None:
                signal_tagged(self._tag, sig)
            if await self._wait_gone(wait_s):
                self._swept = True
                untrack_group(pgid)
                return

    async def _wait_gone(self, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self._gone():
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(_POLL_S)

    def kill_now(self) -> None:
        """SIGKILL the group unless it is known to be gone; safe from any context."""
        if self._swept:
            return
        pgid = self._proc.pid
        if self._proc.returncode is not None and not live_group_members(pgid) and not self._escaped():
            self._swept = True
        else:
            signal_group(pgid, signal.SIGKILL)
            if self._tag is not None:
                signal_tagged(self._tag, signal.SIGKILL)
        untrack_group(pgid)


def enlarge_pipe(transport: Any, size: int = 1 << 20) -> None:
    """Give a pipe a larger kernel buffer (best effort, Linux only).

    Frames are megabytes; the default 64 KiB pipe makes every frame cost dozens of wake-ups on
    both sides.
    """
    try:
        import fcntl
    except ImportError:
        return
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    pipe = transport.get_extra_info("pipe")
    if setpipe is None or pipe is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fcntl.fcntl(pipe.fileno(), setpipe, size)
