"""Plain-text table cells and tables for the console and every text report.

Formatting only: no result model, no I/O, so any reporter can use it without the console's listener.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from fractions import Fraction
from typing import Any


def compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def ms(value: float | Fraction | None, sign: str = "") -> str:
    """Seconds as whole milliseconds (``120ms``; ``sign="+"`` for a change: ``+35ms``), ``-`` for none."""
    return "-" if value is None else f"{float(value) * 1000:{sign}.0f}ms"


def seconds(value: float) -> str:
    return f"{value:.1f}s"


def plural(count: int, one: str, many: str | None = None) -> str:
    """``1 stream``, ``2 streams``; ``many`` where adding an ``s`` is wrong."""
    return f"{count} {one if count == 1 else many or one + 's'}"


def time_label(value: float) -> str:
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


#: Console tables fit this many columns: the last column wraps instead of running on.
WIDTH = 80
#: The narrowest a wrapped last column gets, however wide the others are.
MIN_LAST_COLUMN = 20


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]],
          right: Sequence[bool] | None = None, width: int | None = None) -> str:
    """A plain aligned table; the first column is left-aligned, numbers right-aligned.

    With ``width`` (the run's summary tables: :data:`WIDTH`), when the rows would be wider, the last
    column (a reason, a detail) wraps onto continuation lines under itself; nothing is cut. Without
    it a row stays one line (listings that people grep).
    """
    import textwrap

    align = list(right) if right is not None else [i > 0 for i in range(len(headers))]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lead = sum(widths[:-1]) + 2 * (len(widths) - 1)
    if width is not None:
        widths[-1] = min(widths[-1], max(MIN_LAST_COLUMN, width - lead, len(headers[-1])))

    def fmt(cells: Sequence[str]) -> list[str]:
        parts = [c.rjust(widths[i]) if align[i] else c.ljust(widths[i]) for i, c in enumerate(cells[:-1])]
        wrapped = textwrap.wrap(cells[-1], widths[-1], break_on_hyphens=False) or [""]
        if len(wrapped) == 1 and align[-1]:
            wrapped = [wrapped[0].rjust(widths[-1])]
        out = ["  ".join([*parts, wrapped[0]]).rstrip()]
        out += [(" " * (lead + 2) if len(cells) > 1 else "") + more for more in wrapped[1:]]
        return out

    lines = [title, *fmt(headers), "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.extend(fmt(row))
    return "\n".join(lines)
