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


def grey_ramp(path: Path, frames: int, fps: int, gop: int, step: int) -> Path:
    """A small 64x48 H.264 video, a keyframe every ``gop`` frames, frame i a flat grey of ``i * step``
    (mod 256): cheap to encode, and each frame told apart by its brightness."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": str(gop), "keyint_min": str(gop), "sc_threshold": "0"}
        for i in range(frames):
            frame = av.VideoFrame(64, 48, "yuv420p")
            frame.planes[0].update(bytes([(i * step) & 255]) * (64 * 48))
            frame.planes[1].update(bytes([128]) * (32 * 24))
            frame.planes[2].update(bytes([128]) * (32 * 24))
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
