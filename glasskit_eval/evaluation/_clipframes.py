"""Clip samples' frames: each distinct frame decoded and converted once, shared by reference.

Overlapping clips (a sliding window over a range) name the same frames many times. A case
with clips is served by one decode in presentation order per pass (passes as in
``_ordering``): each frame a pass produces becomes a :class:`SharedFrame`, handed to every
sample that uses it as the same image (never copied), and closed when the last holder lets
go. A frame decoded before a sample needs it waits in a :class:`SharedStore`: as an image up
to a memory budget, beyond it as raw pixels in the frame store's temporary file. So memory
holds the clips in flight, the frames kept for the next ones and the decode queue, whatever
the length of the video.

Frames are asked for at their own presentation time (the clip entry's ``media_time``), so
frames that several clips reach from different requested times are one request. A sample
without a clip is asked for at its own time, as everywhere else.

Everything but :meth:`SharedFrame.release` and :meth:`HeldFrames.release` runs on the
decoding thread; those two are called on the event loop when a call is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Hashable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from ..plan.schedule import ScheduledSample
from ..video.frames import DecodedFrame
from ._framestore import MEMORY_BUDGET, FrameStore, image_bytes
from ._ordering import TIME, DecodePass, Decoder, plan_passes, served_in_passes, target_groups

if TYPE_CHECKING:
    from PIL import Image


class SharedFrame:
    """A decoded frame and the number of holders of its image; the last release closes it."""

    __slots__ = ("_holders", "_lock", "image", "index", "media_time")

    def __init__(self, index: int, media_time: Fraction, image: Image.Image) -> None:
        self.index = index
        self.media_time = media_time
        self.image = image
        self._holders = 1  # whoever made it
        self._lock = threading.Lock()

    def hold(self) -> SharedFrame:
        with self._lock:
            assert self._holders > 0, "a released frame cannot be held again"
            self._holders += 1
        return self

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            last = self._holders == 0
        if last:
            self.image.close()


class HeldFrames:
    """A sample's frames while its call runs: one per clip entry (or the one frame), in time order.

    ``times`` are the requested times, ``anchor`` the position of the sample time's frame. The
    images may be shared with other samples' frames: :meth:`release` (once) lets go of them.
    """

    __slots__ = ("_release", "anchor", "clip", "frames", "times")

    def __init__(self, frames: tuple[DecodedFrame, ...], times: tuple[Fraction, ...], anchor: int, clip: bool,
                 release: Callable[[], None]) -> None:
        self.frames = frames
        self.times = times
        self.anchor = anchor
        self.clip = clip
        self._release: Callable[[], None] | None = release

    @classmethod
    def single(cls, time: Fraction, frame: DecodedFrame) -> HeldFrames:
        """A single-frame sample's frame, which it owns."""
        return cls((frame,), (time,), 0, False, frame.image.close)

    @property
    def anchor_frame(self) -> DecodedFrame:
        return self.frames[self.anchor]

    @property
    def image(self) -> Image.Image:
        return self.frames[self.anchor].image

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class SharedStore:
    """Frames decoded before their turn, each with the number of takes still to come.

    The first ``memory_budget`` bytes stay as shared images (a take holds the same image);
    the rest go to a :class:`FrameStore` that keeps nothing in memory, and each take reads
    the pixels back into a fresh image. Not thread-safe: the decoding thread owns it.
    """

    def __init__(self, memory_budget: int | None = None, directory: str | None = None) -> None:
        self.memory_budget = MEMORY_BUDGET if memory_budget is None else memory_budget
        self._memory: dict[Hashable, list[SharedFrame | int]] = {}
        self._spill = FrameStore(memory_budget=0, directory=directory)
        self.in_memory = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self._memory or key in self._spill

    @property
    def spilled_frames(self) -> int:
        return self._spill.spilled_frames

    def put(self, key: Hashable, decoded: DecodedFrame, uses: int) -> None:
        """Keep a frame decoded before its turn (its image is the store's now) for ``uses`` takes."""
        self.serve(key, decoded, uses).release()

    def serve(self, key: Hashable, decoded: DecodedFrame, uses: int) -> SharedFrame:
        """The frame for the use at hand, which the caller holds, kept for ``uses`` more takes."""
        frame = SharedFrame(decoded.index, decoded.media_time, decoded.image)
        if uses:
            try:
                self.share(key, frame, uses)
            except BaseException:
                frame.release()
                raise
        return frame

    def share(self, key: Hashable, frame: SharedFrame, uses: int) -> None:
        """Keep ``frame`` for ``uses`` takes; the caller keeps its own hold."""
        assert uses > 0 and key not in self
        size = image_bytes(*frame.image.size)
        if self.in_memory + size <= self.memory_budget:
            self.in_memory += size
            self._memory[key] = [frame.hold(), uses, size]
            return
        self._spill.put_copy(key, DecodedFrame(frame.index, frame.media_time, frame.image), uses)

    def take(self, key: Hashable) -> SharedFrame:
        """The frame for one use; the caller holds it (and releases it when done)."""
        kept = self._memory.get(key)
        if kept is None:
            decoded = self._spill.take(key)
            return SharedFrame(decoded.index, decoded.media_time, decoded.image)
        frame, uses, size = kept
        assert isinstance(frame, SharedFrame) and isinstance(uses, int) and isinstance(size, int)
        frame.hold()
        kept[1] = uses - 1
        if uses == 1:
            del self._memory[key]
            self.in_memory -= size
            frame.release()
        return frame

    def close(self) -> None:
        for kept in self._memory.values():
            frame = kept[0]
            assert isinstance(frame, SharedFrame)
            frame.release()
        self._memory.clear()
        self.in_memory = 0
        self._spill.close()


