"""The PNG encoder: lossless across strip boundaries, valid chunks, streamed in pieces."""

from __future__ import annotations

import io
import random
import struct
import zlib

import pytest
from PIL import Image

from glasskit_eval.video.png import PNG_SIGNATURE, STRIP_ROWS, encode_png, png_pieces

pytestmark = pytest.mark.frames


def noise(width: int, height: int, seed: int = 0) -> Image.Image:
    return Image.frombytes("RGB", (width, height), random.Random(seed).randbytes(width * height * 3))


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of every chunk, with each chunk's CRC checked."""
    assert png.startswith(PNG_SIGNATURE)
    found, at = [], len(PNG_SIGNATURE)
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", png[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + data), kind
        found.append((kind, data))
        at += 12 + length
    assert at == len(png)
    return found


@pytest.mark.parametrize("height", [1, 2, STRIP_ROWS - 1, STRIP_ROWS, STRIP_ROWS + 1, 2 * STRIP_ROWS + 7])
def test_rows_on_both_sides_of_every_strip_boundary_survive(height: int) -> None:
    image = noise(37, height, seed=height)
    png = encode_png(image)
    with Image.open(io.BytesIO(png)) as decoded:
        assert decoded.mode == "RGB" and decoded.size == (37, height)
        assert decoded.tobytes() == image.tobytes()


def test_the_filtered_rows_are_the_up_filter_of_the_frame() -> None:
    # Decoded by hand: every scanline is filter type 2 and adds the byte above, mod 256.
    image = noise(5, STRIP_ROWS + 3, seed=7)
    found = chunks(encode_png(image, 6))
    assert [kind for kind, _ in found[:1]] == [b"IHDR"] and found[-1] == (b"IEND", b"")
    assert found[0][1] == struct.pack(">IIBBBBB", 5, STRIP_ROWS + 3, 8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(data for kind, data in found if kind == b"IDAT"))
    row_bytes, previous, rows = 15, bytes(15), []
    for y in range(STRIP_ROWS + 3):
        line = raw[y * (row_bytes + 1) : (y + 1) * (row_bytes + 1)]
        assert line[0] == 2
        previous = bytes((a + b) % 256 for a, b in zip(line[1:], previous))
        rows.append(previous)
    assert b"".join(rows) == image.tobytes()


def test_pieces_join_into_the_file_and_hold_no_whole_copy_of_it() -> None:
    image = noise(320, 4 * STRIP_ROWS, seed=3)
    pieces = list(png_pieces(image, 1))
    assert b"".join(pieces) == encode_png(image, 1)
    # Compressed output comes out strip by strip (several IDAT chunks, as libpng writes).
    assert len(pieces) > 3 and max(map(len, pieces)) < len(b"".join(pieces)) / 2


def test_other_modes_are_left_to_pillow_and_keep_their_mode() -> None:
    grey = Image.frombytes("L", (9, 4), bytes(range(36)))
    with Image.open(io.BytesIO(encode_png(grey))) as decoded:
        assert decoded.mode == "L" and decoded.tobytes() == grey.tobytes()
