"""Text and number formats shared by the HTML report's modules (one format per kind of value)."""

from __future__ import annotations

import html
import json
from typing import Any

from ..results import Status

#: Longest expected/observed/reason text put in the page per sample; the JSON report has the rest.
MAX_TEXT = 2000

STATUS_ORDER = (Status.ERROR, Status.FAILED, Status.PASSED, Status.IGNORED, Status.NOT_EVALUATED)
RANK = {s: i for i, s in enumerate(STATUS_ORDER)}
LETTER = {Status.PASSED: "P", Status.FAILED: "F", Status.ERROR: "E", Status.IGNORED: "I", Status.NOT_EVALUATED: "-"}


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def pct(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.1f}%"


def seconds(value: float | None) -> str:
    """A duration (latency, a trial's length): milliseconds below a second, else seconds."""
    if value is None:
        return "–"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def clip_time(t: float) -> str:
    """A time in the clip, to the millisecond (``1.5 s``); the page's script writes the same form."""
    text = f"{t:.3f}".rstrip("0").rstrip(".")
    return f"{'0' if text in ('', '-0') else text} s"


def meter(rate: float | None) -> str:
    if rate is None:
        return "–"
    return f'<meter min="0" max="1" low="0.999" optimum="1" value="{rate:.4f}"></meter> {pct(rate)}'


def value_text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True,
                                                          default=str)
    return clip(text)


def clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}… ({len(text) - MAX_TEXT} more characters in the JSON report)"


