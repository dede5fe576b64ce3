"""Decode strategies: the cost model, and identical frames whichever way they are decoded."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from framecode import read_frame_index

from glasskit_eval.video import _segments as segments
from glasskit_eval.video.frames import decode_at, decode_sequential
from glasskit_eval.video.strategy import (
    DEFAULT_PARALLEL_SEEK_WORK,
    MIN_PARALLEL_SEEK_WORK,
    SECOND_DECODER_MARGIN,
    SEEK_COST_FRAMES,
    Piece,
    parallel_seek_work,
    plan,
    split_piece,
)

pytestmark = pytest.mark.frames

VIDEOS = Path(__file__).resolve().parent.parent / "fixtures" / "videos"
MANIFEST = json.loads((VIDEOS / "manifest.json").read_text())
KEYS = list(range(0, 18000, 60))  # a keyframe every 2 s at 30 fps, 10 minutes


def test_dense_requests_become_one_sequential_span_on_one_core() -> None:
    needed = list(range(0, 18000, 5))
    p = plan(KEYS, needed, cores=1)
    assert p.kind == "sequential" and p.pieces == (Piece(0, tuple(needed)),)
    # A GOP tail longer than a seek is skipped: seeking to the next keyframe is cheaper.
    p = plan(KEYS, list(range(0, 18000, 15)), cores=1)
    assert p.kind == "seek" and all(piece.needed[-1] == piece.start + 45 for piece in p.pieces)


def test_dense_requests_are_cut_at_keyframes_for_parallel_decoders() -> None:
    needed = list(range(0, 18000, 15))
    p = plan(KEYS, needed, cores=2)
    assert p.kind == "segments" and p.workers == 2
    assert [i for piece in p.pieces for i in piece.needed] == needed
    for piece in p.pieces:
        assert piece.start in KEYS and piece.start <= piece.needed[0]
        assert piece.needed[-1] < piece.start + 60 * 2  # never decodes past its last needed frame's GOP


def test_sparse_requests_seek_to_the_keyframe_before_each() -> None:
    needed = [17710, 17770, 17830, 17890, 17950]
    p = plan(KEYS, needed, cores=1)
    assert p.kind == "seek"
    assert [(x.start, x.needed) for x in p.pieces] == [(k, (n,)) for k, n in
                                                       zip([17700, 17760, 17820, 17880, 17940], needed)]
    assert p.cost == sum(n - k + 1 for k, n in zip([17700, 17760, 17820, 17880, 17940], needed)) \
        + 4 * SEEK_COST_FRAMES


def test_sparse_seek_pieces_go_to_parallel_decoders_when_there_are_cores() -> None:
    needed = [17740, 17800, 17860, 17890, 17950]
    p = plan(KEYS, needed, cores=2)
    # Frame threading cannot help a decoder that restarts at every seek; two decoders can.
    assert p.kind == "segments" and p.workers == 2
    assert p.pieces == plan(KEYS, needed, cores=1).pieces
    # A handful of short seeks does not pay for a second decoder.
    few = plan(KEYS, [17710, 17770, 17830, 17890, 17950], cores=2)
    assert few.kind == "seek" and few.workers == 1
    tiny = plan(KEYS, [17700, 17760], cores=2)
    assert tiny.kind == "seek" and tiny.workers == 1
    # One long span is left to frame threading unless it is worth cutting.
    assert plan(KEYS, [0, 40], cores=2).kind == "sequential"


def test_a_second_decoder_for_seeks_is_priced_by_the_frame_size() -> None:
    # Five seeks, 11 frames each: worth a second container open at 720p and 1080p, not at
    # 480p, where decoding them all takes about as long as opening another container.
    needed = [17710, 17770, 17830, 17890, 17950]
    for width, height, kind in [(1920, 1080, "segments"), (1280, 720, "segments"), (854, 480, "seek")]:
        p = plan(KEYS, needed, cores=2, frame_pixels=width * height)
        assert p.kind == kind, (width, height)
        assert p.pieces == plan(KEYS, needed, cores=1).pieces
    assert parallel_seek_work(1280 * 720) == SECOND_DECODER_MARGIN * 8
    assert parallel_seek_work(3840 * 2160) == MIN_PARALLEL_SEEK_WORK  # a floor, however big the frames
    assert parallel_seek_work(0) == DEFAULT_PARALLEL_SEEK_WORK
    # Two seeks of a frame each are never worth it.
    assert plan(KEYS, [17700, 17760], cores=2, frame_pixels=3840 * 2160).workers == 1
    assert plan(KEYS, needed, cores=1, frame_pixels=1920 * 1080).workers == 1


def test_a_gap_cheaper_than_a_seek_is_decoded_through() -> None:
    p = plan(KEYS, [58, 61], cores=1)  # frame 58 (GOP 0) and 61 (GOP 1): 1 frame apart
    assert p.pieces == (Piece(0, (58, 61)),)
    p = plan(KEYS, [1, 61], cores=1)
    assert p.pieces == (Piece(0, (1,)), Piece(60, (61,)))


def test_split_piece_keeps_every_needed_frame_in_order() -> None:
    piece = Piece(0, tuple(range(0, 600, 7)))
    parts = split_piece(piece, KEYS, 100)
    assert [i for part in parts for i in part.needed] == list(piece.needed)
    assert all(part.start in KEYS for part in parts)
    assert all(part.cost >= 100 for part in parts[:-1])


def probe_times(times: list[Fraction]) -> list[Fraction]:
    wanted = set(times)
    for a, b in itertools.pairwise(times):
        wanted.update({(a + b) / 2, (a + b) / 2 + Fraction(1, 10_000)})
    return sorted(wanted)


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_fixture_gives_identical_frames_whichever_way_it_is_decoded(name: str) -> None:
    times = [Fraction(t) for t in MANIFEST[name]["frame_times"]]
    requests = probe_times(times)
    reference = {w: (f.index, f.media_time, f.image.tobytes()) for w, f in
                 decode_sequential(VIDEOS / name, requests)}
    subsets = [requests, requests[::5], requests[-3:], requests[len(requests) // 2::9]]
    for mode in ("sequential", "seek", "segments", "auto"):
        for subset in subsets:
            got = list(decode_at(VIDEOS / name, subset, mode=mode, workers=2))
            assert [w for w, _ in got] == subset, mode
            for want, frame in got:
                assert (frame.index, frame.media_time, frame.image.tobytes()) == reference[want], \
                    f"{name} {mode} @ {want}"
                frame.image.close()
    # And the pixels are the frame the index says (upright, unmirrored).
    for want, frame in decode_at(VIDEOS / name, requests[::4], mode="segments", workers=2):
        assert read_frame_index(frame.image) == frame.index, f"{name} @ {want}"
        frame.image.close()


def test_sparse_seeks_on_two_decoders_deliver_the_sequential_frames() -> None:
    from glasskit_eval.video.frametable import frame_table

    video = VIDEOS / "bframes_h264.mp4"  # 25 fps, a keyframe every 10 frames
    wanted = [Fraction(i, 25) for i in (7, 27, 47)]
    table = frame_table(video)
    assert plan(table.keyframes, [7, 27, 47], mode="segments", cores=2).kind == "segments"
    got = [(w, f.index, f.image.tobytes()) for w, f in decode_at(video, wanted, mode="segments", workers=2)]
    assert got == [(w, f.index, f.image.tobytes()) for w, f in decode_sequential(video, wanted)]
    assert [index for _w, index, _image in got] == [7, 27, 47]


def test_only_needed_frames_are_converted_and_nonref_skipping_is_on_for_h264(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[int] = []
    original = segments.to_display_image

    def counting(frame: object, table: object) -> object:
        decoded.append(1)
        return original(frame, table)  # type: ignore[arg-type]

    monkeypatch.setattr(segments, "to_display_image", counting)
    skipped = segments.PieceDecoder.__init__
    seen: list[bool] = []

    def init(self: segments.PieceDecoder, *args: object, **kwargs: object) -> None:
        skipped(self, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(self.skip_nonref)

    monkeypatch.setattr(segments.PieceDecoder, "__init__", init)
    frames = list(decode_at(VIDEOS / "bframes_h264.mp4", [Fraction(9, 25)], mode="seek"))
    assert seen == [True] and len(decoded) == 1
    assert read_frame_index(frames[0][1].image) == 9
    frames[0][1].image.close()


def test_closing_early_stops_the_parallel_decoders() -> None:
    times = [Fraction(i, 25) for i in range(50)]
    gen = decode_at(VIDEOS / "bframes_h264.mp4", times, mode="segments", workers=2)
    want, frame = next(gen)
    frame.image.close()
    gen.close()
    assert want == 0


def test_a_sparse_run_opens_the_video_once_and_seeks_straight_to_each_keyframe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from glasskit_eval.video import frametable

    video = tmp_path / "sparse.mp4"
    shutil.copy(VIDEOS / "bframes_h264.mp4", video)  # 25 fps, a keyframe every 10 frames
    opened: list[str] = []
    real_open = frametable.open_container

    def counting_open(path: Path) -> object:
        opened.append(str(path))
        return real_open(path)

    monkeypatch.setattr(frametable, "open_container", counting_open)
    monkeypatch.setattr(segments, "open_container", counting_open)
    packets: list[int] = []
    real_packets = segments.PieceDecoder._packets

    def counting_packets(self: segments.PieceDecoder, piece: Piece) -> object:
        positioned = real_packets(self, piece)
        assert self._stream.codec_context.thread_type.name == "SLICE"  # no frame threads to start

        def counted() -> object:
            for packet in positioned:
                packets.append(piece.start)
                yield packet

        return counted()

    monkeypatch.setattr(segments.PieceDecoder, "_packets", counting_packets)
    wanted = [Fraction(i, 25) for i in (2, 23, 45)]
    got = [(f.index, read_frame_index(f.image)) for _w, f in decode_at(video, wanted, workers=2)]
    assert got == [(2, 2), (23, 23), (45, 45)]
    assert opened == [str(video)]  # the table's container is the decoder's
    # Each seek lands on the keyframe before its frame, not a GOP earlier: a piece reads at
    # most the packets of its own GOP (B-frames need a few packets past the frame).
    assert sorted(set(packets)) == [0, 20, 40]
    assert all(packets.count(start) <= 10 for start in (0, 20, 40))
