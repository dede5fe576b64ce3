"""A file of similar name beside one that is missing: the likely typo in a path a user wrote."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

#: A directory this large is not searched: the hint is not worth a slow error.
_MAX_ENTRIES = 5000


def similar_file(path: Path) -> Path | None:
    """The file in ``path``'s directory whose name is closest to ``path``'s, if one is close enough."""
    folder = path.parent
    try:
        with os.scandir(folder) as entries:
            names = []
            for n, entry in enumerate(entries):
                if n >= _MAX_ENTRIES:
                    return None
                if entry.is_file() and not entry.name.startswith("."):
                    names.append(entry.name)
    except OSError:
        return None
    wanted = path.name
    same_but_case = [n for n in names if n.lower() == wanted.lower()]
    if same_but_case:
        return folder / same_but_case[0]
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(wanted.lower(), list(lowered), n=1, cutoff=0.6)
    return folder / lowered[close[0]] if close else None


def did_you_mean(path: Path) -> str:
    """``; did you mean clip.mp4 (beside it)?`` or nothing."""
    found = similar_file(path)
    return f"; did you mean {found.name} (in the same folder)?" if found is not None else ""
