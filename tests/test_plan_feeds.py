"""Stream feeds: the grid walked against the frame table gives the frames listing it gives, at a
cost bounded by the frames fed, not by the grid (``every_s: 1e-9`` over a video)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from fixturevideos import VIDEOS

from glasskit_eval.plan.feeds import FeedFrame, feed
from glasskit_eval.video.frametable import frame_table
from glasskit_eval.video.probe import probe
from glasskit_eval.video.timeline import timeline

VIDEO_NAMES = ("cfr_h264.mp4", "vfr_h264.mp4", "bframes_h264.mp4", "negative_cts_h264.mp4", "halfway_30fps.mp4",
               "mpeg4_es.m4v")


def listed(path_name: str, every_s: Fraction) -> tuple[FeedFrame, ...]:
    """The feed as the grid lists it: every grid time mapped by the frame rule, each frame once."""
    path = VIDEOS / path_name
    frames, end = timeline(frame_table(path)), probe(path).end_time
    out: list[FeedFrame] = []
    for k in range(int(end // every_s) + 1):
        index = frames.nearest(k * every_s)
        if index not in {f.frame_index for f in out}:
            out.append(FeedFrame(index, frames.time(index)))
    return tuple(out)


@pytest.mark.parametrize("name", VIDEO_NAMES)
@pytest.mark.parametrize("every_s", ["1/1000", "1/60", "1/30", "1/29", "1/20", "1/10", "1/3", "7/10", "3"])
def test_walking_the_grid_feeds_the_frames_listing_it_does(name: str, every_s: str) -> None:
    path = VIDEOS / name
    assert feed(frame_table(path), probe(path).end_time, Fraction(every_s)) == listed(name, Fraction(every_s))


def test_a_grid_of_a_nanosecond_feeds_every_frame_once_at_once() -> None:
    path = VIDEOS / "cfr_h264.mp4"
    table, end = frame_table(path), probe(path).end_time
    started = time.perf_counter()
    fed = feed(table, end, Fraction(1, 10**9))  # 2e9 grid times over the 2 s video
    assert time.perf_counter() - started < 5
    assert fed == feed(table, end, None)
