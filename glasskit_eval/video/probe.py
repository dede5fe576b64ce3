"""What a video is, learned from its frame table (demuxing, no decoding): cheap even for long files.

The clip's time span is measured from its first frame to the end of its last: the last
frame's timestamp plus its own duration (the frame table's ``last_duration``), so a
non-zero container start time never counts as playable time, and a last frame that stays
on screen longer than the others (a variable-rate recording that stopped on a still
scene) is inside the clip for as long as it is shown.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ..errors import VideoError
from ..support.timevalues import format_time
from ._orientation import UPRIGHT, Orientation
from .frametable import FileKey, FrameTable, file_key, frame_table, open_container, video_stream

__all__ = ["END_TOLERANCE_S", "VideoInfo", "open_container", "probe", "video_stream"]

#: Sample times up to this far past the last frame's end are accepted: container
#: durations are often rounded to a tick or two. A time in that margin gets the last frame.
END_TOLERANCE_S = Fraction(1, 20)


@dataclass(frozen=True, slots=True)
class VideoInfo:
    """Facts about a video: its stream, frame count, clip length and rate, and how it is decoded."""

    path: Path
    codec: str
    width: int
    height: int
    time_base: Fraction
    average_rate: Fraction | None
    frame_count: int
    first_time: Fraction
    last_frame_time: Fraction
    end_time: Fraction
    variable_rate: bool
    has_b_frames: bool
    timestamps_missing: bool
    orientation: Orientation = UPRIGHT
    keyframe_count: int = 0
    keyframe_interval: Fraction | None = None  # mean seconds between keyframes
    seekable: bool = False  # frames are reached by seeking (the frame table is trusted)

    def describe(self) -> str:
        rate = "unknown rate" if self.average_rate is None else f"{float(self.average_rate):.3f} fps"
        kind = "variable" if self.variable_rate else "constant"
        extras = []
        if self.has_b_frames:
            extras.append("B-frames")
        if self.first_time:
            extras.append(f"first timestamp {format_time(self.first_time)}s")
        if self.timestamps_missing:
            extras.append("no timestamps (estimated from the frame rate)")
        if self.keyframe_interval is not None:
            extras.append(f"a keyframe every {float(self.keyframe_interval):.2f}s")
        if not self.seekable:
            extras.append("decoded sequentially (no trusted seek index)")
        return (f"{self.codec} {self.width}x{self.height}, {self.frame_count} frames, "
                f"{format_time(self.end_time)}s, {kind} frame rate ({rate})"
                + ("".join(f", {e}" for e in extras)))

    def check_time(self, time: Fraction, what: str) -> None:
        if time > self.end_time + END_TOLERANCE_S:
            raise VideoError(f"{what} {format_time(time)}s is past the end of {self.path} "
                             f"(clip length {format_time(self.end_time)}s from its first frame)")


_cache: dict[FileKey, VideoInfo] = {}


def probe(path: Path) -> VideoInfo:
    """Probe a video once per process (keyed like its frame table)."""
    key = file_key(path)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    info = info_from_table(frame_table(path))
    _cache[key] = info
    return info


def info_from_table(table: FrameTable) -> VideoInfo:
    count = table.packet_count
    average_rate = table.average_rate
    if table.packets_without_pts or not table.pts:
        rate = average_rate or Fraction(30)
        first = Fraction(0)
        last = Fraction(count - 1) / rate
        step = 1 / rate
        variable = False
    else:
        pts = table.pts
        first = pts[0] * table.time_base
        last = (pts[-1] - pts[0]) * table.time_base
        variable = len({b - a for a, b in itertools.pairwise(pts)}) > 1
        # The table falls back to the gap before the last frame; only a lone frame has neither.
        step = table.last_duration * table.time_base if table.last_duration > 0 else (
            1 / average_rate if average_rate else Fraction(0))
    keyframe_interval = None
    if table.trusted and len(table.keyframes) > 1:
        keyframe_interval = table.time_of(table.keyframes[-1]) / (len(table.keyframes) - 1)
    return VideoInfo(
        path=table.path,
        codec=table.codec,
        width=table.width,
        height=table.height,
        time_base=table.time_base,
        average_rate=average_rate,
        frame_count=count,
        first_time=first,
        last_frame_time=last,
        end_time=last + step,
        variable_rate=variable,
        has_b_frames=table.has_b_frames,
        timestamps_missing=bool(table.packets_without_pts),
        orientation=table.orientation,
        keyframe_count=len(table.keyframes) if table.trusted else 0,
        keyframe_interval=keyframe_interval,
        seekable=table.seekable,
    )
