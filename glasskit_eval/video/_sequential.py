"""The reference decode path: from the start of the file, selecting while decoding.

Used for videos whose frame table cannot be trusted (no seek index, a table the decoder
disagreed with) and as the reference in tests. It reads timestamps from the decoded frames
themselves and holds at most the previous frame.

Packets are decoded one by one, so an undecodable packet (a truncated or damaged file) is
skipped instead of ending the decode. Frames are numbered by the rank of their timestamp
among the packets demuxed so far, so a frame that could not be decoded leaves a gap in the
numbering instead of shifting every later frame, and the gap says which frame was lost.
Frame threading hides which packet failed (the error surfaces later, or not at all, and
more frames are lost), so the first sign of damage restarts the decode single-threaded,
which loses only what is really undecodable.
"""

from __future__ import annotations

import bisect
from collections.abc import Generator, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import VideoError
from ._orientation import Orientation, orientation_from_side_data
from ._pixels import frame_too_large, out_of_memory, rgb_image
from ._segments import frame_threads as frame_thread_count
from ._selection import DecodedFrame, NearestSelector
from .damage import Damage, Warn, nearest_was_lost, report
from .frametable import open_container, video_stream

if TYPE_CHECKING:
    from PIL import Image


class FrameClock:
    """Index and rebased time of decoded frames, fed in output order (pure, no I/O).

    ``packet`` is told the timestamp of every demuxed packet whose frame will be shown;
    ``frame`` returns the index (rank of the frame's timestamp among those packets), the
    rebased time, and the times of frames skipped over (lost) just before this one. Without
    usable timestamps (missing or duplicated) frames are counted instead, and their times
    estimated from the frame rate.
    """

    def __init__(self, time_base: Fraction, average_rate: Fraction | None) -> None:
        self.time_base = time_base
        self.rate = average_rate or Fraction(30)
        self._packets: list[int] = []  # sorted; position = frame index
        self.ranked = True
        self._estimate: bool | None = None  # decided by the first frame
        self._origin: Fraction | None = None
        self._last = -1
        self._pending_skips = 0
        self.guessed = False  # a skipped packet was numbered by guess

    def packet(self, pts: int | None) -> None:
        if not self.ranked:
            return
        if pts is None:
            self.ranked = False
            return
        i = bisect.bisect_left(self._packets, pts)
        if i < len(self._packets) and self._packets[i] == pts:
            self.ranked = False
            return
        self._packets.insert(i, pts)

    def skipped(self) -> None:
        self._pending_skips += 1

    def _time(self, index: int, pts: int | None) -> Fraction:
        if self._estimate:
            return Fraction(index) / self.rate
        assert pts is not None and self._origin is not None
        return pts * self.time_base - self._origin

    def frame(self, pts: int | None) -> tuple[int, Fraction, list[Fraction]]:
        if self._estimate is None:
            self._estimate = pts is None
        elif pts is None:
            self._estimate = True
        index: int | None = None
        if self.ranked and pts is not None:
            i = bisect.bisect_left(self._packets, pts)
            if i < len(self._packets) and self._packets[i] == pts and i > self._last:
                index = i
            else:
                self.ranked = False
        if self._origin is None and not self._estimate:
            assert pts is not None
            self._origin = (self._packets[0] if self.ranked and self._packets else pts) * self.time_base
        lost: list[Fraction] = []
        if index is None:
            if self._pending_skips:
                self.guessed = True
            index = self._last + 1 + self._pending_skips
        elif not self._estimate:
            lost = [self._time(r, self._packets[r]) for r in range(self._last + 1, index)]
        self._pending_skips = 0
        self._last = index
        return index, self._time(index, pts), lost

    def tail_lost(self) -> list[Fraction]:
        """Times of demuxed frames after the last decoded one (none came out)."""
        if not self.ranked or self._estimate or self._origin is None:
            return []
        return [self._time(r, self._packets[r]) for r in range(self._last + 1, len(self._packets))]


class _Retry(Exception):
    """A frame-threaded decode met damage: decode again on one thread."""


