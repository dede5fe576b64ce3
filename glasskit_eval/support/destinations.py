"""Checks that output destinations are writable, made before any adapter is created.

A run that can only fail to write its report at the end has wasted every adapter call
(minutes or hours with a real model). Each destination's directory is created and probed
with a temporary file, which is removed again.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import OutputError


@dataclass(frozen=True)
class Destination:
    path: Path
    #: How the user names it: ``--output-json``, ``--artifacts-dir``.
    option: str
    #: A directory to write into (True) or a file to write (False).
    directory: bool = False


def check_writable(destinations: list[Destination]) -> None:
    """Raise :class:`OutputError` (exit 2) for the first destination that cannot be written."""
    for d in destinations:
        problem = _problem(d)
        if problem is not None:
            raise OutputError(f"{d.option} {d.path}: {problem}; choose another path or fix the "
                              f"directory's permissions (checked before calling the adapter)")


def _problem(d: Destination) -> str | None:
    path = d.path.expanduser()
    if d.directory:
        if path.exists() and not path.is_dir():
            return "exists and is not a directory"
        folder = path
    else:
        if path.is_dir():
            return "is a directory; give a file path"
        if path.exists() and not path.is_file():
            # A device or pipe (/dev/stdout, a FIFO) is written through, not replaced.
            return None if os.access(path, os.W_OK) else "is not writable"
        # A symlink is followed: the file it points to is replaced, next to itself.
        folder = path.resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".glasskit-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write in {folder} ({exc.strerror or exc})"
    return None
