"""What an adapter prints during a run: whole lines, named, above the live progress line.

A Python adapter shares our process, so its ``print`` would land in the middle of the live
line; a command adapter's stderr arrives in chunks of any size. Both go through an
:class:`AdapterOutput`: text is held until a line is complete, then printed as
``[adapter.py] the line`` above the live line (or straight to the stream without one).
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, TextIO, cast

#: Command words that run a script: the script, not the interpreter, names the adapter.
_SCRIPT_SUFFIXES = (".mjs", ".cjs", ".js", ".ts", ".py", ".rb", ".sh", ".pl", ".php", ".jar")


class Screen(Protocol):
    def write_above(self, text: str, stream: TextIO | None = None) -> None: ...


def python_adapter_name(target: str) -> str:
    """``eval/adapter.py:create_evaluator`` -> ``adapter.py``; ``my_app.eval:create`` -> ``my_app.eval``."""
    module = target.rsplit(":", 1)[0] if ":" in target[2:] else target
    return Path(module).name or module


def command_adapter_name(command: str) -> str:
    """``node eval/adapter.mjs --fast`` -> ``adapter.mjs``; a bare program names itself."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    scripts = [w for w in words if w.lower().endswith(_SCRIPT_SUFFIXES)]
    if scripts:
        return os.path.basename(scripts[0])
    modules = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-m"]
    if modules:
        return modules[0]
    return os.path.basename(words[0]) if words else "adapter"


class AdapterOutput:
    """Routes an adapter's output lines to ``out``/``err``, above a live line once one is attached."""

    def __init__(self, name: str, out: TextIO, err: TextIO) -> None:
        self.prefix = f"[{name}] "
        self.out = out
        self.err = err
        self._screen: Screen | None = None
        self._lock = threading.Lock()
        self._stdout = LineWriter(self, out)
        self._stderr = LineWriter(self, err)

    @property
    def stdout(self) -> TextIO:
        return cast("TextIO", self._stdout)

    @property
    def stderr(self) -> TextIO:
        return cast("TextIO", self._stderr)

    def attach(self, screen: Screen | None) -> None:
        with self._lock:
            self._screen = screen

    def line(self, text: str, stream: TextIO) -> None:
        text = self.prefix + text
        with self._lock:
            screen = self._screen
            if screen is not None:
                screen.write_above(text, stream)
                return
            with contextlib.suppress(Exception):
                stream.write(text + "\n")
                stream.flush()

    def finish(self) -> None:
        """Print what was left without a newline, and detach from the live line."""
        self._stdout.flush_partial()
        self._stderr.flush_partial()
        self.attach(None)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """While active, ``sys.stdout`` and ``sys.stderr`` are this adapter's (a Python adapter's prints)."""
        with contextlib.redirect_stdout(self.stdout), contextlib.redirect_stderr(self.stderr):
            try:
                yield
            finally:
                self.finish()


class LineWriter(io.TextIOBase):
    """A text stream that hands complete lines to its :class:`AdapterOutput` (any thread)."""

    def __init__(self, owner: AdapterOutput, stream: TextIO) -> None:
        super().__init__()
        self._owner = owner
        self._stream = stream
        self._partial = ""
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        with self._lock:
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()
        for line in lines:
            self._owner.line(line.rstrip("\r"), self._stream)
        return len(text)

    def flush(self) -> None:
        # Line-buffered on purpose: a partial line waits for its end (or for the run's end).
        pass

    def flush_partial(self) -> None:
        with self._lock:
            partial, self._partial = self._partial, ""
        if partial:
            self._owner.line(partial, self._stream)