def decode_sequential(path: Path, times: Sequence[Fraction], *, damage: Damage | None = None,
                      warn: Warn | None = None) -> Generator[tuple[Fraction, DecodedFrame], None, None]:
    """Decode ``path`` from the start; yield ``(requested time, frame)`` per distinct time, ascending.

    Undecodable packets are skipped and recorded in ``damage``; without a ``damage`` of the
    caller's, the damage is reported through ``warn`` (default: stderr) when decoding ends.
    """
    wanted = sorted(set(times))
    if not wanted:
        return
    own = damage is None
    record = Damage() if damage is None else damage
    delivered = 0
    try:
        try:
            for item in _attempt(path, wanted, record, frame_threads=True):
                delivered += 1
                yield item
        except _Retry:
            yield from _attempt(path, wanted[delivered:], record, frame_threads=False)
    finally:
        if own:
            report(path, record, warn)


Held = tuple[int, Fraction, Any]


def _attempt(path: Path, wanted: list[Fraction], damage: Damage,
             frame_threads: bool) -> Iterator[tuple[Fraction, DecodedFrame]]:
    import av

    if not wanted:
        return
    selector = NearestSelector(wanted)
    container = open_container(path)
    try:
        stream = video_stream(container, path)
        ctx = stream.codec_context
        if frame_threads:
            ctx.thread_type = "AUTO"
            ctx.thread_count = frame_thread_count()
        else:
            ctx.thread_type = "SLICE"
        time_base = Fraction(stream.time_base) if stream.time_base else Fraction(1, 90000)
        clock = FrameClock(time_base, Fraction(stream.average_rate) if stream.average_rate else None)
        orientation: Orientation | None = None
        prev: Held | None = None
        try:
            for packet in container.demux(stream):
                if packet.size and not packet.is_discard:
                    # Discarded packets (edit-list pre-roll) are decoded but never shown.
                    clock.packet(packet.pts)
                try:
                    frames = ctx.decode(packet)
                except av.error.InvalidDataError:
                    if frame_threads:
                        raise _Retry() from None
                    damage.skip()
                    clock.skipped()
                    continue
                for frame in frames:
                    index, media_time, lost = clock.frame(frame.pts)
                    if lost:
                        if frame_threads:
                            raise _Retry()
                        damage.lose(lost)
                    if orientation is None:
                        orientation = orientation_from_side_data(frame.side_data)
                    settled = selector.push(media_time)
                    this = (index, media_time, frame)
                    if settled:
                        yield from _emit(settled, prev, this, orientation, lost, damage)
                    if selector.done:
                        return
                    prev = this
        except (av.error.FFmpegError, MemoryError) as exc:
            if out_of_memory(exc):
                raise frame_too_large(path, ctx.width, ctx.height) from None
            raise VideoError(f"cannot decode video {path}: {exc}") from None
        tail = clock.tail_lost()
        if tail and frame_threads:
            raise _Retry()
        damage.lose(tail)
        if clock.guessed:
            damage.numbering_guessed = True
        rest = selector.finish()
        if prev is None:
            raise VideoError(f"{path} has no decodable video frames")
        assert orientation is not None
        yield from _emit([(t, "prev") for t in rest], prev, prev, orientation, tail, damage)
    finally:
        container.close()


def _emit(settled: list[tuple[Fraction, str]], prev: Held | None, this: Held, orientation: Orientation,
          lost: list[Fraction], damage: Damage) -> Iterator[tuple[Fraction, DecodedFrame]]:
    """Deliver settled requests: each frame converted once, and copied *before* the original
    is handed over (the consumer may close it at once)."""
    groups: list[tuple[Held, list[Fraction]]] = []
    for want, which in settled:
        chosen = prev if which == "prev" and prev is not None else this
        if lost and nearest_was_lost(want, chosen[1], lost):
            damage.affect(want)
        if groups and groups[-1][0] is chosen:
            groups[-1][1].append(want)
        else:
            groups.append((chosen, [want]))
    for (index, media_time, frame), wants in groups:
        image: Image.Image = orientation.apply(rgb_image(frame))
        copies = [image.copy() for _ in wants[:-1]]
        for want, copy in zip(wants[:-1], copies, strict=True):
            yield want, DecodedFrame(index, media_time, copy)
        yield wants[-1], DecodedFrame(index, media_time, image)
