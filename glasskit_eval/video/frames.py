"""Exact frame selection and decoding.

The rule (adapter reference): a sample gets the decoded frame whose media
timestamp, rebased to the clip's first frame, is nearest to the requested time;
a tie goes to the earlier frame. Times are compared as exact rationals (the
decimal the user wrote against ``pts * time_base``), so ties are real ties.
Frames without timestamps are placed at ``index / average_rate``.

:func:`decode_at` selects from the frame table (``frametable``) and decodes only
what the plan (``strategy``) says, on one or several decoders (``segments``).
:func:`decode_sequential` is the reference path and the fallback for videos whose
table cannot be trusted: one decode from the start, selecting while decoding in
presentation order and holding at most the previous frame.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import VideoError
from .frametable import frame_table, open_container, video_stream
from .orientation import Orientation, orientation_from_side_data
from .pixels import rgb_image
from .segments import TableMismatch, decode_pieces
from .strategy import AUTO, plan

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


def frame_times(frames: Iterable[Any], time_base: Fraction, average_rate: Fraction | None) -> Iterator[tuple[int, Fraction, Any]]:
    """Yield (index, rebased media time, frame) for PyAV frames in presentation order."""
    first: Fraction | None = None
    estimate = first_is_estimated = False
    for index, frame in enumerate(frames):
        if index == 0:
            first_is_estimated = frame.pts is None
        if frame.pts is None or first_is_estimated:
            estimate = True
        if estimate:
            rate = average_rate or Fraction(30)
            absolute = Fraction(index) / rate
        else:
            absolute = frame.pts * time_base
        if first is None:
            first = absolute
        yield index, absolute - first, frame


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def decode_at(path: Path, times: Sequence[Fraction], *, mode: str = AUTO,
              workers: int | None = None) -> Generator[tuple[Fraction, DecodedFrame], None, None]:
    """Yield ``(requested time, frame)`` for each distinct time, ascending.

    Each yielded frame owns its image; a frame chosen for several times is
    converted once and copied for the others. ``mode`` forces a strategy
    (``strategy.MODES``; tests decode both ways), ``workers`` caps the decoders
    run side by side (default: the cores available).
    """
    wanted = sorted(set(times))
    if not wanted:
        return
    table = frame_table(path)
    if not table.seekable:
        yield from decode_sequential(path, wanted)
        return
    by_index: dict[int, list[Fraction]] = {}
    for want in wanted:
        by_index.setdefault(table.select(want), []).append(want)
    the_plan = plan(table.keyframes, sorted(by_index), mode=mode,
                    cores=workers if workers is not None else available_cores())
    delivered = 0
    frames: Generator[tuple[int, Image.Image], None, None] = decode_pieces(
        table, the_plan.pieces, the_plan.workers)
    try:
        for index, image in frames:
            group = by_index[index]
            media_time = table.time_of(index)
            # Copies are made before the original is handed over: its owner may close it.
            for want in group[:-1]:
                delivered += 1
                yield want, DecodedFrame(index, media_time, image.copy())
            delivered += 1
            yield group[-1], DecodedFrame(index, media_time, image)
    except TableMismatch as exc:
        table.distrust(str(exc))
        frames.close()
        yield from decode_sequential(path, wanted[delivered:])
    finally:
        frames.close()


def decode_sequential(path: Path, times: Sequence[Fraction]) -> Generator[tuple[Fraction, DecodedFrame], None, None]:
    """The reference path: decode ``path`` from the start, selecting while decoding."""
    import av

    wanted = sorted(set(times))
    if not wanted:
        return
    selector = NearestSelector(wanted)
    container = open_container(path)
    try:
        stream = video_stream(container, path)
        stream.thread_type = "AUTO"
        time_base = Fraction(stream.time_base) if stream.time_base else Fraction(1, 90000)
        average_rate = Fraction(stream.average_rate) if stream.average_rate else None
        orientation: Orientation | None = None
        prev: tuple[int, Fraction, Any] | None = None
        try:
            for index, media_time, frame in frame_times(container.decode(stream), time_base, average_rate):
                if orientation is None:
                    orientation = orientation_from_side_data(frame.side_data)
                settled = selector.push(media_time)
                if settled:
                    yield from _emit(settled, prev, (index, media_time, frame), orientation)
                if selector.done:
                    return
                prev = (index, media_time, frame)
        except av.error.FFmpegError as exc:
            raise VideoError(f"cannot decode video {path}: {exc}") from None
        rest = selector.finish()
        if prev is None:
            raise VideoError(f"{path} has no decodable video frames")
        assert orientation is not None
        yield from _emit([(t, "prev") for t in rest], prev, prev, orientation)
    finally:
        container.close()


def _emit(settled: list[tuple[Fraction, str]], prev: tuple[int, Fraction, Any] | None,
          this: tuple[int, Fraction, Any], orientation: Orientation) -> Iterator[tuple[Fraction, DecodedFrame]]:
    images: dict[int, Image.Image] = {}
    for want, which in settled:
        chosen = prev if which == "prev" and prev is not None else this
        index, media_time, frame = chosen
        image = images.get(index)
        if image is None:
            image = orientation.apply(rgb_image(frame))
            images[index] = image
            yield want, DecodedFrame(index, media_time, image)
        else:
            yield want, DecodedFrame(index, media_time, image.copy())


def stream_orientation(path: Path) -> Orientation:
    """The display orientation of a video, read from its first decoded frame."""
    import av

    table = frame_table(path)
    if table.trusted:
        return table.orientation

    container = open_container(path)
    try:
        stream = video_stream(container, path)
        try:
            for frame in container.decode(stream):
                return orientation_from_side_data(frame.side_data)
        except av.error.FFmpegError as exc:
            raise VideoError(f"cannot decode video {path}: {exc}") from None
        return Orientation()
    finally:
        container.close()
