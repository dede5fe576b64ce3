"""Frame tables for MP4/MOV/M4V from the sample tables in ``moov``, in pure Python.

Demuxing every packet of an hour of video reads the whole file; the sample tables say the
same in a few hundred kilobytes. This module reads ``moov`` once (a few small reads to find
it, one to load it) and computes what FFmpeg's mov demuxer will report for every packet of
the first video track: its decode and presentation timestamps, keyframe and discard flags.

It follows FFmpeg's semantics (``libavformat/mov.c``), because the decoder's timestamps
must match the table exactly: ``stts`` durations accumulate to decode times, ``ctts``
(version 0 or 1, read signed) adds composition offsets and its negative values shift decode
times (``dts_shift``), ``stss`` marks keyframes (every sample when absent), and an edit list
of empty edits followed by one edit keeps the samples from the last keyframe at or before
the edit's media time, flags those shown outside the edit as discarded, rebases timestamps
to the edit and makes the first shown frame start at the empty edits' duration.

Anything outside that model returns :class:`IndexUnusable` with a reason, and the caller
demuxes instead: fragmented files (``mvex``/``moof``), several non-empty edits or a rate
other than 1, sync-sample groups or partial syncs, several sample descriptions, compressed
``moov``, inconsistent counts, and sample data past the end of the file (a truncated
recording). Tests check every table built here against a demux, and corrupt ``moov`` boxes
to check that damage gives either the right table or this fallback.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from array import array
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ._mp4boxes import IndexUnusable, Track, check_layout, find_moov, parse_movie

__all__ = ["IndexTable", "IndexUnusable", "index_table", "read_index"]


@dataclass(frozen=True, slots=True)
class IndexTable:
    """What the demuxer will deliver, as a frame table needs it."""

    time_base: Fraction
    pts: array[int]  # presentation timestamps of shown frames, ascending
    keyframes: list[int]  # frame indices of shown keyframes
    seek_points: list[int]  # per keyframe: min(pts, dts)
    reordered: bool  # decode order differs from presentation order
    packets: list[tuple[int, int, bool, bool]]  # first entries: (pts, dts, keyframe, discard)
    track_id: int
    sample_count: int
    #: The last shown frame's ``stts`` duration, cut at the edit's end (0: none or damaged).
    last_duration: int = 0


def index_table(track: Track, *, head: int = 8) -> IndexTable:
    """The frames the demuxer will deliver, and its first ``head`` packets (for a cross-check)."""
    n = track.sample_count
    if not n:
        raise IndexUnusable("no samples")
    if len(track.stts.counts) == 1:  # a constant frame rate
        step = track.stts.values[0]
        dts = list(range(0, (n + 1) * step, step)) if step else [0] * (n + 1)  # n + 1 values
    else:
        dts = list(itertools.accumulate(track.stts.expand(), initial=0))
    cts = list(map(operator.add, dts, track.ctts.expand())) if track.ctts is not None else dts[:n]
    shift = track.dts_shift
    keys = _keyframe_samples(track)
    empty, media_time, duration = _single_edit(track)
    lo, hi = -(1 << 62), 1 << 62  # shown: lo <= cts < hi
    if media_time is None:
        first, last = 0, n - 1
        window = cts
        offset = 0
        ts_base = -shift  # timestamp = dts - shift; pts = cts
    else:
        first = _edit_start(dts, cts, keys, media_time, track.ctts is not None)
        lo, hi = media_time, media_time + duration
        last = _edit_end(dts, cts, keys, first, hi, duration, track.ctts is not None)
        shown = cts[first:last + 1]
        window = shown if shown and lo <= min(shown) and max(shown) < hi else [c for c in shown if lo <= c < hi]
        if not window:
            raise IndexUnusable("the edit shows no sample")
        start = next(k for k in range(first, last + 1) if lo <= cts[k] < hi)  # first shown, decode order
        min_pts = _min_corrected(window, empty - dts[start]) - empty
        correction = max(min_pts, 0)
        # timestamp = counter at the edit start + dts - dts[start], less the correction
        ts_base = -shift + empty - dts[start] - correction
        offset = empty - dts[start] - correction
    in_order = sorted(map(offset.__add__, window) if offset else window)
    # Sorted, so a duplicate sits next to its twin.
    if any(map(operator.eq, in_order, itertools.islice(in_order, 1, None))):
        raise IndexUnusable("duplicate presentation timestamps")
    ordered = array("q", in_order)
    del in_order
    keyframes, seek_points = [], []
    for k in keys:
        if first <= k <= last and lo <= cts[k] < hi:
            pts = cts[k] + offset
            keyframes.append(bisect.bisect_left(ordered, pts))
            seek_points.append(min(pts, dts[k] + ts_base))
    key_set = set(keys[bisect.bisect_left(keys, first):bisect.bisect_left(keys, first + head)])
    packets = [(cts[k] + offset, dts[k] + ts_base, k in key_set, not lo <= cts[k] < hi)
               for k in range(first, min(last + 1, first + head))]
    reordered = any(map(operator.gt, window, itertools.islice(window, 1, None)))
    # The frame shown last lasts its own stts delta, or until the edit ends if that is sooner.
    shown_last = ordered[-1] - offset
    k = cts.index(shown_last, first, last + 1)
    last_duration = max(min(shown_last + dts[k + 1] - dts[k], hi) - shown_last, 0)
    return IndexTable(Fraction(1, track.timescale), ordered, keyframes, seek_points, reordered, packets,
                      track.track_id, n, last_duration)


def _keyframe_samples(track: Track) -> list[int]:
    """0-based sample numbers of keyframes, ascending."""
    n = track.sample_count
    if track.sync is None:
        return list(range(n))
    key_off = 1 if track.sync[0] > 0 else 0  # stss is 1-based; some writers use 0
    return [s - key_off for s in track.sync if 0 <= s - key_off < n]


def _single_edit(track: Track) -> tuple[int, int | None, int]:
    """(empty duration, media time, duration) of the edit list, in media timescale."""
    if not track.edits:
        return 0, None, 0
    empty = 0
    rest = list(track.edits)
    while rest and rest[0][1] == -1:
        empty += _rescale(rest.pop(0)[0], track.timescale, track.movie_timescale)
    if len(rest) != 1:
        raise IndexUnusable("several edits" if rest else "only empty edits")
    duration, media_time = rest[0]
    return empty, media_time, _rescale(duration, track.timescale, track.movie_timescale)


def _rescale(value: int, to_scale: int, from_scale: int) -> int:
    # av_rescale: round to nearest, halves away from zero (values here are >= 0).
    return (value * to_scale + from_scale // 2) // from_scale


def _edit_start(dts: list[int], cts: list[int], keys: list[int], media_time: int, has_ctts: bool) -> int:
    """The sample FFmpeg's index starts at: the last keyframe at or before the edit."""
    n = len(cts)
    a = bisect.bisect_right(dts, media_time, 0, n) - 1
    # The last keyframe at or before sample a ...
    i = bisect.bisect_right(keys, a) - 1
    if i < 0:
        raise IndexUnusable("no keyframe before the edit")
    if has_ctts:
        # ... that is also shown at or before the edit's start.
        while i >= 0 and cts[keys[i]] > media_time:
            i -= 1
        if i < 0:
            raise IndexUnusable("no keyframe shown before the edit")
    return keys[i]


def _edit_end(dts: list[int], cts: list[int], keys: list[int], first: int, end_cts: int, duration: int,
              has_ctts: bool) -> int:
    """The last sample FFmpeg keeps: the (second, with ctts) keyframe reaching the edit end."""
    n = len(cts)
    seen = False
    for k in keys[bisect.bisect_left(keys, first):]:
        frame_duration = dts[k + 1] - dts[k] if k + 1 < n else duration
        if cts[k] + frame_duration >= end_cts:
            if has_ctts and not seen:
                seen = True
                continue
            return k
    return n - 1


def _min_corrected(shown_cts: list[int], offset: int) -> int:
    """FFmpeg's running minimum of ``cts + offset`` over the shown samples in decode order,
    which restarts while it is negative."""
    lowest = min(shown_cts) + offset
    if lowest >= 0:
        return lowest
    best = -1
    for value in shown_cts:
        value += offset
        if best < 0 or value < best:
            best = value
    return best


def read_index(path: Path, file_size: int) -> IndexTable:
    with open(path, "rb") as f:
        moov, mdats = find_moov(f, file_size)
    track, layouts = parse_movie(moov)
    check_layout(layouts, mdats, file_size)
    return index_table(track)
