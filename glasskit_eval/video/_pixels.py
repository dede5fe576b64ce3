"""Decoded frames to RGB Pillow images, with a single copy.

PyAV's ``VideoFrame.to_image`` converts to RGB, copies the rows into a bytearray,
that into ``bytes``, and that into the image: at 720p the copies cost ten times the
conversion. Pillow's raw decoder reads the converted plane in place (it takes the
row stride), so the same pixels arrive with one copy.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from ..errors import VideoError

if TYPE_CHECKING:
    from PIL import Image


def load_pillow() -> None:
    """Import Pillow before a decoder opens: a large frame's decoder buffers can leave too little
    address space to map Pillow's library later, an ImportError where a memory error is due."""
    from PIL import Image  # noqa: F401


def out_of_memory(exc: BaseException) -> bool:
    """Whether a decode failed for want of memory: Python's MemoryError or FFmpeg's ENOMEM."""
    return isinstance(exc, MemoryError) or getattr(exc, "errno", None) == errno.ENOMEM


def frame_too_large(path: object, width: int, height: int) -> VideoError:
    """The error for a frame that does not fit in memory (decoded, or as an RGB image)."""
    size = f"a {width}x{height} frame" if width and height else "a frame"
    need = f" (about {width * height * 4 / (1 << 20):,.0f} MiB as an RGB image)" if width and height else ""
    return VideoError(f"not enough memory to decode {size} of {path}{need}; free memory or raise the "
                      "process's memory limit (ulimit -v), or re-encode the video at a lower resolution")


def rgb_image(frame: Any) -> Image.Image:
    """The frame as an RGB image, pixel for pixel what ``frame.to_image()`` gives."""
    from PIL import Image

    plane = frame.reformat(format="rgb24").planes[0]
    if plane.line_size < 0:  # a bottom-up buffer: PyAV knows how to walk it
        image: Image.Image = frame.to_image()
        return image
    return Image.frombuffer("RGB", (plane.width, plane.height), plane, "raw", "RGB", plane.line_size, 1)
