"""Tests for the frame code and ground-truth checks of the fixture videos.

The fixture checks decode every video in ``fixtures/videos/manifest.json`` with plain
PyAV (no glasskit_eval code) so that a failure here means the fixtures or the manifest are
wrong, not the decoder under test.
"""

from __future__ import annotations

import io
import itertools
import json
import struct
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import pytest
from av.video.frame import PictureType
from fixturevideos import decode_all
from framecode import (
    MAX_INDEX,
    TRANSPOSE_NAMES,
    draw_frame,
    find_orientation_fix,
    read_frame_index,
)
from PIL import Image

VIDEOS = Path(__file__).resolve().parent.parent / "fixtures" / "videos"
MANIFEST: dict[str, dict[str, Any]] = json.loads((VIDEOS / "manifest.json").read_text())

INVERSE = {
    "FLIP_LEFT_RIGHT": "FLIP_LEFT_RIGHT",
    "FLIP_TOP_BOTTOM": "FLIP_TOP_BOTTOM",
    "ROTATE_90": "ROTATE_270",
    "ROTATE_180": "ROTATE_180",
    "ROTATE_270": "ROTATE_90",
    "TRANSPOSE": "TRANSPOSE",
    "TRANSVERSE": "TRANSVERSE",
}


def apply(image: Image.Image, ops: list[str]) -> Image.Image:
    for op in ops:
        image = image.transpose(Image.Transpose[op])
    return image


# --- the frame code itself --------------------------------------------------------------


@pytest.mark.parametrize("size", [(128, 72), (72, 128), (96, 64), (33, 17), (640, 360)])
def test_round_trip(size: tuple[int, int]) -> None:
    indices = [*range(70), *range(70, MAX_INDEX, 997), MAX_INDEX - 1, MAX_INDEX]
    for index in indices:
        assert read_frame_index(draw_frame(index, *size)) == index


def test_out_of_range_index() -> None:
    with pytest.raises(ValueError):
        draw_frame(MAX_INDEX + 1, 128, 72)
    with pytest.raises(ValueError):
        draw_frame(-1, 128, 72)


@pytest.mark.parametrize("op", TRANSPOSE_NAMES)
@pytest.mark.parametrize("size", [(128, 72), (96, 96)])
def test_wrong_orientation_is_rejected(op: str, size: tuple[int, int]) -> None:
    for index in (0, 1, 5, 1234, MAX_INDEX):
        upright = draw_frame(index, *size)
        turned = upright.transpose(Image.Transpose[op])
        with pytest.raises(ValueError, match="not in display orientation"):
            read_frame_index(turned)
        assert find_orientation_fix(turned) == INVERSE[op]
    assert find_orientation_fix(draw_frame(7, *size)) == ""


def test_not_a_frame_code_is_rejected() -> None:
    for colour in ((0, 0, 0), (255, 255, 255), (128, 128, 128)):
        with pytest.raises(ValueError):
            read_frame_index(Image.new("RGB", (128, 72), colour))
    assert find_orientation_fix(Image.new("RGB", (128, 72))) is None