def frame_times(sample: ScheduledSample) -> tuple[Fraction, ...]:
    """The times a sample's frames are decoded for, one per clip entry (the sample time without a clip)."""
    if sample.clip is None:
        return (sample.time,)
    return tuple(entry.media_time for entry in sample.clip.entries)


ClipItems = Generator[tuple[ScheduledSample, HeldFrames], None, None]


def _held(current: DecodePass[SharedFrame], sample: ScheduledSample) -> HeldFrames:
    """The sample's frames from its pass, each distinct time taken once."""
    times = frame_times(sample)
    taken: dict[Fraction, SharedFrame] = {}
    try:
        for time in sorted(set(times)):
            taken[time] = current.take(time)
    except BaseException:
        for frame in taken.values():
            frame.release()
        raise
    frames = tuple(DecodedFrame(taken[t].index, taken[t].media_time, taken[t].image) for t in times)
    shared = tuple(taken.values())

    def release() -> None:
        for frame in shared:
            frame.release()

    if sample.clip is None:
        return HeldFrames(frames, (sample.time,), 0, False, release)
    return HeldFrames(frames, sample.clip.times, sample.clip.anchor, True, release)


def clip_items(path: Path, samples: Sequence[ScheduledSample], decode: Decoder, order: str,
               store: SharedStore | None = None) -> ClipItems:
    """Samples in call order, each with its frames; every distinct frame of a pass decoded once.

    In time order one pass serves all samples, each as soon as its last frame is decoded; in
    declaration order the targets come one after the other, all served by one pass unless
    keeping their frames would pass the spill limit (then a target gets a pass of its own).
    """
    if order == TIME:
        groups = [sorted(samples, key=lambda s: (max(frame_times(s)), s.time, s.sample_index))]
        numbers = [0]
    else:
        groups = target_groups(samples)
        numbers = plan_passes(path, groups, frame_times, once=True)
    mine = store if store is not None else SharedStore()
    yield from served_in_passes(groups, numbers,
                                lambda number, members: DecodePass(number, path, members, decode, mine, frame_times),
                                _held, mine.close)
