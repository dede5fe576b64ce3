"""Frame tables read from the MP4/MOV index equal the demuxed tables, and damage to the index
gives either the right table or the demux fallback, never a wrong table."""

from __future__ import annotations

import random
import struct
from dataclasses import fields
from pathlib import Path

import av
import pytest
from fixturevideos import MANIFEST, VIDEOS

from glasskit_eval.errors import VideoError
from glasskit_eval.video._mp4index import IndexTable, IndexUnusable, read_index
from glasskit_eval.video.frametable import FrameTable, build_frame_table

pytestmark = pytest.mark.frames

FRAME_TABLE_FIELDS = [f.name for f in fields(FrameTable)]
MOV_FAMILY = sorted(name for name, entry in MANIFEST.items() if entry["demuxer"].startswith("mov,"))
#: The MP4s the index cannot describe, and why.
FALLBACKS = {"fragmented_cut_h264.mp4": "fragmented", "truncated_h264.mp4": "past the end of the file"}


def demuxed(path: Path) -> FrameTable:
    return build_frame_table(path, use_index=False)


def first_packets(path: Path, count: int) -> list[tuple[int, int, bool, bool]]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        packets = [(p.pts, p.dts, p.is_keyframe, p.is_discard) for p in container.demux(stream) if p.size]
    return packets[:count]


def assert_same_table(index: IndexTable, table: FrameTable, path: Path) -> None:
    assert list(index.pts) == list(table.pts), path.name
    assert sorted({0, *index.keyframes}) == list(table.keyframes), path.name
    demux_seek = dict(zip(table.keyframes, table.seek_points, strict=True))
    assert {k: demux_seek[k] for k in index.keyframes} == dict(zip(index.keyframes, index.seek_points,
                                                                    strict=True)), path.name
    assert index.packets == first_packets(path, len(index.packets)), path.name
    assert index.time_base == table.time_base


@pytest.mark.parametrize("name", MOV_FAMILY)
def test_the_index_table_equals_the_demuxed_table(name: str) -> None:
    path = VIDEOS / name
    if name in FALLBACKS:
        with pytest.raises(IndexUnusable, match=FALLBACKS[name]):
            read_index(path, path.stat().st_size)
        return
    index = read_index(path, path.stat().st_size)
    table = demuxed(path)
    assert_same_table(index, table, path)
    assert index.reordered is MANIFEST[name]["has_b_frames"]
    # And the frame table built through it is the demuxed one, field for field.
    fast = build_frame_table(path)
    for field in FRAME_TABLE_FIELDS:
        assert getattr(fast, field) == getattr(table, field) or field == "pts", field
    assert list(fast.pts) == list(table.pts)


# --------------------------------------------------------------------------- fuzzing


