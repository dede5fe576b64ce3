"""Fast lossless PNG encoding of RGB frames, for sending frames to command adapters.

Pillow's PNG encoder chooses a filter for every row by trying all five (the libpng
heuristic). On 1080p video frames that choice alone costs more than compressing at
zlib level 1, so Pillow at level 1 takes ~1.6x as long as this encoder for about the
same size (the measurements are in ``benchmarks/bench_command_adapter.py``).

Here every row uses the "Up" filter (each byte minus the byte above it), which
suits video frames well, and the filtering is done with Pillow's C image operations
on a one-byte-per-sample view of the frame. The slow part, ``zlib.compress``, runs
without the GIL, so frames encode in parallel on the thread pool. Any PNG decoder
reverses the filter, so the pixels that arrive are exactly the frame's.
"""

from __future__ import annotations

import io
import struct
import zlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["PNG_SIGNATURE", "encode_png"]

PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
_FILTER_UP: Final = 2
# IHDR: bit depth 8, colour type 2 (truecolour RGB), deflate, adaptive filtering
# (the only filter method), no interlacing.
_RGB8: Final = struct.pack(">BBBBB", 8, 2, 0, 0, 0)


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return b"".join((struct.pack(">I", len(data)), kind, data, struct.pack(">I", crc)))


def encode_png(image: Image.Image, level: int = 1) -> bytes:
    """Encode ``image`` as a lossless PNG at zlib ``level`` (0-9).

    RGB images take the fast path; any other mode is left to Pillow, which keeps
    the mode as it is.
    """
    width, height = image.size
    if image.mode != "RGB" or width == 0 or height == 0:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=level)
        return buffer.getvalue()
    from PIL import Image, ImageChops

    row_bytes = 3 * width
    # The same bytes seen as a greyscale image, one pixel per byte, so that "the
    # byte above" is the pixel above and Pillow's byte-wise operations apply.
    samples = Image.frombytes("L", (row_bytes, height), image.tobytes())
    above = Image.new("L", (row_bytes, height), 0)
    if height > 1:
        above.paste(samples.crop((0, 0, row_bytes, height - 1)), (0, 1))
    filtered = ImageChops.subtract_modulo(samples, above)
    # Each PNG scanline starts with its filter type byte: a first column of 2s.
    scanlines = Image.new("L", (row_bytes + 1, height), _FILTER_UP)
    scanlines.paste(filtered, (1, 0))
    compressed = zlib.compress(scanlines.tobytes(), level)
    return b"".join(
        (
            PNG_SIGNATURE,
            _chunk(b"IHDR", struct.pack(">II", width, height) + _RGB8),
            _chunk(b"IDAT", compressed),
            _chunk(b"IEND", b""),
        )
    )
