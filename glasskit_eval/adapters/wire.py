"""What a command adapter is sent for a sample: its fields and its frame as a base64 PNG (pure)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Final

from ..video.png import encode_png
from .base import Sample, add_usage
from .protocol import encode_params

#: zlib level for the PNG frames sent to command adapters. PNG is lossless at every
#: level; on 1080p video frames level 1 takes a fifth of the default level 6's time
#: for ~10% more bytes (numbers in benchmarks/bench_command_adapter.py).
PNG_COMPRESS_LEVEL: Final = 1


def encode_sample(sample: Sample, level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """The protocol's sample object, as JSON bytes, with the frame as base64 PNG.

    Runs on a worker thread: compression releases the GIL, so frames encode in
    parallel with each other and with decoding.
    """
    image = sample.image
    width, height = image.size
    png = encode_png(image, level)
    fields = dict(sample.wire_fields())
    fields["image"] = {"mimeType": "image/png", "width": width, "height": height}
    head = encode_params(fields)
    # The base64 text needs no JSON escaping, so it is spliced in as bytes instead of
    # making json.dumps scan and copy megabytes of it.
    if head.endswith(b"}}"):
        return b"".join((head[:-2], b',"dataBase64":"', base64.b64encode(png), b'"}}'))
    fields["image"]["dataBase64"] = base64.b64encode(png).decode("ascii")
    return encode_params(fields)


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
