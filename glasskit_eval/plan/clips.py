"""Clip samples: which frames a sample's ``clip`` names, and the checks that need the video.

The selection is pure (an anchor time, a :class:`ClipSpec` and a frame table in, entries
out) and uses the single-sample rule for every requested time: nearest frame, ties to
the earlier one, answered by the frame engine's ``video.timeline``. So a clip's frames are
exactly the frames ``decode_at`` gives for its requested times, and a later decode needs no rule
of its own: it asks for the entries' times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from ..cases.model import MAX_CLIP_FRAMES, Case, ClipSpec
from ..errors import Problem
from ..support.timevalues import format_time
from ..video.frametable import FrameTable
from ..video.probe import END_TOLERANCE_S
from ..video.timeline import timeline
from .schedule import ScheduledSample


class ClipEntry(NamedTuple):
    """One frame of a clip: the time asked for, and the frame that time gets."""

    time: Fraction
    frame_index: int
    #: Rebased to the video's first frame, as ``DecodedFrame.media_time``.
    media_time: Fraction


@dataclass(frozen=True, slots=True)
class Clip:
    """A sample's clip: entries in time order; ``anchor`` is the position of the sample time's entry."""

    entries: tuple[ClipEntry, ...]
    anchor: int

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def times(self) -> tuple[Fraction, ...]:
        return tuple(e.time for e in self.entries)

    @property
    def frame_indexes(self) -> tuple[int, ...]:
        return tuple(e.frame_index for e in self.entries)


def clip_window(anchor: Fraction, spec: ClipSpec) -> tuple[Fraction, Fraction]:
    """The closed window ``[t - before_s, t + after_s]`` the clip is drawn from."""
    return anchor - spec.before_s, anchor + spec.after_s


def grid_times(anchor: Fraction, spec: ClipSpec) -> list[Fraction]:
    """``t + j*every_s`` for every integer j with ``-before_s <= j*every_s <= after_s``, exact."""
    assert spec.every_s is not None
    every = spec.every_s
    # Exact floor division, so j = 0 (the anchor itself) is always in the grid.
    first = -int(spec.before_s // every)
    last = int(spec.after_s // every)
    return [anchor + j * every for j in range(first, last + 1)]


def select_clip(anchor: Fraction, spec: ClipSpec, table: FrameTable, *, end_time: Fraction) -> Clip:
    """The entries of the clip around ``anchor``, in time order.

    With ``every_s`` there is one entry per grid time (a grid finer than the video repeats
    frames). Without it there is one entry per frame whose presentation time lies in the
    window, requested at that frame's own time, plus the anchor's frame, requested at the
    anchor. Times outside the video (before 0, after ``end_time`` plus the tolerance single
    samples get) are dropped whatever ``spec.edge`` says: refusing them is
    :func:`edge_problem`'s job, at validation.
    """
    frames = timeline(table)
    limit = end_time + END_TOLERANCE_S
    if spec.every_s is not None:
        # The anchor stays whatever its time: past-the-end sample times are refused on their own.
        entries = [ClipEntry(t, i, frames.time(i)) for t in grid_times(anchor, spec)
                   if t == anchor or 0 <= t <= limit for i in (frames.nearest(t),)]
        return Clip(tuple(entries), next(n for n, e in enumerate(entries) if e.time == anchor))
    start, end = clip_window(anchor, spec)
    own = frames.nearest(anchor)
    indexes = set(frames.between(max(start, Fraction(0)), min(end, limit)))
    entries = [ClipEntry(anchor if i == own else frames.time(i), i, frames.time(i))
               for i in sorted(indexes | {own})]
    return Clip(tuple(entries), next(n for n, e in enumerate(entries) if e.frame_index == own))


def edge_problem(anchor: Fraction, spec: ClipSpec, end_time: Fraction) -> str | None:
    """Why the clip around ``anchor`` may not be taken (None: it may); ``edge: clamp`` allows all."""
    if spec.edge == "clamp":
        return None
    start, end = clip_window(anchor, spec)
    if spec.every_s is not None:
        # The grid may stop short of a window edge that is outside the video.
        times = grid_times(anchor, spec)
        start, end = times[0], times[-1]
    fix = "; shorten {}, move the sample, or set `edge: clamp` to drop the times outside the video"
    if start < 0:
        return (f"the clip of the sample at {format_time(anchor)}s starts at {format_time(start)}s, before "
                f"the video's first frame (0.0s)" + fix.format("before_s"))
    if end > end_time + END_TOLERANCE_S:
        return (f"the clip of the sample at {format_time(anchor)}s reaches {format_time(end)}s, past the end "
                f"of the video ({format_time(end_time)}s from its first frame)" + fix.format("after_s"))
    return None


def plan_clips(case: Case, samples: Sequence[ScheduledSample], table: FrameTable, end_time: Fraction,
               video_name: str) -> tuple[list[ScheduledSample], list[Problem]]:
    """``samples`` with their clips selected, and one located problem per block whose clips may not be taken."""
    out: list[ScheduledSample] = []
    problems: list[Problem] = []
    reported: set[tuple[str, int]] = set()
    for sample in samples:
        spec = sample.block.clip
        key = (sample.target.id, sample.block.index)
        if spec is None or key in reported:
            out.append(sample)
            continue
        message = edge_problem(sample.time, spec, end_time)
        clip = None
        if message is None:
            clip = select_clip(sample.time, spec, table, end_time=end_time)
            if len(clip) > MAX_CLIP_FRAMES:
                message = (f"the clip of the sample at {format_time(sample.time)}s holds {len(clip)} frames "
                           f"of {video_name}, more than the limit of {MAX_CLIP_FRAMES:,} per clip; set "
                           "every_s or shorten before_s/after_s")
        if message is not None:
            reported.add(key)
            problems.append(case.document.problem(
                ("targets", sample.target.id, "samples", sample.block.index),
                f"{message} (target {sample.target.id!r}, video {video_name})"))
            out.append(sample)
            continue
        out.append(sample.with_clip(clip))
    return out, problems


def neighbour_frames(index: int, k: int, table: FrameTable) -> list[ClipEntry]:
    """The frames within ``k`` of frame ``index`` (itself left out), each at the time that selects it.

    A frame's own presentation time selects it by the single-sample rule, so a decode asked for
    these times gives exactly these frames (no rule of its own, as for clips).
    """
    frames = timeline(table)
    return [ClipEntry(frames.time(i), i, frames.time(i))
            for i in range(max(index - k, 0), min(index + k, frames.count - 1) + 1) if i != index]
