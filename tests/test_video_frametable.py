"""The frame table agrees with a full decode on every fixture, and is distrusted when it must be."""

from __future__ import annotations

import shutil
from array import array
from fractions import Fraction
from pathlib import Path

import av
import pytest
from fixturevideos import MANIFEST, VIDEOS, decode_all
from framecode import read_frame_index

from glasskit_eval.video._orientation import Orientation, orientation_from_side_data
from glasskit_eval.video.frames import decode_at, decode_sequential
from glasskit_eval.video.frametable import build_frame_table, frame_table
from glasskit_eval.video.probe import probe

pytestmark = pytest.mark.frames


def full_decode(path: Path) -> tuple[list[int], Orientation]:
    """Every decodable frame's pts in the order a plain decode delivers them, and the first
    frame's orientation."""
    frames = list(decode_all(path))
    return [frame.pts for frame in frames], orientation_from_side_data(frames[0].side_data)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_table_matches_a_full_decode(name: str) -> None:
    entry = MANIFEST[name]
    for use_index in (True, False):
        table = build_frame_table(VIDEOS / name, use_index=use_index)
        assert table.seekable is entry["seekable"], table.reason
        if not entry["seekable"]:
            continue
        assert table.trusted, table.reason
        pts, orientation = full_decode(VIDEOS / name)
        if entry["truncated"]:
            # The table lists what the file holds; some of it cannot be decoded.
            assert set(pts) <= set(table.pts)
            assert [table.index_of(p) for p in pts] == entry["frame_indices"]
        else:
            assert list(table.pts) == pts
            assert [str(t) for t in table.times] == [str(Fraction(t)) for t in entry["frame_times"]]
        assert table.orientation == orientation
        # Frames before the first keyframe (edit-list pre-roll) are reached from the start.
        assert list(table.keyframes) == sorted({0, *entry["keyframe_indices"]})
        assert table.orientation.mirrored is entry["mirrored"]


def test_selection_is_nearest_with_ties_to_the_earlier_frame() -> None:
    table = frame_table(VIDEOS / "halfway_30fps.mp4")
    assert table.select(Fraction("0.05")) == 1  # exactly halfway between 1/30 and 2/30
    assert table.select(Fraction("0.05") + Fraction(1, 10**9)) == 2
    assert table.select(Fraction(0)) == 0
    assert table.select(Fraction(100)) == len(table.times) - 1


def remux(source: Path, target: Path) -> None:
    with av.open(str(source)) as inp, av.open(str(target), "w") as out:
        in_stream = inp.streams.video[0]
        out_stream = out.add_stream_from_template(in_stream)
        for packet in inp.demux(in_stream):
            if packet.dts is None:
                continue
            packet.stream = out_stream
            out.mux(packet)


def test_a_container_without_a_trusted_index_is_decoded_sequentially(tmp_path: Path) -> None:
    ts = tmp_path / "bframes.ts"
    remux(VIDEOS / "bframes_h264.mp4", ts)
    table = frame_table(ts)
    assert not table.seekable
    assert "decoded sequentially" in probe(ts).describe()
    times = [Fraction(i, 25) for i in range(0, 50, 3)]
    got = [(w, f.index, f.media_time, f.image.tobytes()) for w, f in decode_at(ts, times, mode="seek")]
    want = [(w, f.index, f.media_time, f.image.tobytes()) for w, f in decode_sequential(ts, times)]
    assert got == want


def test_a_table_that_disagrees_with_the_decoder_falls_back_to_sequential(tmp_path: Path) -> None:
    video = tmp_path / "copy.mp4"
    shutil.copy(VIDEOS / "bframes_h264.mp4", video)
    table = frame_table(video)
    # Simulate an index that lies: frame timestamps the decoder will never produce.
    table.pts = array("q", [pts + 1 for pts in table.pts])
    times = [Fraction(i, 25) for i in range(0, 50, 7)]
    got = list(decode_at(video, times, mode="seek"))
    assert not table.trusted and "frame table" in table.reason
    assert [w for w, _ in got] == times
    for want, frame in got:
        assert frame.index == round(want * 25)
        assert read_frame_index(frame.image) == frame.index
        frame.image.close()


def test_missing_timestamps_make_the_table_untrusted(tmp_path: Path) -> None:
    from glasskit_eval.video.frametable import PacketInfo, _table

    with av.open(str(VIDEOS / "cfr_h264.mp4")) as container:
        stream = container.streams.video[0]
        packets = [PacketInfo(None, None, True), PacketInfo(None, None, False)]
        table = _table(VIDEOS / "cfr_h264.mp4", container, stream, Fraction(1, 10240), Fraction(10),
                       packets, None, None)
    assert not table.trusted and "no timestamp" in table.reason
    assert table.frame_count == 2


def test_probe_reports_what_the_table_learned() -> None:
    info = probe(VIDEOS / "bframes_h264.mp4")
    text = info.describe()
    assert "B-frames" in text and "a keyframe every 0.40s" in text and "constant frame rate" in text
    assert info.seekable and info.keyframe_count == 5
    rotated = probe(VIDEOS / "mirror_rotate90.mp4")
    assert rotated.orientation.rotation == 90 and rotated.orientation.mirrored
