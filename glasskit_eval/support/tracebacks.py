"""Adapter tracebacks as text: kept in results, shortened to one frame for the console (pure)."""

from __future__ import annotations

import re
import traceback
from pathlib import Path

#: Our package's import name (``x._vendor.glasskit_eval`` when vendored); frames are told apart by
#: the module they run in, not by file paths (a zipapp has none).
_PACKAGE = __name__.rsplit(".", 2)[0]
#: Frames of the machinery between our runner and the adapter's code: noise to the reader.
_PLUMBING = ("asyncio", "concurrent", "threading.py")

_PYTHON_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$', re.M)
# V8 and friends: "    at fn (file:line:col)" or "    at file:line:col"; the first is the innermost.
_JS_FRAME = re.compile(r"^\s*at (?:(?P<func>.+?) \()?(?P<file>[^()\s]+?):(?P<line>\d+)(?::\d+)?\)?\s*$", re.M)


def _ours(module: str, filename: str) -> bool:
    if module == _PACKAGE or module.startswith(_PACKAGE + "."):
        return True
    parts = Path(filename).parts
    return any(p in parts for p in _PLUMBING)


def adapter_traceback(exc: BaseException) -> str:
    """The traceback of an exception raised by adapter code, without our runner's frames.

    An exception that carries a ``stack`` (a command adapter's error answer) yields that
    stack; when every frame is ours (nothing of the adapter's), the full traceback is kept.
    """
    stack = getattr(exc, "stack", None)
    if isinstance(stack, str) and stack.strip():
        return stack
    frames = traceback.extract_tb(exc.__traceback__)
    modules = [frame.f_globals.get("__name__", "") for frame, _line in traceback.walk_tb(exc.__traceback__)]
    theirs = [f for f, module in zip(frames, modules) if not _ours(module, f.filename)]
    shown = traceback.StackSummary.from_list(theirs or frames)
    lines = ["Traceback (most recent call last):\n", *shown.format(),
             *traceback.format_exception_only(type(exc), exc)]
    return "".join(lines)


def last_frame(text: str) -> str | None:
    """``file:line in function`` of the innermost frame of a Python or JavaScript stack."""
    python = list(_PYTHON_FRAME.finditer(text))
    if python:
        m = python[-1]
        return f"{m['file']}:{m['line']} in {m['func']}"
    js = _JS_FRAME.search(text)
    if js:
        func = js["func"] or "<anonymous>"
        return f"{js['file']}:{js['line']} in {func}"
    return None
