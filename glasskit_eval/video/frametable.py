"""The frame table: every frame's presentation time and the keyframes.

MP4, MOV and M4V tables come from the sample tables in ``moov`` (``mp4index``: a few small
reads, whatever the video's length), checked against the first packets the demuxer
delivers; other containers, and MP4s the index reader refuses (fragmented, truncated,
damaged), are demuxed packet by packet, which reads the whole file. Selection (nearest
rebased timestamp, ties to the earlier frame) is answered from the table, which is what
makes every decode path agree on ``frame_index`` and ``media_timestamp_s``.

A table is only *trusted* when the container gives what the decoder will produce: a
timestamp on every packet, no duplicates, and a first decoded frame that is the
earliest packet (a decoder that drops leading frames would shift every index). The
decode paths also verify each frame they decode against the table; an untrusted table
or a disagreement sends the video down the sequential path that reads timestamps from
the decoded frames themselves.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import VideoError
from ._mp4index import IndexTable, IndexUnusable, read_index
from ._orientation import UPRIGHT, Orientation, orientation_from_side_data

#: Demuxers whose index we seek with. Others (MPEG-TS, raw streams, AVI...) are decoded
#: sequentially: their seeking is approximate or their timestamps may wrap.
SEEKABLE_FORMATS = ("mov", "mp4", "matroska", "webm")


class PacketInfo(NamedTuple):
    """One demuxed video packet, in decode order."""

    pts: int | None
    dts: int | None
    keyframe: bool
    duration: int = 0  # as the demuxer reports it; 0 when it does not know


@dataclass(slots=True)
class FrameTable:
    """Every frame's presentation time and the keyframes of one video (see the module's docstring)."""

    path: Path
    codec: str
    format_name: str
    width: int
    height: int
    time_base: Fraction
    average_rate: Fraction | None
    #: Raw presentation timestamps, ascending; position = frame index. A compact array:
    #: an hour of video is 108,000 frames, and boxed ints in a tuple cost five times more.
    pts: Sequence[int]
    #: Frame indices of keyframes, ascending (always starts with 0 when trusted).
    keyframes: tuple[int, ...]
    #: Per keyframe (same order), the timestamp to seek to (stream time base).
    seek_points: tuple[int, ...]
    orientation: Orientation
    has_b_frames: bool
    packets_without_pts: int
    packet_count: int
    first_time: Fraction
    trusted: bool
    reason: str = ""
    #: How long the last frame (in presentation order) is shown, in ``time_base`` ticks: its
    #: duration as the container gives it (``stts``, a Matroska block or default duration),
    #: else the gap before it; 0 for a single frame without one. The clip ends there.
    last_duration: int = 0

    @property
    def frame_count(self) -> int:
        return len(self.pts) if self.trusted else self.packet_count

    @property
    def seekable(self) -> bool:
        return self.trusted and any(name in SEEKABLE_FORMATS for name in self.format_name.split(","))

    def distrust(self, reason: str) -> None:
        """Stop using this table (a decode disagreed with it); later cases decode sequentially."""
        self.trusted = False
        self.reason = reason

    def time_of(self, index: int) -> Fraction:
        """Rebased media time of a frame (``pts * time_base`` minus the first frame's)."""
        return (self.pts[index] - self.pts[0]) * self.time_base

    @property
    def times(self) -> list[Fraction]:
        return [self.time_of(i) for i in range(len(self.pts))]

    def select(self, want: Fraction) -> int:
        """Index of the frame nearest ``want`` (rebased); ties go to the earlier frame."""
        # Compared in exact ticks: same order and ties as in seconds (time_base > 0).
        pts = self.pts
        target = want / self.time_base + pts[0]
        i = bisect.bisect_left(pts, target)
        if i >= len(pts):
            return len(pts) - 1
        if i == 0:
            return 0
        return i - 1 if target - pts[i - 1] <= pts[i] - target else i

    def index_of(self, pts: int) -> int | None:
        """Frame index of the frame with this timestamp (None: not in a trusted table)."""
        i = bisect.bisect_left(self.pts, pts)
        return i if self.trusted and i < len(self.pts) and self.pts[i] == pts else None

    def keyframe_at_or_before(self, index: int) -> int:
        """Position in ``keyframes`` of the last keyframe at or before frame ``index``."""
        return max(bisect.bisect_right(self.keyframes, index) - 1, 0)


FileKey = tuple[str, int, int]


def file_key(path: Path) -> FileKey:
    """What per-process caches of a file are keyed by: path, size and modification time
    (size and time are -1 for a file that cannot be read)."""
    try:
        st = os.stat(path)
    except OSError:
        return str(path), -1, -1
    return str(path), st.st_size, st.st_mtime_ns


_cache: dict[FileKey, FrameTable] = {}
_lock = threading.Lock()


def frame_table(path: Path) -> FrameTable:
    """The table of ``path``, built once per process (keyed by :func:`file_key`)."""
    key = file_key(path)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    table = build_frame_table(path)
    with _lock:
        return _cache.setdefault(key, table)


def open_container(path: Path) -> Any:
    import av

    if not path.exists():
        from ..support.nearby import did_you_mean

        raise VideoError(f"video not found: {path}; check the case file's `video:` path (it is resolved "
                         f"relative to the case file){did_you_mean(path)}")
    try:
        # Metadata is not ours to judge: a tag in another encoding must not stop a decode.
        # (PyAV 19 dropped the option; it no longer decodes metadata strictly.)
        try:
            return av.open(str(path), metadata_errors="replace")
        except TypeError:
            return av.open(str(path))
    except (av.error.FFmpegError, OSError, UnicodeDecodeError) as exc:
        raise VideoError(f"cannot open video {path}: {exc}") from None


def video_stream(container: Any, path: Path) -> Any:
    if not container.streams.video:
        raise VideoError(f"{path} has no video stream")
    stream = container.streams.video[0]
    if stream.codec_context is None:
        raise VideoError(f"cannot decode video {path}: its codec is unknown or its description is damaged")
    return stream


#: Containers kept open after reading a table, for the first decoder of the same video, and
#: decoders parked between the decodes of a :func:`kept_open` scope.
MAX_SPARES = 4
#: By (file, frame-threaded): a parked decoder keeps the threading it was opened with.
_spares: dict[tuple[FileKey, bool], tuple[Any, Any]] = {}
#: Files inside a :func:`kept_open` scope, with how many scopes hold each.
_kept: dict[FileKey, int] = {}


def take_spare(path: Path, threaded: bool = False) -> tuple[Any, Any] | None:
    """An open ``(container, video stream)`` of ``path`` whose decoder (frame-threaded or not, as
    asked) has decoded at least its first frame, if one is left from building the table or parked
    by an earlier decode (the caller owns it; its next piece seeks, which flushes the decoder)."""
    with _lock:
        return _spares.pop((file_key(path), threaded), None)


def _keep_spare(path: Path, container: Any, stream: Any, threaded: bool = False) -> None:
    key = (file_key(path), threaded)
    with _lock:
        old = _spares.pop(key, None)
        _spares[key] = (container, stream)
        stale = [_spares.pop(next(iter(_spares))) for _ in range(len(_spares) - MAX_SPARES)]
    for spare in ([old] if old is not None else []) + stale:
        spare[0].close()


def park(path: Path, container: Any, stream: Any, threaded: bool) -> None:
    """A decoder done with its pieces: kept for the next decode of ``path`` inside a
    :func:`kept_open` scope, closed otherwise."""
    with _lock:
        keep = _kept.get(file_key(path), 0) > 0
    if keep:
        _keep_spare(path, container, stream, threaded)
    else:
        container.close()


def is_kept(path: Path) -> bool:
    with _lock:
        return _kept.get(file_key(path), 0) > 0


@contextmanager
def kept_open(paths: Iterable[Path]) -> Iterator[None]:
    """Within this, each decode of one of ``paths`` leaves its decoder open for the next one.

    Many short decodes of one video (``run --early-stop``'s blocks, in random order) would each
    open the file, start a decoder and fault in fresh frame buffers: measured on 720p H.264,
    block-order decoding took 1.4x what the same frames took in one time-order pass, and 1.0x
    with the decoder kept. At most ``MAX_SPARES`` stay open; the scope closes them.
    """
    keys = [file_key(p) for p in dict.fromkeys(paths)]
    with _lock:
        for key in keys:
            _kept[key] = _kept.get(key, 0) + 1
    try:
        yield
    finally:
        closing: list[tuple[Any, Any]] = []
        with _lock:
            for key in keys:
                _kept[key] -= 1
                if _kept[key] == 0:
                    del _kept[key]
                    closing += [_spares.pop(k) for k in list(_spares) if k[0] == key]
        for spare in closing:
            spare[0].close()


def build_frame_table(path: Path, *, use_index: bool = True) -> FrameTable:
    """The table of ``path``: from the MP4/MOV index when it can be read with certainty
    (``mp4index``), else by demuxing every packet (``use_index=False`` forces the demux).

    An index-built table leaves its open container for the first decoder (``take_spare``):
    a sparse run then opens each video once.
    """
    import av

    container = open_container(path)
    keep = False
    try:
        stream = video_stream(container, path)
        time_base = Fraction(stream.time_base) if stream.time_base else Fraction(1, 90000)
        average_rate = Fraction(stream.average_rate) if stream.average_rate else None
        index = _read_index(path, container, stream, time_base) if use_index else None
        packets: list[PacketInfo] = []
        # The head check decodes just until the first frame comes out.
        head_pts: int | None = None
        head_orientation: Orientation | None = None
        head_done = False
        decoder = stream.codec_context
        # One thread: starting frame threads costs more than decoding one frame.
        decoder.thread_type = "SLICE"
        decoder.thread_count = 1
        checked = 0
        try:
            for packet in container.demux(stream):
                if packet.size and index is not None and checked < len(index.packets):
                    # The first packets must be what the index reader says they are.
                    if (packet.pts, packet.dts, packet.is_keyframe, packet.is_discard) != index.packets[checked]:
                        index = None
                    checked += 1
                if packet.size == 0 or packet.is_discard:
                    if packet.size and not head_done:
                        head_done, head_pts, head_orientation = _head(decoder, packet)
                    continue
                if index is None:
                    packets.append(PacketInfo(packet.pts, packet.dts, packet.is_keyframe, packet.duration or 0))
                if not head_done:
                    head_done, head_pts, head_orientation = _head(decoder, packet)
                if head_done and index is not None and checked >= len(index.packets):
                    break
            if not head_done:
                head_done, head_pts, head_orientation = _head(decoder, None)
        except av.error.FFmpegError as exc:
            raise VideoError(f"cannot read video {path}: {exc}") from None
        if index is not None and checked:
            reason = _head_problem(head_pts, index.pts[0])
            keep = use_index
            return _assemble(path, container, stream, time_base, average_rate, index.pts,
                             list(index.keyframes), list(index.seek_points), reason, head_orientation,
                             has_b_frames=index.reordered, missing=0, packet_count=len(index.pts),
                             last_duration=index.last_duration)
        if index is not None:
            # Nothing to check the index against yet: demux after all.
            return build_frame_table(path, use_index=False)
        if not packets:
            raise VideoError(f"{path} has no video frames")
        return _table(path, container, stream, time_base, average_rate, packets,
                      head_pts, head_orientation)
    finally:
        if keep:
            _keep_spare(path, container, stream)
        else:
            container.close()


def _read_index(path: Path, container: Any, stream: Any, time_base: Fraction) -> IndexTable | None:
    """The MP4/MOV index table, when the file has one that agrees with the open demuxer."""
    if "mov" not in container.format.name.split(","):
        return None
    try:
        index = read_index(path, os.stat(path).st_size)
    except (IndexUnusable, OSError):
        return None
    if index.time_base != time_base or index.track_id != stream.id or \
            (stream.frames and stream.frames != index.sample_count):
        return None
    return index


def _head_problem(head_pts: int | None, first_pts: int) -> str:
    """Why the decoder's first frame makes the table untrustworthy ('' when it does not)."""
    if head_pts is None:
        return "the first decoded frame has no timestamp"
    if head_pts != first_pts:
        return "the decoder drops leading frames"
    return ""


def _assemble(path: Path, container: Any, stream: Any, time_base: Fraction, average_rate: Fraction | None,
              pts: array[int], keyframes: list[int], seek_points: list[int], reason: str,
              head_orientation: Orientation | None, *, has_b_frames: bool, missing: int,
              packet_count: int, last_duration: int) -> FrameTable:
    ctx = stream.codec_context
    trusted = not reason
    if last_duration <= 0 and len(pts) > 1:
        # MediaRecorder's WebM gives no durations at all: the last frame lasts as long as the
        # gap before it.
        last_duration = pts[-1] - pts[-2]
    if trusted and (not keyframes or keyframes[0] != 0):
        # Frames before the first keyframe can only be reached from the start.
        keyframes.insert(0, 0)
        seek_points.insert(0, pts[0])
    return FrameTable(
        path=path,
        codec=ctx.name,
        format_name=container.format.name,
        width=ctx.width,
        height=ctx.height,
        time_base=time_base,
        average_rate=average_rate,
        pts=pts,
        keyframes=tuple(keyframes) if trusted else (),
        seek_points=tuple(seek_points) if trusted else (),
        orientation=head_orientation or UPRIGHT,
        has_b_frames=has_b_frames or bool(getattr(ctx, "has_b_frames", 0)),
        packets_without_pts=missing,
        packet_count=packet_count,
        first_time=pts[0] * time_base if pts and not missing else Fraction(0),
        trusted=trusted,
        reason=reason,
        last_duration=last_duration,
    )


def _head(decoder: Any, packet: Any) -> tuple[bool, int | None, Orientation | None]:
    import av

    try:
        frames = decoder.decode(packet)
    except av.error.FFmpegError:
        return True, None, None
    for frame in frames:
        return True, frame.pts, orientation_from_side_data(frame.side_data)
    return packet is None, None, None


def _table(path: Path, container: Any, stream: Any, time_base: Fraction,
           average_rate: Fraction | None, packets: Sequence[PacketInfo],
           head_pts: int | None, head_orientation: Orientation | None) -> FrameTable:
    missing = sum(1 for p in packets if p.pts is None)
    pts_sorted = array("q", sorted(p.pts for p in packets if p.pts is not None))
    if missing:
        reason = f"{missing} packets have no timestamp"
    elif len(set(pts_sorted)) != len(pts_sorted):
        reason = "duplicate packet timestamps"
    else:
        reason = _head_problem(head_pts, pts_sorted[0])
    keyframes: list[int] = []
    seek_points: list[int] = []
    if not reason:
        # Timestamps are unique here, so a keyframe's index is its rank.
        marks = sorted((bisect.bisect_left(pts_sorted, p.pts), _seek_point(p)) for p in packets
                       if p.keyframe and p.pts is not None)
        keyframes = [index for index, _ts in marks]
        seek_points = [seek_ts for _index, seek_ts in marks]
    out_of_order = any(a.pts is not None and b.pts is not None and b.pts < a.pts
                       for a, b in itertools.pairwise(packets))
    # The frame shown last is the packet with the greatest timestamp, wherever it is decoded.
    _pts, last_duration = max(((p.pts, p.duration) for p in packets if p.pts is not None), default=(0, 0))
    return _assemble(path, container, stream, time_base, average_rate, pts_sorted, keyframes, seek_points,
                     reason, head_orientation, has_b_frames=out_of_order, missing=missing,
                     packet_count=len(packets), last_duration=last_duration)


def _seek_point(packet: PacketInfo) -> int:
    # Index timestamps are DTS in mov/mp4 and PTS in Matroska; the smaller never lands
    # after the keyframe (landing earlier only costs a few extra frames).
    assert packet.pts is not None
    return packet.pts if packet.dts is None else min(packet.pts, packet.dts)
