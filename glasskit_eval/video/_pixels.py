"""Decoded frames to RGB Pillow images, with a single copy.

PyAV's ``VideoFrame.to_image`` converts to RGB, copies the rows into a bytearray,
that into ``bytes``, and that into the image: at 720p the copies cost ten times the
conversion. Pillow's raw decoder reads the converted plane in place (it takes the
row stride), so the same pixels arrive with one copy.

``VideoFrame.reformat`` makes a new swscale context for every frame, and one with as
many threads as the machine has cores: per frame, threads started and frame-sized
scratch buffers allocated and freed, which fragments the heap (the run's peak memory
grows with the number of frames, not with the frames held). Each converting thread
keeps one single-threaded context instead: decoding already runs one thread per core.

The image is allocated before the converted plane, not after: the plane is freed at once,
so it leaves the top of the heap free for the next one, instead of a hole below the image
that the next frame's image does not fit and later allocations split (measured: a quarter
of a 1080p run's peak memory was such holes).
"""

from __future__ import annotations

import errno
import threading
from typing import Any

# Loaded with the frame engine, before any decoder: a large frame's decoder buffers can leave
# too little address space to map Pillow's library later (an ImportError, not a memory error).
from PIL import Image

from ..errors import VideoError


def out_of_memory(exc: BaseException) -> bool:
    """Whether a decode failed for want of memory: Python's MemoryError, FFmpeg's ENOMEM, or its
    EAGAIN (a decoder's threads could not be started: their stacks did not fit either)."""
    return isinstance(exc, MemoryError) or getattr(exc, "errno", None) in (errno.ENOMEM, errno.EAGAIN)


def frame_too_large(path: object, width: int, height: int) -> VideoError:
    """The error for a frame that does not fit in memory (decoded, or as an RGB image)."""
    size = f"a {width}x{height} frame" if width and height else "a frame"
    need = f" (about {width * height * 4 / (1 << 20):,.0f} MiB as an RGB image)" if width and height else ""
    return VideoError(f"not enough memory to decode {size} of {path}{need}; free memory or raise the "
                      "process's memory limit (ulimit -v), or re-encode the video at a lower resolution")

_local = threading.local()


def _reformatter() -> Any:
    reformatter = getattr(_local, "reformatter", None)
    if reformatter is None:
        from av.video.reformatter import VideoReformatter

        reformatter = _local.reformatter = VideoReformatter()
    return reformatter


def rgb_image(frame: Any) -> Image.Image:
    """The frame as an RGB image, pixel for pixel what ``frame.to_image()`` gives."""
    image = Image.new("RGB", (frame.width, frame.height), None)  # None: not filled, written below
    plane = _reformatter().reformat(frame, format="rgb24", threads=1).planes[0]
    if plane.line_size < 0:  # a bottom-up buffer: PyAV knows how to walk it
        image.close()
        converted: Image.Image = frame.to_image()
        return converted
    image.frombytes(plane, "raw", ("RGB", plane.line_size, 1))
    return image
