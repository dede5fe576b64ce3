"""Text from outside (adapters, model servers, observations) made safe to print (pure).

Such text is printed inside our own lines, never as a line of its own: a line that starts with
``::`` is a GitHub Actions workflow command, and control characters move the cursor, clear the
screen or end a line where the reader cannot see it. Control characters are written as escapes
(``\\n``, ``\\x1b``), and text of several lines gets a ``| `` in front of each.
"""

from __future__ import annotations

import unicodedata

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
