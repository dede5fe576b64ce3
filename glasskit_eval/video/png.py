"""Fast lossless PNG encoding of RGB frames, for sending frames to command adapters.

Pillow's PNG encoder chooses a filter for every row by trying all five (the libpng
heuristic). On 1080p video frames that choice alone costs more than compressing at
zlib level 1, so Pillow at level 1 takes ~1.6x as long as this encoder for about the
same size (the measurements are in ``benchmarks/bench_command_adapter.py``).

Here every row uses the "Up" filter (each byte minus the byte above it), which
suits video frames well, and the filtering is done with Pillow's C image operations
on a one-byte-per-sample view of the frame, a strip of rows at a time. The slow part,
zlib compression, runs without the GIL, so frames encode in parallel on the thread
pool. Any PNG decoder reverses the filter, so the pixels that arrive are exactly the
frame's.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["PNG_SIGNATURE", "encode_png", "png_pieces"]

PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
_FILTER_UP: Final = 2
# IHDR: bit depth 8, colour type 2 (truecolour RGB), deflate, adaptive filtering
# (the only filter method), no interlacing.
_RGB8: Final = struct.pack(">BBBBB", 8, 2, 0, 0, 0)


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(data, zlib.crc32(kind))
    return b"".join((struct.pack(">I", len(data)), kind, data, struct.pack(">I", crc)))


#: Rows filtered and compressed at a time. A whole-frame pass would hold half a dozen
#: frame-sized buffers per encode (megabytes each at 1080p, times the calls in flight);
#: a strip of 64 rows holds a few hundred kilobytes and costs no measurable speed.
STRIP_ROWS: Final = 64


def encode_png(image: Image.Image, level: int = 1) -> bytes:
    """Encode ``image`` as a lossless PNG at zlib ``level`` (0-9).

    RGB images take the fast path; any other mode is left to Pillow, which keeps
    the mode as it is.
    """
    return b"".join(png_pieces(image, level))


def png_pieces(image: Image.Image, level: int = 1) -> Iterator[bytes]:
    """:func:`encode_png`'s bytes in pieces of up to a strip's compressed size.

    A caller that transforms the file as it goes (base64 for a command adapter) never
    holds the whole PNG, let alone a second copy of it.
    """
    width, height = image.size
    if image.mode != "RGB" or width == 0 or height == 0:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=level)
        yield buffer.getvalue()
        return
    from PIL import Image, ImageChops

    yield PNG_SIGNATURE + _chunk(b"IHDR", struct.pack(">II", width, height) + _RGB8)
    row_bytes = 3 * width
    # At level 1, the fastest, zlib's run-length strategy: it was made for filtered image
    # rows and, on video frames, takes half to three quarters of level 1's time for sizes
    # within 10% either way (benchmarks/bench_command_adapter.py).
    strategy = zlib.Z_RLE if level == 1 else zlib.Z_DEFAULT_STRATEGY
    compressor = zlib.compressobj(level, zlib.DEFLATED, 15, 8, strategy)
    # One IDAT chunk per compressor output: decoders concatenate consecutive IDATs.
    above = bytes(row_bytes)  # the row above the first one is all zeros
    for top in range(0, height, STRIP_ROWS):
        rows = min(STRIP_ROWS, height - top)
        strip = image.crop((0, top, width, top + rows)).tobytes()
        # The same bytes seen as a greyscale image, one pixel per byte, so that "the
        # byte above" is the pixel above and Pillow's byte-wise operations apply.
        current = Image.frombytes("L", (row_bytes, rows), strip)
        shifted = Image.frombytes("L", (row_bytes, rows), above + strip[: (rows - 1) * row_bytes])
        above = strip[(rows - 1) * row_bytes :]
        # Each PNG scanline starts with its filter type byte: a first column of 2s.
        scanlines = Image.new("L", (row_bytes + 1, rows), _FILTER_UP)
        scanlines.paste(ImageChops.subtract_modulo(current, shifted), (1, 0))
        compressed = compressor.compress(scanlines.tobytes())
        if compressed:
            yield _chunk(b"IDAT", compressed)
    yield _chunk(b"IDAT", compressor.flush()) + _chunk(b"IEND", b"")
