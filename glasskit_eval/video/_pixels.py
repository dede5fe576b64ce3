"""Decoded frames to RGB Pillow images, with a single copy.

PyAV's ``VideoFrame.to_image`` converts to RGB, copies the rows into a bytearray,
that into ``bytes``, and that into the image: at 720p the copies cost ten times the
conversion. Pillow's raw decoder reads the converted plane in place (it takes the
row stride), so the same pixels arrive with one copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PIL import Image


def rgb_image(frame: Any) -> Image.Image:
    """The frame as an RGB image, pixel for pixel what ``frame.to_image()`` gives."""
    from PIL import Image

    plane = frame.reformat(format="rgb24").planes[0]
    if plane.line_size < 0:  # a bottom-up buffer: PyAV knows how to walk it
        image: Image.Image = frame.to_image()
        return image
    return Image.frombuffer("RGB", (plane.width, plane.height), plane, "raw", "RGB", plane.line_size, 1)
