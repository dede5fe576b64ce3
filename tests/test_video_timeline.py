"""The one selection rule (glasskit_eval.video.timeline): nearest frame, ties to the earlier one,
for tables with timestamps and for videos without them, checked at the ties."""

from __future__ import annotations

import itertools
from array import array
from fractions import Fraction as F
from pathlib import Path

import pytest
from evalkit import VIDEOS

from glasskit_eval.video._orientation import UPRIGHT
from glasskit_eval.video._selection import NearestSelector
from glasskit_eval.video._sequential import FrameClock
from glasskit_eval.video.frames import decode_at
from glasskit_eval.video.frametable import FrameTable, frame_table
from glasskit_eval.video.timeline import DEFAULT_RATE, nearest_at_rate, timeline


def table(count: int, rate: F | None, *, timestamps: bool, step: int = 3000) -> FrameTable:
    """``count`` frames ``step`` ticks apart (1/90000 s), or the same frames without timestamps."""
    return FrameTable(
        path=Path("synthetic.mp4"), codec="h264", format_name="mov,mp4", width=16, height=16,
        time_base=F(1, 90000), average_rate=rate,
        pts=array("q", [1000 + i * step for i in range(count)] if timestamps else []),
        keyframes=(0,), seek_points=(0,), orientation=UPRIGHT, has_b_frames=False,
        packets_without_pts=0 if timestamps else count, packet_count=count, first_time=F(0),
        trusted=timestamps, reason="" if timestamps else f"{count} packets have no timestamp")


@pytest.mark.parametrize("timestamps", [True, False])
def test_a_time_halfway_between_two_frames_gets_the_earlier_one(timestamps: bool) -> None:
    line = timeline(table(10, F(30), timestamps=timestamps))
    assert line.estimated is not timestamps
    for k in range(9):
        halfway = (line.time(k) + line.time(k + 1)) / 2
        assert line.nearest(halfway) == k, k
        # Any nearer to the later frame, and it is the later one's.
        assert line.nearest(halfway + F(1, 10**9)) == k + 1, k
        assert line.nearest(halfway - F(1, 10**9)) == k, k


@pytest.mark.parametrize("timestamps", [True, False])
def test_times_outside_the_video_get_its_first_and_last_frames(timestamps: bool) -> None:
    line = timeline(table(10, F(30), timestamps=timestamps))
    assert line.nearest(F(-1)) == 0
    assert line.nearest(F(100)) == 9
    assert line.count == 10
    assert line.times == tuple(F(i, 30) for i in range(10))


@pytest.mark.parametrize("timestamps", [True, False])
def test_between_is_closed_at_both_ends(timestamps: bool) -> None:
    line = timeline(table(10, F(30), timestamps=timestamps))
    assert line.between(F(1, 30), F(3, 30)) == range(1, 4)
    assert line.between(F(1, 30) + F(1, 10**9), F(3, 30) - F(1, 10**9)) == range(2, 3)
    assert line.between(F(3, 30), F(1, 30)) == range(0)
    assert line.between(F(-1), F(100)) == range(0, 10)


def test_round_half_to_even_is_not_the_rule() -> None:
    # Python's round() sends 1.5 to 2 and 2.5 to 2: every other tie would go to the later frame.
    assert [nearest_at_rate(F(2 * k + 1, 2), F(1)) for k in range(4)] == [0, 1, 2, 3]
    assert [round(F(2 * k + 1, 2)) for k in range(4)] == [0, 2, 2, 4]


def test_a_video_without_a_rate_is_placed_at_30_fps() -> None:
    line = timeline(table(5, None, timestamps=False))
    assert DEFAULT_RATE == 30 and line.time(3) == F(3, 30)
    assert line.nearest(F(3, 60)) == 1


def test_estimated_frames_are_selected_as_the_sequential_decode_selects_them() -> None:
    # FrameClock places frames without timestamps; NearestSelector is the decode's own rule.
    rate = F(25)
    clock = FrameClock(F(1, 1000), rate)
    times = [clock.frame(None)[1] for _ in range(8)]
    wanted = sorted({F(k, 100) for k in range(0, 35)} | {(a + b) / 2 for a, b in itertools.pairwise(times)})
    selector = NearestSelector(wanted)
    got: dict[F, int] = {}
    for index, time in enumerate(times):
        for want, which in selector.push(time):
            got[want] = index - 1 if which == "prev" else index
    for want in selector.finish():
        got[want] = len(times) - 1
    line = timeline(table(8, rate, timestamps=False))
    assert {want: line.nearest(want) for want in wanted} == got


@pytest.mark.frames
@pytest.mark.parametrize("name", ["cfr_h264.mp4", "vfr_h264.mp4", "bframes_h264.mp4", "start_offset_h264.mp4"])
def test_ties_on_real_videos_decode_to_the_frame_the_timeline_names(name: str) -> None:
    line = timeline(frame_table(VIDEOS / name))
    halfways = [(line.time(k) + line.time(k + 1)) / 2 for k in range(min(line.count - 1, 6))]
    got = {want: frame.index for want, frame in decode_at(VIDEOS / name, halfways)}
    assert got == {want: line.nearest(want) for want in halfways} == {h: k for k, h in enumerate(halfways)}
