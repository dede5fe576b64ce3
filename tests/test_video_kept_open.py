"""Decoders kept open between the decodes of one video (``frames.kept_open``): the same exact frames
in any order of short decodes, one container open instead of one per decode, nothing left open after."""

from __future__ import annotations

import itertools
import json
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from framecode import read_frame_index

from glasskit_eval.video import damage, frametable
from glasskit_eval.video._segments import decode_pieces
from glasskit_eval.video.frames import decode_at, kept_open
from glasskit_eval.video.strategy import Piece

pytestmark = pytest.mark.frames

VIDEOS = Path(__file__).resolve().parent.parent / "fixtures" / "videos"
MANIFEST = json.loads((VIDEOS / "manifest.json").read_text())
SEEKABLE = sorted(n for n, e in MANIFEST.items() if e["seekable"] and not e["truncated"])


def expected_position(times: list[Fraction], want: Fraction) -> int:
    """The spec's rule, written independently: nearest, ties to the earlier frame."""
    return min(range(len(times)), key=lambda i: (abs(times[i] - want), i))


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every container the frame engine opens, by path."""
    paths: list[Path] = []
    original = frametable.open_container

    def counted(path: Path) -> Any:
        paths.append(path)
        return original(path)

    monkeypatch.setattr(frametable, "open_container", counted)
    import glasskit_eval.video._segments as segments

    monkeypatch.setattr(segments, "open_container", counted)
    monkeypatch.setattr(damage, "_reported", set())
    return paths


def spares_of(path: Path) -> list[object]:
    """The open containers of ``path`` waiting for a decoder (other tests' videos may have some)."""
    return [key for key in frametable._spares if key[0][0] == str(path)]


def blocks_in_random_order(times: list[Fraction], seed: int) -> list[list[Fraction]]:
    """Runs of three requested times (frame times and halfway ties), shuffled as early stop shuffles blocks."""
    wanted = sorted({*times, *((a + b) / 2 for a, b in itertools.pairwise(times))})
    blocks = [wanted[i:i + 3] for i in range(0, len(wanted), 3)]
    random.Random(seed).shuffle(blocks)
    return blocks


@pytest.mark.parametrize("name", SEEKABLE)
def test_short_decodes_in_random_order_get_the_exact_frames_from_one_kept_decoder(
        name: str, opened: list[Path]) -> None:
    entry = MANIFEST[name]
    path = VIDEOS / name
    times = [Fraction(t) for t in entry["frame_times"]]
    blocks = blocks_in_random_order(times, seed=len(name))
    with kept_open([path]):
        for block in blocks:
            for want, frame in decode_at(path, block, workers=1):
                position = expected_position(times, want)
                assert frame.index == entry["frame_indices"][position], f"{name} @ {want}"
                assert read_frame_index(frame.image) == entry["frame_codes"][position], f"{name} @ {want}"
                frame.image.close()
        assert opened.count(path) <= 2  # the table's (handed on) and at most one frame-threaded decoder
    assert not spares_of(path)


def test_without_the_scope_every_decode_opens_and_closes_its_own(opened: list[Path]) -> None:
    path = VIDEOS / "bframes_h264.mp4"
    times = [Fraction(t) for t in MANIFEST["bframes_h264.mp4"]["frame_times"]]
    blocks = blocks_in_random_order(times, seed=1)[:5]
    for block in blocks:
        for _want, frame in decode_at(path, block, workers=1):
            frame.image.close()
    assert opened.count(path) >= len(blocks)
    assert not spares_of(path)


def test_a_decode_stopped_before_its_end_is_not_parked(tmp_path: Path, opened: list[Path]) -> None:
    """A decoder stopped part way (by its consumer or an error) is closed, not handed to the next decode."""
    source = VIDEOS / "bframes_h264.mp4"
    path = tmp_path / "cut.mp4"
    path.write_bytes(source.read_bytes())
    times = [Fraction(t) for t in MANIFEST["bframes_h264.mp4"]["frame_times"]]
    with kept_open([path]):
        list(decode_at(path, times[:2], workers=1))
        assert spares_of(path)  # the finished decode left its decoder for the next
        generator = decode_at(path, times[:4], workers=1)  # a short decode: it takes the parked decoder
        _want, frame = next(generator)
        frame.image.close()
        generator.close()  # a consumer that stops early: the decoder is closed, not parked
        assert not spares_of(path)
    assert not spares_of(path)


def test_a_parked_decoder_decodes_every_frame_for_its_next_user(opened: list[Path]) -> None:
    """A decoder left skipping non-reference frames by a sparse decode is handed on decoding every frame."""
    path = VIDEOS / "bframes_h264.mp4"
    entry = MANIFEST["bframes_h264.mp4"]
    times = [Fraction(t) for t in entry["frame_times"]]
    table = frametable.frame_table(path)
    every = tuple(range(12))  # short enough for the single-threaded decoder parked above
    with kept_open([path]):
        for _want, frame in decode_at(path, [times[1]], workers=1):
            frame.image.close()
        assert spares_of(path)
        got = [index for index, image in decode_pieces(table, [Piece(0, every)], 1, skip_nonref=False)
               if not image.close()]
    assert got == list(every)
    assert opened.count(path) == 1
