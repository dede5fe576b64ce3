"""How the review page's errors name a stream target's event: by its onset (``event @ 12.4s``), as the page shows it.

Pure text work on a message and the event list it is about; imports nothing of ``review`` but its errors.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import ApiError

_EVENT_PATH = r"(?:targets\.(?P<target>[^\s.\[]+)\.)?events\[(?P<index>\d+)\]"


def name_events(message: str, target_id: str, events: list[Any]) -> str:
    """``events[1]`` (and ``targets.pan.events[1]``) in ``message`` as ``event @ 12.4s``: the page names events by onset."""
    def at(index: int) -> str | None:
        if index >= len(events) or not isinstance(events[index], dict):
            return None
        value = events[index].get("at")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        return f"{float(value):g}"

    def replace(match: re.Match[str]) -> str:
        if match.group("target") not in (None, target_id):
            return match.group(0)
        when = at(int(match.group("index")))
        if when is None:
            return match.group(0)
        prefix = f"targets.{target_id} " if match.group("target") else ""
        return f"{prefix}event @ {when}s"

    return re.sub(_EVENT_PATH, replace, message)


def named(exc: ApiError, target_id: str, events: list[Any]) -> ApiError:
    """``exc`` with its message and problems naming events by onset."""
    extra = dict(exc.extra)
    if isinstance(extra.get("problems"), list):
        extra["problems"] = [name_events(str(p), target_id, events) for p in extra["problems"]]
    return ApiError(exc.status, exc.code, name_events(exc.message, target_id, events), **extra)
