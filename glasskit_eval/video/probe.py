"""What a video is, learned by demuxing packets (no decoding): cheap even for long files.

The clip's time span is measured from its first frame to its last, so a
non-zero container start time never counts as playable time.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import VideoError
from ..timevalues import format_time

#: Sample times up to this far past the last frame's end are accepted: container
#: durations are often rounded to a tick or two.
END_TOLERANCE_S = Fraction(1, 20)


@dataclass(frozen=True)
class VideoInfo:
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
        return (f"{self.codec} {self.width}x{self.height}, {self.frame_count} frames, "
                f"{format_time(self.end_time)}s, {kind} frame rate ({rate})"
                + ("".join(f", {e}" for e in extras)))

    def check_time(self, time: Fraction, what: str) -> None:
        if time > self.end_time + END_TOLERANCE_S:
            raise VideoError(f"{what} {format_time(time)}s is past the end of {self.path} "
                             f"(clip length {format_time(self.end_time)}s from its first frame)")


_cache: dict[tuple[str, int, int], VideoInfo] = {}


def open_container(path: Path) -> Any:
    import av

    if not path.exists():
        raise VideoError(f"video not found: {path}; check the case file's `video:` path "
                         "(it is resolved relative to the case file)")
    try:
        return av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise VideoError(f"cannot open video {path}: {exc}") from None


def video_stream(container: Any, path: Path) -> Any:
    if not container.streams.video:
        raise VideoError(f"{path} has no video stream")
    return container.streams.video[0]


def probe(path: Path) -> VideoInfo:
    """Probe a video once per process (keyed by path, size and mtime)."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    key = (str(path), st.st_size if st else -1, st.st_mtime_ns if st else -1)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    info = _probe(path)
    _cache[key] = info
    return info


def _probe(path: Path) -> VideoInfo:
    import av

    container = open_container(path)
    try:
        stream = video_stream(container, path)
        time_base = Fraction(stream.time_base) if stream.time_base else Fraction(1, 90000)
        average_rate = Fraction(stream.average_rate) if stream.average_rate else None
        pts: list[int] = []
        missing = 0
        out_of_order = False
        last_pts: int | None = None
        try:
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue
                if packet.pts is None:
                    missing += 1
                    continue
                if last_pts is not None and packet.pts < last_pts:
                    out_of_order = True
                last_pts = packet.pts
                pts.append(packet.pts)
        except av.error.FFmpegError as exc:
            raise VideoError(f"cannot read video {path}: {exc}") from None
        count = len(pts) + missing
        if count == 0:
            raise VideoError(f"{path} has no video frames")
        if missing or not pts:
            rate = average_rate or Fraction(30)
            first = Fraction(0)
            last = Fraction(count - 1) / rate
            step = 1 / rate
            variable = False
        else:
            pts.sort()
            first = pts[0] * time_base
            last = (pts[-1] - pts[0]) * time_base
            gaps = {b - a for a, b in itertools.pairwise(pts)}
            variable = len(gaps) > 1
            step = (min(gaps) * time_base) if gaps else (1 / average_rate if average_rate else Fraction(0))
            if not variable and gaps:
                step = gaps.pop() * time_base
        return VideoInfo(
            path=path,
            codec=stream.codec_context.name,
            width=stream.codec_context.width,
            height=stream.codec_context.height,
            time_base=time_base,
            average_rate=average_rate,
            frame_count=count,
            first_time=first,
            last_frame_time=last,
            end_time=last + step,
            variable_rate=variable,
            has_b_frames=out_of_order or bool(getattr(stream.codec_context, "has_b_frames", 0)),
            timestamps_missing=bool(missing),
        )
    finally:
        container.close()
