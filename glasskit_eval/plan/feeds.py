"""Stream feeds: which frames a stream target is fed, in presentation order (pure).

Without ``every_s`` a stream gets every decoded frame. With it, the grid ``0, every_s,
2*every_s, ...`` up to the clip's end, each time mapped to its frame by the single-sample
rule (nearest, ties to the earlier frame: ``video.timeline``, as clips use), and a
frame that two grid times map to is fed once, at its first grid time's turn.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from ..video.frametable import FrameTable
from ..video.timeline import timeline


class FeedFrame(NamedTuple):
    """One frame of a feed: its index and its media time (rebased to the first frame)."""

    frame_index: int
    media_time: Fraction


def grid(end_time: Fraction, every_s: Fraction) -> list[Fraction]:
    """``k * every_s`` for k = 0, 1, ... while at most ``end_time``, exact (never accumulated)."""
    return [k * every_s for k in range(int(end_time // every_s) + 1)]


def feed(table: FrameTable, end_time: Fraction, every_s: Fraction | None) -> tuple[FeedFrame, ...]:
    """The frames a stream is fed, in presentation order, each once."""
    frames = timeline(table)
    if every_s is None:
        return tuple(FeedFrame(i, frames.time(i)) for i in frames.between(Fraction(0), end_time))
    seen: set[int] = set()
    out = []
    for t in grid(end_time, every_s):
        index = frames.nearest(t)
        if index not in seen:
            seen.add(index)
            out.append(FeedFrame(index, frames.time(index)))
    # Nearest-frame mapping is monotone, so the grid order is presentation order already.
    return tuple(out)
