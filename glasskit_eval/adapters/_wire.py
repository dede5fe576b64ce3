"""What a command adapter is sent for a sample: its fields and its frame as a base64 PNG (pure)."""

from __future__ import annotations

import binascii
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from ..video.png import png_pieces
from ._protocol import encode_params
from .base import Sample, add_usage

#: zlib level for the PNG frames sent to command adapters. PNG is lossless at every
#: level; on 1080p video frames level 1 (run-length matching, see ``video.png``) takes
#: under a quarter of the default level 6's time for ~10% more bytes
#: (numbers in benchmarks/bench_command_adapter.py).
PNG_COMPRESS_LEVEL: Final = 1


def encode_sample(sample: Sample, level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """The protocol's sample object, as JSON bytes, with the frame as base64 PNG."""
    return b"".join(sample_parts(sample, level))


def sample_parts(sample: Sample, level: int = PNG_COMPRESS_LEVEL) -> list[bytes]:
    """:func:`encode_sample` in pieces, for a request line that is joined only once.

    Runs on a worker thread: compression releases the GIL, so frames encode in
    parallel with each other and with decoding. The PNG is base64-encoded piece by
    piece as it is compressed, so neither the PNG nor a second copy of its text is held.
    """
    image = sample.image
    width, height = image.size
    fields = dict(sample.wire_fields())
    fields["image"] = {"mimeType": "image/png", "width": width, "height": height}
    head = encode_params(fields)
    # "image" is the last key (json keeps insertion order), so the object ends in "}}".
    # The base64 text needs no JSON escaping, so it is spliced in as bytes instead of
    # making json.dumps scan and copy megabytes of it.
    return [head[:-2], b',"dataBase64":"', *base64_pieces(png_pieces(image, level)), b'"}}']


def base64_pieces(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """Standard base64 of the pieces' concatenation, as pieces that join into it."""
    carry = b""
    for piece in pieces:
        data = carry + piece if carry else piece
        cut = len(data) - len(data) % 3  # only whole 3-byte groups encode independently
        carry = data[cut:]
        if cut:
            yield binascii.b2a_base64(memoryview(data)[:cut], newline=False)
    if carry:
        yield binascii.b2a_base64(carry, newline=False)


def share_usage(samples: Sequence[Sample], usage: Any) -> None:
    """A batch's usage: a list gives each sample its own, one object is divided evenly."""
    if usage is None or not samples:
        return
    if isinstance(usage, list):
        for sample, item in zip(samples, usage):
            if item is not None:
                add_usage(sample.usage, item)
        return
    for sample in samples:
        add_usage(sample.usage, {k: v / len(samples) for k, v in usage.items()})
