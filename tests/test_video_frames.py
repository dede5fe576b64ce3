"""Exact frame selection on real fixture videos whose frames carry their own index."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from framecode import read_frame_index

from glasskit_eval.errors import VideoError
from glasskit_eval.video import damage
from glasskit_eval.video._sequential import FrameClock
from glasskit_eval.video.frames import NearestSelector, decode_at, stream_orientation
from glasskit_eval.video.probe import probe

pytestmark = pytest.mark.frames

VIDEOS = Path(__file__).resolve().parent.parent / "fixtures" / "videos"
MANIFEST = json.loads((VIDEOS / "manifest.json").read_text())


def expected_index(times: list[Fraction], want: Fraction) -> int:
    """The spec's rule, written independently: nearest, ties to the earlier frame."""
    best = 0
    for i, t in enumerate(times):
        if abs(t - want) < abs(times[best] - want):
            best = i
    return best


def probe_times(times: list[Fraction]) -> list[Fraction]:
    wanted = set(times)
    for a, b in itertools.pairwise(times):
        mid = (a + b) / 2
        wanted.update({mid, mid - Fraction(1, 10_000), mid + Fraction(1, 10_000)})
    wanted.add(times[-1] + Fraction(1, 100))
    return sorted(wanted)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_fixture_selects_the_exact_frame(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(damage, "_reported", set())  # damage is reported once per process
    entry = MANIFEST[name]
    times = [Fraction(t) for t in entry["frame_times"]]
    requests = probe_times(times)
    warnings: list[str] = []
    got = dict(decode_at(VIDEOS / name, requests, warn=warnings.append))
    assert sorted(got) == requests
    assert bool(warnings) is entry["truncated"], warnings
    for want in requests:
        frame = got[want]
        position = expected_index(times, want)
        # A truncated file's indices and codes have gaps where frames were lost.
        expected = entry["frame_indices"][position]
        assert frame.index == expected, f"{name} @ {want}"
        assert frame.media_time == times[position]
        assert frame.image.mode == "RGB"
        assert frame.image.size == (entry["display_width"], entry["display_height"])
        # The pixels say which frame this is, and raise if it is not upright and unmirrored.
        assert read_frame_index(frame.image) == entry["frame_codes"][position], f"{name} @ {want}"
        frame.image.close()


def test_halfway_between_frames_is_a_tie_that_picks_the_earlier_frame() -> None:
    # 0.05 s is exactly halfway between frames 1 (1/30 s) and 2 (2/30 s); as binary floats
    # it is not, which is why selection compares rationals.
    (want, frame), = list(decode_at(VIDEOS / "halfway_30fps.mp4", [Fraction("0.05")]))
    assert want == Fraction("0.05")
    assert frame.index == 1
    assert read_frame_index(frame.image) == 1
    frame.image.close()


def test_start_offset_is_rebased_to_the_first_frame() -> None:
    entry = MANIFEST["start_offset_h264.mp4"]
    assert Fraction(entry["first_time"]) == Fraction(3, 2)
    frames = dict(decode_at(VIDEOS / "start_offset_h264.mp4", [Fraction(0), Fraction(1)]))
    assert frames[Fraction(0)].index == 0
    assert read_frame_index(frames[Fraction(1)].image) == frames[Fraction(1)].index == 10
    for f in frames.values():
        f.image.close()


def test_duplicate_times_share_one_frame_but_not_one_image() -> None:
    out = list(decode_at(VIDEOS / "cfr_h264.mp4", [Fraction("0.5"), Fraction("0.5"), Fraction("0.52")]))
    assert [t for t, _ in out] == [Fraction("0.5"), Fraction("0.52")]
    a, b = out[0][1], out[1][1]
    assert a.index == b.index == 5
    assert a.image is not b.image
    a.image.close()
    assert b.image.getpixel((0, 0)) is not None
    b.image.close()


@pytest.mark.parametrize(("name", "rotation", "mirrored"), [
    ("rotate90.mp4", 90, False), ("rotate180.mov", 180, False), ("rotate270.m4v", 270, False),
    ("mirror.mp4", 0, True), ("mirror_vertical.mp4", 0, True), ("mirror_rotate90.mp4", 90, True),
    ("cfr_h264.mp4", 0, False),
])
def test_stream_orientation_reports_rotation_and_reflection(name: str, rotation: int, mirrored: bool) -> None:
    orientation = stream_orientation(VIDEOS / name)
    assert orientation.mirrored is mirrored
    if not mirrored:
        assert orientation.rotation == rotation


def test_probe_measures_the_clip_from_its_first_frame() -> None:
    info = probe(VIDEOS / "start_offset_h264.mp4")
    entry = MANIFEST["start_offset_h264.mp4"]
    assert info.first_time == Fraction(3, 2)
    assert info.frame_count == entry["frame_count"]
    assert info.last_frame_time == Fraction(entry["frame_times"][-1])
    assert info.end_time == info.last_frame_time + Fraction(1, 10)


def test_probe_detects_variable_rate_and_b_frames() -> None:
    assert probe(VIDEOS / "vfr_h264.mp4").variable_rate
    assert not probe(VIDEOS / "cfr_h264.mp4").variable_rate
    assert probe(VIDEOS / "bframes_h264.mp4").has_b_frames
    assert not probe(VIDEOS / "cfr_h264.mp4").has_b_frames


def test_missing_and_broken_videos_raise_video_errors(tmp_path: Path) -> None:
    with pytest.raises(VideoError, match="not found"):
        probe(tmp_path / "missing.mp4")
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all" * 10)
    with pytest.raises(VideoError, match="cannot open video"):
        probe(broken)


def test_frame_clock_estimates_from_rate_when_timestamps_are_missing() -> None:
    clock = FrameClock(Fraction(1, 1000), Fraction(25))
    for _ in range(3):
        clock.packet(None)
    assert [clock.frame(None)[:2] for _ in range(3)] == [(0, Fraction(0)), (1, Fraction(1, 25)),
                                                         (2, Fraction(2, 25))]


def test_frame_clock_rebases_to_the_first_frame_and_numbers_by_timestamp_rank() -> None:
    clock = FrameClock(Fraction(1, 1000), None)
    for pts in (3000, 3100, 3040):  # decode order of a B-frame stream
        clock.packet(pts)
    assert clock.frame(3000) == (0, Fraction(0), [])
    assert clock.frame(3040) == (1, Fraction(4, 100), [])
    assert clock.frame(3100) == (2, Fraction(1, 10), [])


def test_frame_clock_leaves_a_gap_for_a_lost_frame_and_names_its_time() -> None:
    clock = FrameClock(Fraction(1, 10), None)
    for pts in range(6):
        clock.packet(pts)
    assert clock.frame(0)[:2] == (0, Fraction(0))
    clock.skipped()
    assert clock.frame(2) == (2, Fraction(1, 5), [Fraction(1, 10)])
    assert clock.frame(3)[2] == []
    assert clock.tail_lost() == [Fraction(2, 5), Fraction(1, 2)]
    assert not clock.guessed


def test_frame_clock_without_timestamps_numbers_a_skipped_packet_as_one_frame() -> None:
    clock = FrameClock(Fraction(1, 1000), Fraction(10))
    clock.packet(None)
    assert clock.frame(None)[:2] == (0, Fraction(0))
    clock.skipped()
    assert clock.frame(None)[:2] == (2, Fraction(1, 5))
    assert clock.guessed


def test_selector_ties_go_to_the_earlier_frame() -> None:
    sel = NearestSelector([Fraction(1, 2), Fraction(3, 4), Fraction(2)])
    assert sel.push(Fraction(0)) == []
    assert sel.push(Fraction(1)) == [(Fraction(1, 2), "prev"), (Fraction(3, 4), "this")]
    assert not sel.done
    assert sel.finish() == [Fraction(2)]
    assert sel.done
