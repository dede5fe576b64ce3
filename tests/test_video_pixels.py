"""The one-copy RGB conversion gives exactly PyAV's ``to_image`` pixels."""

from __future__ import annotations

import av
import pytest
from fixturevideos import MANIFEST, VIDEOS, decode_all

from glasskit_eval.video._pixels import rgb_image

pytestmark = pytest.mark.frames


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_fixture_frame_converts_to_the_same_pixels(name: str) -> None:
    count = 0
    for frame in decode_all(VIDEOS / name):
        ours, theirs = rgb_image(frame), frame.to_image()
        assert (ours.mode, ours.size) == ("RGB", (frame.width, frame.height))
        assert ours.tobytes() == theirs.tobytes(), f"{name} frame {count}"
        count += 1
    assert count == MANIFEST[name]["frame_count"]


@pytest.mark.parametrize("fmt", ["yuv420p", "yuvj420p", "yuv444p", "nv12", "gray", "rgb24", "rgba", "bgr24"])
@pytest.mark.parametrize("size", [(101, 33), (1, 1), (64, 48), (333, 7)])
def test_odd_sizes_and_pixel_formats_match_to_image(fmt: str, size: tuple[int, int]) -> None:
    width, height = size
    if fmt in ("yuv420p", "yuvj420p", "nv12") and (width % 2 or height % 2):
        width, height = width + width % 2, height + height % 2
    frame = av.VideoFrame(width, height, fmt)
    for index, plane in enumerate(frame.planes):
        # Distinct bytes in every plane, padding included, so a wrong stride shows.
        plane.update(bytes((i * 7 + index * 31) & 255 for i in range(plane.buffer_size)))
    ours = rgb_image(frame)
    assert ours.size == (width, height)
    assert ours.tobytes() == frame.to_image().tobytes()


def test_the_image_owns_its_pixels() -> None:
    frame = av.VideoFrame(64, 48, "rgb24")
    frame.planes[0].update(bytes(frame.planes[0].buffer_size))
    image = rgb_image(frame)
    frame.planes[0].update(bytes([255]) * frame.planes[0].buffer_size)
    assert image.getpixel((0, 0)) == (0, 0, 0)
    image.putpixel((0, 0), (1, 2, 3))  # writable, like to_image's result
    assert image.getpixel((0, 0)) == (1, 2, 3)
