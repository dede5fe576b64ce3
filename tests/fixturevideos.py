"""The fixture videos (``fixtures/videos``), their manifest, and a plain PyAV reference decode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av

VIDEOS = Path(__file__).resolve().parent.parent / "fixtures" / "videos"
MANIFEST: dict[str, Any] = json.loads((VIDEOS / "manifest.json").read_text())


def decode_all(path: Path) -> Iterator[Any]:
    """Every decodable frame, decoded packet by packet on one thread.

    PyAV's ``container.decode()`` stops at the first undecodable packet (a truncated file),
    so the reference skips such packets, as the fixture generator does.
    """
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        for packet in container.demux(stream):
            try:
                frames = ctx.decode(packet)
            except av.error.InvalidDataError:
                continue
            yield from frames
