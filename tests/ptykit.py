"""Run a command on a real pseudo-terminal, as a user's shell would: the terminal is its controlling
terminal, so writing Ctrl+C to it interrupts the command the way a keypress does."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class PtyRun:
    returncode: int
    #: Everything the terminal received, bytes as written (``\n`` arrives as ``\r\n``).
    output: bytes

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", errors="replace")


def _controlling_terminal() -> None:
    # In the child, after setsid (start_new_session): make stdin's terminal ours.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def run_in_pty(args: list[str], *, cwd: Path = ROOT, columns: int = 200, timeout: float = 120,
               when: Callable[[bytes], bytes | None] | None = None) -> PtyRun:
    """Run ``python -m glasskit_eval *args`` on a new terminal of ``columns`` columns.

    ``when`` sees the output so far after each read and may return bytes to type (once: after it
    returns something it is not asked again).
    """
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm", "COLUMNS": str(columns), "PYTHONUNBUFFERED": "1"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "glasskit_eval", *args], cwd=cwd, env=env, stdin=terminal,
                            stdout=terminal, stderr=terminal, start_new_session=True,
                            preexec_fn=_controlling_terminal)
    os.close(terminal)
    output = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"still running after {timeout}s:\n{output.decode(errors='replace')}")
            ready, _, _ = select.select([controller], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    chunk = b""
                if not chunk:
                    break
                output += chunk
                if when is not None:
                    typed = when(bytes(output))
                    if typed:
                        os.write(controller, typed)
                        when = None
            elif proc.poll() is not None and not select.select([controller], [], [], 0.2)[0]:
                break
        return PtyRun(proc.wait(timeout=30), bytes(output))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
