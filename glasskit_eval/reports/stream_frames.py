"""The frames the HTML report shows for stream targets: each missed event's and each false alarm's.

During a run, :class:`StreamFrames` is the stream engine's frame keeper
(:class:`~glasskit_eval.evaluation.streams.StreamFrameKeeper`): it sees the exact images the run
decoded, before they are closed, so a picture costs one thumbnail and never a second decode.

Bounded by design, whatever the adapter emits:

- a **miss** is known only once the stream is scored, but its frame is known before: the fed frame
  nearest the event's ``at`` (ties to the earlier). The engine hands over one frame per event; its
  thumbnail waits here until the stream finishes, then goes into the shared
  :class:`~.thumbnails.ThumbnailStore` if the event was missed and is dropped if it was detected.
  Waiting thumbnails are at most one per event of the streams in flight (one case at a time).
- a **false alarm** is known when it is emitted (outside every window, in quiet time: the scorer's
  own rule), so its frame (the one the answer was about) goes straight into the store; at most
  :data:`MAX_FALSE_ALARM_FRAMES` per stream, since a misbehaving adapter can emit on every frame.

Both share the store's budget and its keys (case, frame index): a frame that is also a failed
sample's has one picture (an arm's streams are pictured by the decoded frame, before any
perturbation). The references (which frame each miss and false alarm points at) are kept by
stream, (case, target, trial, arm), for the renderer.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..plan.feeds import FeedFrame
    from ..results import StreamResult
    from .thumbnails import ThumbnailStore

#: A stream: (case, target, trial, arm; None in a plain run).
StreamKey = tuple[str, str, int, str | None]

#: False alarms per stream whose frames are kept (the rest are listed without one).
MAX_FALSE_ALARM_FRAMES = 50


class StreamFrames:
    """Keeps miss and false-alarm frames of a run's streams as thumbnails in ``store``."""

    def __init__(self, store: ThumbnailStore) -> None:
        self.store = store
        #: By stream: event index -> frame index of each missed event (once its stream finished).
        self.misses: dict[StreamKey, dict[int, int]] = {}
        #: By stream: emission time -> frame index of each false alarm whose frame was kept.
        self.alarms: dict[StreamKey, dict[Fraction, int]] = {}
        #: Onset thumbnails of streams still running: event index -> (frame index, JPEG or None).
        self._onsets: dict[StreamKey, dict[int, tuple[int, bytes | None]]] = {}

    def onset(self, key: StreamKey, event: int, frame: FeedFrame, image: Any) -> None:
        waiting = self._onsets.setdefault(key, {})
        if event in waiting:
            return
        jpeg = None
        if self.store.needs((key[0], frame.frame_index)):
            try:
                jpeg = self.store.thumbnail(image)
            except Exception:  # a picture is not worth a failed run
                jpeg = None
        waiting[event] = (frame.frame_index, jpeg)

    def false_alarm(self, key: StreamKey, time: Fraction, frame: FeedFrame, image: Any) -> None:
        kept = self.alarms.setdefault(key, {})
        if time in kept or len(kept) >= MAX_FALSE_ALARM_FRAMES:
            return
        thumb = (key[0], frame.frame_index)
        if self.store.needs(thumb):
            if self.store.used_bytes >= self.store.budget_bytes:
                self.store.over_budget.add(thumb)
            else:
                try:
                    self.store.add(thumb, self.store.thumbnail(image))
                except Exception:
                    self.store.failed.add(thumb)
        kept[time] = frame.frame_index

    def finished(self, result: StreamResult) -> None:
        key = (result.case, result.target, result.trial, result.arm)
        waiting = self._onsets.pop(key, {})
        missed = self.misses.setdefault(key, {})
        for event in result.events:
            if event.detected or event.index not in waiting:
                continue
            frame_index, jpeg = waiting[event.index]
            thumb = (result.case, frame_index)
            if jpeg is not None and self.store.needs(thumb):
                self.store.add(thumb, jpeg)
            missed[event.index] = frame_index
