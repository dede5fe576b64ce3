"""The selection rule, as pure state: which frame each requested time gets.

A sample gets the decoded frame whose media timestamp, rebased to the clip's first frame,
is nearest to the requested time; a tie goes to the earlier frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image


@dataclass
class DecodedFrame:
    """A selected frame: display-oriented RGB image plus where it sits in the clip."""

    index: int
    media_time: Fraction
    image: Image.Image


class NearestSelector:
    """Pure selection state: feed frame timestamps in order, get settled requests.

    ``times`` must be sorted ascending. ``push`` returns the requests settled by
    the frame *before* the pushed one (``"prev"``) or by the pushed one itself
    (``"this"``), in request order.
    """

    def __init__(self, times: Sequence[Fraction]) -> None:
        self._times = list(times)
        self._next = 0
        self._prev_time: Fraction | None = None

    @property
    def done(self) -> bool:
        return self._next >= len(self._times)

    def push(self, time: Fraction) -> list[tuple[Fraction, str]]:
        settled: list[tuple[Fraction, str]] = []
        while self._next < len(self._times):
            want = self._times[self._next]
            if time < want:
                break
            if self._prev_time is not None and want - self._prev_time <= time - want:
                settled.append((want, "prev"))
            else:
                settled.append((want, "this"))
            self._next += 1
        self._prev_time = time
        return settled

    def finish(self) -> list[Fraction]:
        """Requests left after the last frame: they all get the last frame."""
        rest = self._times[self._next:]
        self._next = len(self._times)
        return rest
