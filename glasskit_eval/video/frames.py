"""Exact frame selection and decoding.

The rule (adapter reference): a sample gets the decoded frame whose media
timestamp, rebased to the clip's first frame, is nearest to the requested time;
a tie goes to the earlier frame. Times are compared as exact rationals (the
decimal the user wrote against ``pts * time_base``), so ties are real ties.
Frames without timestamps are placed at ``index / average_rate``.

:func:`decode_at` selects from the frame table (``frametable``) and decodes only
what the plan (``strategy``) says, on one or several decoders (``segments``).
:func:`decode_sequential` (``sequential``) is the reference path and the fallback
for videos whose table cannot be trusted.

Damaged or truncated videos: packets that cannot be decoded are skipped, every
other frame is still delivered, and the damage is reported once per video through
``warn`` (default: a ``warning:`` line on stderr), naming the requested times that
got a neighbouring frame because their nearest frame could not be decoded.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import VideoError
from ._orientation import Orientation, orientation_from_side_data
from ._pixels import frame_too_large, out_of_memory
from ._segments import TableMismatch, decode_pieces
from ._selection import DecodedFrame, NearestSelector
from ._sequential import decode_sequential
from .damage import Damage, Warn, report
from .frametable import frame_table, is_kept, kept_open, open_container, take_spare, video_stream
from .strategy import AUTO, plan

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["DecodedFrame", "NearestSelector", "available_cores", "decode_at", "decode_sequential", "kept_open",
           "stream_orientation"]


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def decode_at(path: Path, times: Sequence[Fraction], *, mode: str = AUTO, workers: int | None = None,
              warn: Warn | None = None) -> Generator[tuple[Fraction, DecodedFrame], None, None]:
    """Yield ``(requested time, frame)`` for each distinct time, ascending.

    Each yielded frame owns its image; a frame chosen for several times is
    converted once and copied for the others. ``mode`` forces a strategy
    (``strategy.MODES``; tests decode both ways), ``workers`` caps the decoders
    run side by side (default: the cores available). ``warn`` receives the one
    message about a damaged video (default: printed to stderr as ``warning: ...``).
    """
    wanted = sorted(set(times))
    if not wanted:
        return
    damage = Damage()
    try:
        table = frame_table(path)
        if not table.seekable:
            yield from decode_sequential(path, wanted, damage=damage)
            return
        by_index: dict[int, list[Fraction]] = {}
        for want in wanted:
            by_index.setdefault(table.select(want), []).append(want)
        the_plan = plan(table.keyframes, sorted(by_index), mode=mode,
                        cores=workers if workers is not None else available_cores(),
                        frame_pixels=table.width * table.height)
        delivered = 0
        frames: Generator[tuple[int, Image.Image], None, None] = decode_pieces(
            table, the_plan.pieces, the_plan.workers, damage=damage)
        try:
            for index, image in frames:
                group = by_index[index]
                media_time = table.time_of(index)
                # Copies are made before the original is handed over: its owner may close it.
                copies = [image.copy() for _ in group[:-1]]
                for want, copy in zip(group[:-1], copies, strict=True):
                    delivered += 1
                    yield want, DecodedFrame(index, media_time, copy)
                delivered += 1
                yield group[-1], DecodedFrame(index, media_time, image)
        except TableMismatch as exc:
            table.distrust(str(exc))
            frames.close()
            # The sequential decode sees all the damage there is again, counted once.
            damage = Damage()
            yield from decode_sequential(path, wanted[delivered:], damage=damage)
        finally:
            frames.close()
    finally:
        # A container the table left open and no decoder took is not needed any more (unless
        # the next decode of this video is to take it over: ``kept_open``).
        spare = None if is_kept(path) else take_spare(path)
        if spare is not None:
            spare[0].close()
        report(path, damage, warn)


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
            for packet in container.demux(stream):
                try:
                    decoded = stream.codec_context.decode(packet)
                except av.error.InvalidDataError:
                    continue
                for frame in decoded:
                    return orientation_from_side_data(frame.side_data)
        except (av.error.FFmpegError, MemoryError) as exc:
            if out_of_memory(exc):
                ctx = stream.codec_context
                raise frame_too_large(path, ctx.width, ctx.height) from None
            raise VideoError(f"cannot decode video {path}: {exc}") from None
        return Orientation()
    finally:
        container.close()
