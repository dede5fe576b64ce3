"""Frame times and the selection rule, for every frame table: the one place they are stated.

A requested time gets the frame whose rebased presentation time is nearest; a tie goes to
the earlier frame (the adapter reference's rule, which ``decode_at`` follows). A table with
a timestamp on every packet answers from those timestamps (:meth:`FrameTable.select`, in
exact ticks); a video without timestamps has its frames placed at ``index / average_rate``
(30 fps when the container gives no rate), as the sequential decode's ``FrameClock`` places
them, and the same rule is applied to those estimated times.

Planning (clips, stream feeds), the decode-cost model and the review page ask a
:class:`Timeline` and never restate the rule.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

from .frametable import FrameTable

#: The rate frames are placed at when a video without timestamps gives none (as ``FrameClock``).
DEFAULT_RATE = Fraction(30)


def nearest_at_rate(want: Fraction, rate: Fraction) -> int:
    """Index of the frame nearest ``want`` among frames at ``index / rate``; ties to the earlier.

    Not clamped to the video: a time before 0 gives a negative index.
    """
    position = want * rate
    below = math.floor(position)
    # Exactly halfway is a tie: the earlier frame (round() would send 1.5 to 2).
    return below + 1 if position - below > Fraction(1, 2) else below


class Timeline:
    """The frames of a video with a timestamp on every packet, numbered as the decoder numbers them."""

    def __init__(self, table: FrameTable) -> None:
        self._table = table

    @property
    def estimated(self) -> bool:
        """True when the times are placed by frame rate, not read from timestamps."""
        return False

    @property
    def count(self) -> int:
        return len(self._table.pts)

    def time(self, index: int) -> Fraction:
        """Rebased media time of frame ``index`` (the first frame is at 0)."""
        return self._table.time_of(index)

    @property
    def times(self) -> tuple[Fraction, ...]:
        return tuple(self.time(i) for i in range(self.count))

    def nearest(self, want: Fraction) -> int:
        """Index of the frame ``want`` selects: nearest, ties to the earlier frame."""
        return self._table.select(want)

    def between(self, start: Fraction, end: Fraction) -> range:
        """Indexes of the frames whose times lie in the closed interval ``[start, end]``."""
        if end < start:
            return range(0)
        pts, base = self._table.pts, self._table.time_base
        # Compared in exact ticks, as ``select`` does.
        return range(bisect.bisect_left(pts, start / base + pts[0]), bisect.bisect_right(pts, end / base + pts[0]))


class _EstimatedTimeline(Timeline):
    """Frames without timestamps: placed at ``index / average_rate``, as the sequential decode does."""

    def __init__(self, table: FrameTable) -> None:
        super().__init__(table)
        self._rate = table.average_rate or DEFAULT_RATE
        self._count = table.packet_count

    @property
    def estimated(self) -> bool:
        return True

    @property
    def count(self) -> int:
        return self._count

    def time(self, index: int) -> Fraction:
        return index / self._rate

    def nearest(self, want: Fraction) -> int:
        return min(max(nearest_at_rate(want, self._rate), 0), self._count - 1)

    def between(self, start: Fraction, end: Fraction) -> range:
        first = max(math.ceil(start * self._rate), 0)
        last = min(math.floor(end * self._rate), self._count - 1)
        return range(first, last + 1) if last >= first else range(0)


def timeline(table: FrameTable) -> Timeline:
    """The timeline of ``table``: from its timestamps, or estimated when any packet lacks one."""
    return _EstimatedTimeline(table) if table.packets_without_pts or not table.pts else Timeline(table)
