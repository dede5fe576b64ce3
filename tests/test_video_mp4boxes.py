"""MP4 box reading: the fixtures hold the boxes the index reader must handle, and damage to
box structure or sample layout is refused, not guessed."""

from __future__ import annotations

import random
import struct
from array import array

import av
import pytest
from fixturevideos import VIDEOS

from glasskit_eval.video._mp4boxes import IndexUnusable, Layout, Runs, check_layout, children

pytestmark = pytest.mark.frames


def first_packets(path: object, count: int) -> list[tuple[int, int, bool, bool]]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        packets = [(p.pts, p.dts, p.is_keyframe, p.is_discard) for p in container.demux(stream) if p.size]
    return packets[:count]


def test_the_fixtures_cover_what_the_index_reader_must_handle() -> None:
    def boxes(name: str) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        data = (VIDEOS / name).read_bytes()

        def walk(start: int, end: int) -> None:
            for kind, s, e in children(data, start, end):
                found.setdefault(kind, data[s:e])
                if kind in (b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts"):
                    walk(s, e)

        walk(0, len(data))
        return found

    negative = boxes("negative_cts_h264.mp4")[b"ctts"]
    assert negative[0] == 1  # version 1
    count = struct.unpack(">I", negative[4:8])[0]
    assert any(v < 0 for v in struct.unpack(f">{2 * count}i", negative[8:8 + 8 * count])[1::2])
    assert b"co64" in boxes("co64_h264.mp4")
    empty_first = boxes("start_offset_h264.mp4")[b"elst"]
    assert struct.unpack(">i", empty_first[12:16])[0] == -1  # an empty first edit
    cut = boxes("cut_preroll_h264.mov")[b"elst"]
    assert struct.unpack(">i", cut[12:16])[0] > 0  # media time past the copied keyframe
    assert first_packets(VIDEOS / "cut_preroll_h264.mov", 1)[0][3]  # its pre-roll is discarded


def test_children_refuses_boxes_that_do_not_fit() -> None:
    good = struct.pack(">I4s", 12, b"free") + b"abcd"
    assert list(children(good, 0, len(good))) == [(b"free", 8, 12)]
    with pytest.raises(IndexUnusable, match="impossible size"):
        list(children(struct.pack(">I4s", 40, b"free") + b"abcd", 0, 12))
    with pytest.raises(IndexUnusable, match="cut short"):
        list(children(good + b"\0\0", 0, 14))
    with pytest.raises(IndexUnusable, match="impossible size"):
        list(children(struct.pack(">I4s", 4, b"free"), 0, 8))


def layout(offsets: list[int], sizes: list[int], per_chunk: int) -> Layout:
    return Layout(array("I", sizes), array("Q", offsets), [(1, per_chunk)])


def test_samples_must_tile_the_media_data_exactly() -> None:
    mdat = [(100, 160)]
    check_layout([layout([100, 130], [10, 20, 10, 20], 2)], mdat, 200)
    with pytest.raises(IndexUnusable, match="fill the media data"):  # a sample shrank: a gap
        check_layout([layout([100, 130], [10, 19, 10, 20], 2)], mdat, 200)
    with pytest.raises(IndexUnusable, match="overlap"):  # a chunk moved onto another
        check_layout([layout([100, 120], [10, 20, 10, 20], 2)], [(100, 160)], 200)
    with pytest.raises(IndexUnusable, match="past the end"):
        check_layout([layout([100, 130], [10, 20, 10, 20], 2)], mdat, 150)
    with pytest.raises(IndexUnusable, match="disagree"):
        check_layout([layout([100, 130], [10, 20, 10], 2)], mdat, 200)
    # Two tracks interleaved tile it together.
    check_layout([layout([100, 140], [10, 10], 1), layout([110, 150], [30, 10], 1)], mdat, 200)


@pytest.mark.parametrize("shape", ["all ones", "mostly ones", "long runs"])
def test_run_tables_expand_to_one_value_per_sample(shape: str) -> None:
    rng = random.Random(shape)
    if shape == "all ones":
        counts = [1] * 500
    elif shape == "mostly ones":  # the ctts of a B-frame stream: a few longer runs, and empty ones
        counts = [rng.choice([1] * 20 + [0, 2, 3, 7]) for _ in range(500)]
    else:  # the stts of a variable-rate stream
        counts = [rng.randrange(0, 90) for _ in range(40)]
    values = [rng.randrange(-3000, 3000) for _ in counts]
    naive = [value for count, value in zip(counts, values) for _ in range(count)]
    assert Runs(array("i", counts), array("i", values)).expand() == naive
    assert Runs(counts, values).expand() == naive
