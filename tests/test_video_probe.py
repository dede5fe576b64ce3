"""Where a video ends: at its last frame's own end (timestamp plus the duration the container
gives it, else the gap before it), plus the rounding tolerance; such a time gets the last frame.

Two fixtures are made for this: ``vfr_long_last_h264.mp4`` (variable rate, the last frame lasts
23/30 s by ``stts`` where the smallest gap is 1/30 s) and ``mediarecorder_vp8.webm`` (a browser
recording: no frame carries a duration, the gap before the last frame is 250 ms).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import av
import pytest
from fixturevideos import MANIFEST, VIDEOS
from framecode import read_frame_index

from glasskit_eval.errors import VideoError
from glasskit_eval.video._mp4index import read_index
from glasskit_eval.video.frames import decode_at, decode_sequential
from glasskit_eval.video.frametable import build_frame_table
from glasskit_eval.video.probe import END_TOLERANCE_S, info_from_table, probe

pytestmark = pytest.mark.frames

F = Fraction
VFR_MP4 = "vfr_long_last_h264.mp4"
RECORDER_WEBM = "mediarecorder_vp8.webm"
#: (fixture, the last frame's own duration in seconds, where the clip ends).
ENDS = [(VFR_MP4, F(23, 30), F(3, 2)), (RECORDER_WEBM, F(1, 4), F("0.867"))]


def times(name: str) -> list[Fraction]:
    return [Fraction(t) for t in MANIFEST[name]["frame_times"]]


def test_the_fixtures_are_what_they_claim() -> None:
    # The VFR MP4: its stts gives the last frame 23/30 s, far more than its smallest gap.
    index = read_index(VIDEOS / VFR_MP4, (VIDEOS / VFR_MP4).stat().st_size)
    assert index.last_duration * index.time_base == F(23, 30)
    assert min(b - a for a, b in itertools.pairwise(times(VFR_MP4))) == F(1, 30)
    # The WebM: the demuxer knows no frame's duration (no BlockDuration, no DefaultDuration)
    # and no frame rate, as in what MediaRecorder writes.
    with av.open(str(VIDEOS / RECORDER_WEBM)) as container:
        stream = container.streams.video[0]
        durations = [packet.duration for packet in container.demux(stream) if packet.size]
        assert not stream.average_rate  # None, or PyAV 19's AVRational(0, 0)
    assert len(durations) == 11 and set(durations) <= {0, None}
    gaps = [b - a for a, b in itertools.pairwise(times(RECORDER_WEBM))]
    assert gaps[-1] == F(1, 4) and min(gaps) == F(33, 1000)


@pytest.mark.parametrize(("name", "own", "end"), ENDS)
def test_the_clip_ends_at_the_last_frames_own_end_on_every_table_path(name: str, own: Fraction,
                                                                      end: Fraction) -> None:
    for use_index in (True, False):
        table = build_frame_table(VIDEOS / name, use_index=use_index)
        assert table.trusted and table.last_duration * table.time_base == own, use_index
        info = info_from_table(table)
        assert info.last_frame_time == times(name)[-1]
        assert info.end_time == times(name)[-1] + own == end
        assert f"{float(end)}s" in info.describe()


@pytest.mark.parametrize(("name", "own", "end"), ENDS)
def test_a_time_at_the_end_is_inside_and_just_beyond_the_tolerance_is_refused(name: str, own: Fraction,
                                                                               end: Fraction) -> None:
    info = probe(VIDEOS / name)
    # Refused before: the end was put one smallest gap after the last frame.
    smallest = min(b - a for a, b in itertools.pairwise(times(name)))
    assert end > times(name)[-1] + smallest + END_TOLERANCE_S
    info.check_time(end, "sample time")
    info.check_time(end + END_TOLERANCE_S, "sample time")
    beyond = end + END_TOLERANCE_S + F(1, 1000)
    with pytest.raises(VideoError, match=rf"sample time {float(beyond)}s is past the end of .*{name} "
                                         rf"\(clip length {float(end)}s from its first frame\)"):
        info.check_time(beyond, "sample time")


@pytest.mark.parametrize(("name", "own", "end"), ENDS)
@pytest.mark.parametrize("mode", ["seek", "sequential"])
def test_the_end_gets_the_last_frame(name: str, own: Fraction, end: Fraction, mode: str) -> None:
    last = len(times(name)) - 1
    # Inside the last frame's own duration, at its end and at the tolerance past it: nearest
    # is the last frame every time (there is no later one to tie with).
    wanted = [times(name)[-1] + own / 2, end, end + END_TOLERANCE_S]
    frames = decode_at(VIDEOS / name, wanted, mode=mode) if mode == "seek" else \
        decode_sequential(VIDEOS / name, wanted)
    got = [(want, frame.index, read_frame_index(frame.image)) for want, frame in frames]
    assert got == [(want, last, last) for want in wanted]