def test_survives_lossy_and_range_changes() -> None:
    for index in (0, 341, 5461, MAX_INDEX):
        image = draw_frame(index, 128, 72)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=30, subsampling=2)  # 4:2:0
        assert read_frame_index(Image.open(buffer)) == index
        limited = image.point(lambda v: 16 + v * 219 // 255)  # limited-range levels
        assert read_frame_index(limited) == index
        with pytest.raises(ValueError):  # the orientation markers need colour
            read_frame_index(image.convert("L"))


# --- manifest sanity ----------------------------------------------------------------------


def test_manifest_covers_required_cases() -> None:
    assert {entry["container"] for entry in MANIFEST.values()} >= {
        "mp4",
        "mov",
        "m4v",
        "mkv",
        "webm",
    }
    assert {entry["codec"] for entry in MANIFEST.values()} >= {"h264", "vp9", "mpeg4"}
    assert any(e["has_b_frames"] for e in MANIFEST.values())
    assert any(Fraction(e["first_time"]) > 0 for e in MANIFEST.values())
    assert {e["rotation"] for e in MANIFEST.values()} >= {0, 90, -90, -180}
    assert any(e["mirrored"] for e in MANIFEST.values())
    total = 0
    for name in MANIFEST:
        size = (VIDEOS / name).stat().st_size
        assert size < 200_000, name
        total += size
    assert total < 2_000_000


def test_halfway_fixture_has_exact_tie() -> None:
    times = [Fraction(t) for t in MANIFEST["halfway_30fps.mp4"]["frame_times"]]
    assert times[1] == Fraction(1, 30) and times[2] == Fraction(2, 30)
    assert (times[1] + times[2]) / 2 == Fraction(1, 20)
    assert times[-1] >= 1


def test_vfr_fixture_is_irregular() -> None:
    times = [Fraction(t) for t in MANIFEST["vfr_h264.mp4"]["frame_times"]]
    assert len({b - a for a, b in itertools.pairwise(times)}) >= 4


def _rule_transform(rotation: int, mirrored: bool) -> list[str]:
    """Generic rule for display matrix -> PIL ops (what a decoder should implement).

    If the matrix has a negative determinant, flip top-bottom first; then rotate the frame
    counter-clockwise by the rotation FFmpeg reports (``VideoFrame.rotation``).
    """
    ops = ["FLIP_TOP_BOTTOM"] if mirrored else []
    ccw = {0: [], 90: ["ROTATE_90"], 180: ["ROTATE_180"], 270: ["ROTATE_270"]}[rotation % 360]
    return ops + ccw


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_manifest_rotation_fields_are_consistent(name: str) -> None:
    entry = MANIFEST[name]
    matrix = entry["display_matrix"]
    if matrix is None:
        assert entry["rotation"] == 0 and not entry["mirrored"] and entry["display_transform"] == []
        return
    a, b, _, c, d, *_ = matrix
    assert entry["mirrored"] == (a * d - b * c < 0)
    # Both op lists must produce the same pixels from the same stored frame.
    stored = apply(
        draw_frame(3, 128, 72), [INVERSE[op] for op in reversed(entry["display_transform"])]
    )
    assert stored.size == (entry["width"], entry["height"])
    by_manifest = apply(stored, entry["display_transform"])
    by_rule = apply(stored, _rule_transform(entry["rotation"], entry["mirrored"]))
    assert by_manifest.size == (entry["display_width"], entry["display_height"])
    assert by_manifest.tobytes() == by_rule.tobytes()
    assert read_frame_index(by_manifest) == 3


# --- ground truth: decode every fixture with plain PyAV ----------------------------------------


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_fixture_video_matches_manifest(name: str) -> None:
    entry = MANIFEST[name]
    time_base = Fraction(entry["time_base"])
    pts: list[int] = []
    indices: list[int] = []
    with av.open(str(VIDEOS / name)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == entry["codec"]
        assert Fraction(stream.time_base) == time_base
        # A MediaRecorder-style file states no frame rate at all.
        rate = entry["average_rate"]
        assert (Fraction(stream.average_rate) if stream.average_rate else None) == (rate and Fraction(rate))
        pict_types = []
        for frame in decode_all(VIDEOS / name):
            assert (frame.width, frame.height) == (entry["width"], entry["height"])
            pts.append(frame.pts)
            pict_types.append(int(frame.pict_type))
            upright = apply(frame.to_image(), entry["display_transform"])
            assert upright.size == (entry["display_width"], entry["display_height"])
            indices.append(read_frame_index(upright))
            if hasattr(frame, "rotation"):  # not in older PyAV
                assert round(frame.rotation) == entry["rotation"]
            side = frame.side_data.get("DISPLAYMATRIX")
            matrix = list(struct.unpack("=9i", bytes(side))) if side is not None else None
            assert matrix == entry["display_matrix"]

    assert indices == entry["frame_codes"] and len(indices) == entry["frame_count"]
    assert pts == entry["frame_pts"]
    first = Fraction(pts[0]) * time_base
    assert first == Fraction(entry["first_time"])
    assert [(p - pts[0]) * time_base for p in pts] == [Fraction(t) for t in entry["frame_times"]]
    assert pts == sorted(pts) and len(set(pts)) == len(pts)
    b_type = int(PictureType.B)
    assert (b_type in pict_types) == entry["has_b_frames"]
