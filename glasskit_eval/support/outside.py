"""Text from outside (adapters, model servers, observations, names) made safe to print.

Such text is printed inside our own lines, never as a line of its own (and :class:`LineGuard`
makes sure of it for every line the command line prints): a line that starts with ``::`` is a
GitHub Actions workflow command, and control characters move the cursor, clear the
screen or end a line where the reader cannot see it. Control characters are written as escapes
(``\\n``, ``\\x1b``), and text of several lines gets a ``| `` in front of each.
"""

from __future__ import annotations

import re
import unicodedata

# Imported by the command line's face before `--help`: typing stays out of its start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _is_control(char: str) -> bool:
    # Cc: C0, DEL and C1 (\x9b is a terminal's CSI); Zl/Zp: U+2028/U+2029 end lines in some viewers.
    return unicodedata.category(char) in ("Cc", "Zl", "Zp")


def inline(text: str) -> str:
    """``text`` on one line: every control character (line ends included) escaped."""
    if text.isprintable():
        return text
    return "".join(_escape(c) if _is_control(c) else c for c in text)


def quoted_lines(text: str, prefix: str = "| ") -> str:
    """``text`` kept as lines, each escaped and led by ``prefix`` (which must not be blank)."""
    return "\n".join(prefix + inline(line) for line in text.rstrip("\n").split("\n"))


def guard_lines(text: str) -> str:
    """Our own message, which may quote outside text: control characters other than line ends
    escaped, and a line that would start (after blanks) with ``::`` led by ``| ``."""
    lines = []
    for line in text.split("\n"):
        line = "".join(_escape(c) if _is_control(c) else c for c in line)
        lines.append("| " + line if line.lstrip().startswith("::") else line)
    return "\n".join(lines)


def control_characters(text: str) -> str:
    """The control characters in ``text``, each once and escaped (``\\n, \\x1b``); empty if none."""
    found = dict.fromkeys(c for c in text if _is_control(c))
    return ", ".join(_escape(c) for c in found)


_BREAKS = re.compile(r"(\r\n|\n|\r)")


class LineGuard:
    """A text stream on which no line starts (after blanks) with ``::`` unless it is a command.

    GitHub Actions reads such a line on stdout or stderr as a workflow command, so a name or a
    wrapped table cell that puts ``::`` at the start of a line gets ``| `` in front of it. Our own
    commands (annotations, log groups) go through :func:`write_command`. Everything else is the
    wrapped stream's.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        #: Only blanks since the last line end.
        self._blank = True

    @classmethod
    def around(cls, stream: TextIO) -> TextIO:
        """``stream`` guarded, as the text stream it stands in for."""
        wrapped: TextIO = cls(stream)  # type: ignore[assignment]  # a TextIO by delegation
        return wrapped

    def write(self, text: str) -> int:
        pieces = []
        for piece in _BREAKS.split(text):
            if not piece:
                continue
            if _BREAKS.fullmatch(piece):
                self._blank = True
            elif self._blank and piece.strip(" \t"):
                # A lone ":" may be completed by the next write.
                if piece.lstrip(" \t").startswith("::") or piece.strip(" \t") == ":":
                    piece = "| " + piece
                self._blank = False
            pieces.append(piece)
        self._stream.write("".join(pieces))
        return len(text)

    def write_command(self, line: str) -> None:
        # A command is a line of its own: one after text would not be read as one.
        self._stream.write(("" if self._blank else "\n") + line + "\n")
        self._blank = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def write_command(stream: TextIO, line: str) -> None:
    """Our own workflow command ``line`` on ``stream``, past its :class:`LineGuard` if it has one."""
    command = getattr(stream, "write_command", None)
    if command is not None:
        command(line)
    else:
        stream.write(line + "\n")
