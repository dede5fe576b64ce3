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
    """The frames a stream is fed, in presentation order, each once.

    The grid is walked against the frames, not listed: after a grid time lands on a frame, the walk
    jumps to the first grid time past the midpoint to the next frame (the earliest that can land
    on a later frame), so a grid far finer than the frames (``every_s: 1e-9``) costs one step per
    frame fed, not one per grid time.
    """
    frames = timeline(table)
    if every_s is None:
        return tuple(FeedFrame(i, frames.time(i)) for i in frames.between(Fraction(0), end_time))
    last_k = int(end_time // every_s)
    count = frames.count
    out: list[FeedFrame] = []
    k = 0
    while k <= last_k:
        index = frames.nearest(k * every_s)
        if not out or index > out[-1].frame_index:
            out.append(FeedFrame(index, frames.time(index)))
        if index + 1 >= count:
            break  # every later grid time lands on this last frame again
        # Nearest-frame mapping is monotone (ties to the earlier frame), so grid times up to the
        # midpoint land on this frame or an earlier one: the next candidate is the first past it.
        middle = (frames.time(index) + frames.time(index + 1)) / 2
        k = max(k + 1, int(middle // every_s) + 1)
    return tuple(out)