def _table_boxes(data: bytes) -> list[tuple[bytes, int, int]]:
    """(type, box start, box end) of moov and every box inside it."""
    out: list[tuple[bytes, int, int]] = []

    def walk(start: int, end: int) -> None:
        pos = start
        while pos + 8 <= end:
            size, kind = struct.unpack(">I4s", data[pos:pos + 8])
            header = 8
            if size == 1:
                size, header = struct.unpack(">Q", data[pos + 8:pos + 16])[0], 16
            elif size == 0:
                size = end - pos
            if kind != b"mdat":
                out.append((kind, pos, pos + size))
            if kind in (b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts"):
                walk(pos + header, pos + size)
            pos += size

    walk(0, len(data))
    return out


def mutations(data: bytes, rng: random.Random, count: int) -> list[tuple[str, bytes]]:
    boxes = _table_boxes(data)
    out = []
    for _ in range(count):
        kind, start, end = rng.choice(boxes)
        what = rng.choice(["flip", "word", "cut", "size", "zero"])
        mutated = bytearray(data)
        if what == "flip":
            pos = rng.randrange(start, end)
            mutated[pos] ^= 1 << rng.randrange(8)
            if kind == b"stss" and pos >= start + 16:
                what = "stss entry"
        elif what == "word":
            pos = rng.randrange(start + 8, max(start + 9, end - 3))
            mutated[pos:pos + 4] = struct.pack(">I", rng.choice([0, 1, 2, 0xFFFFFFFF, 0x7FFFFFFF,
                                                              rng.randrange(1 << 32)]))
            if kind == b"stss" and pos + 4 > start + 16:
                what = "stss entry"
        elif what == "cut":
            mutated = mutated[:rng.randrange(start, end)]
        elif what == "size":
            size = struct.unpack(">I", mutated[start:start + 4])[0]
            mutated[start:start + 4] = struct.pack(">I", max(0, size + rng.choice([-8, -4, -1, 1, 4, 8])))
        else:
            pos = rng.randrange(start + 8, max(start + 9, end))
            stop = min(end, pos + rng.randrange(1, 32))
            mutated[pos:stop] = bytes(stop - pos)
            if kind == b"stss" and stop > start + 16:
                what = "stss entry"
        label = what if what == "stss entry" else f"{what} in {kind.decode('latin-1')}"
        out.append((label, bytes(mutated)))
    return out


FUZZED = ["bframes_h264.mp4", "audio_first_h264.mp4", "cut_preroll_h264.mov", "negative_cts_h264.mp4", "start_offset_bframes_h264.mov",
          "hevc_bframes.mp4", "co64_h264.mp4", "vfr_h264.mp4"]


@pytest.mark.parametrize("name", FUZZED)
def test_damaged_indexes_give_the_right_table_or_the_fallback(name: str, tmp_path: Path) -> None:
    data = (VIDEOS / name).read_bytes()
    rng = random.Random(f"glasskit-{name}")
    used = fallbacks = 0
    for n, (what, mutated) in enumerate(mutations(data, rng, 60)):
        path = tmp_path / f"{n}{Path(name).suffix}"
        path.write_bytes(mutated)
        try:
            read_index(path, len(mutated))
            used += 1
        except IndexUnusable:
            fallbacks += 1
        try:
            reference = demuxed(path)
        except VideoError:
            # FFmpeg refuses the file; so must the index path, with the same kind of error.
            with pytest.raises(VideoError):
                build_frame_table(path)
            continue
        table = build_frame_table(path)
        same = [field for field in FRAME_TABLE_FIELDS if field != "pts"
                and getattr(table, field) != getattr(reference, field)]
        if list(table.pts) != list(reference.pts):
            same.append("pts")
        if same and what == "stss entry":
            # A keyframe entry moved to another sample cannot be told from the index alone
            # (FFmpeg's parser flags keyframes from the bitstream): decoding still delivers the
            # right frames, because a seek that does not land on a real keyframe is caught.
            assert same == ["keyframes", "seek_points"], (what, same)
            check_frames_match_a_sequential_decode(path)
            continue
        assert not same, f"{name}: {what}: the index gave a wrong table ({', '.join(same)})"
    assert used and fallbacks, (used, fallbacks)


def check_frames_match_a_sequential_decode(path: Path) -> None:
    from fractions import Fraction

    from glasskit_eval.video.frames import decode_at, decode_sequential

    times = [Fraction(i, 7) for i in range(14)]
    got = [(w, f.index, f.image.tobytes()) for w, f in decode_at(path, times, mode="seek",
                                                                warn=lambda _m: None)]
    want = [(w, f.index, f.image.tobytes()) for w, f in decode_sequential(path, times, warn=lambda _m: None)]
    assert got == want


def insert_into_stbl(data: bytes, box: bytes) -> bytes:
    """``data`` with ``box`` appended to the video track's stbl (moov follows the media data,
    so no sample moves)."""
    chain = [b"moov", b"trak", b"mdia", b"minf", b"stbl"]
    out = bytearray(data)
    parents: list[int] = []
    start, end = 0, len(out)
    for kind in chain:
        for k, s, e in _table_boxes(bytes(out)):
            if k == kind and start <= s < end and (not parents or s > parents[-1]):
                parents.append(s)
                start, end = s + 8, e
                break
    stbl_end = end
    out[stbl_end:stbl_end] = box
    for p in parents:
        (size,) = struct.unpack(">I", out[p:p + 4])
        out[p:p + 4] = struct.pack(">I", size + len(box))
    return bytes(out)


@pytest.mark.parametrize(("grouping", "uses_index"), [(b"tscl", True), (b"sync", False), (b"rap ", False)])
def test_sample_groups_that_mark_keyframes_send_the_file_to_the_demuxer(
        grouping: bytes, uses_index: bool, tmp_path: Path) -> None:
    payload = struct.pack(">I4sII", 0, grouping, 1, 50) + struct.pack(">I", 1)  # 50 samples in group 1
    box = struct.pack(">I4s", 8 + len(payload), b"sbgp") + payload
    path = tmp_path / "grouped.mp4"
    path.write_bytes(insert_into_stbl((VIDEOS / "bframes_h264.mp4").read_bytes(), box))
    if uses_index:
        assert_same_table(read_index(path, path.stat().st_size), demuxed(path), path)
    else:
        with pytest.raises(IndexUnusable, match="keyframes beyond stss"):
            read_index(path, path.stat().st_size)
    assert list(build_frame_table(path).pts) == list(demuxed(path).pts)
