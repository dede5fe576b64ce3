"""Re-encode a fixture video with other encoder settings (PyAV), for pin and cache tests."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av


def reencode(source: Path, target: Path, *, rate: int | None = None, crf: int = 30,
             start_frame: int = 0) -> None:
    """Decode every frame of ``source`` and encode it again with libx264.

    ``rate`` (default: the source's) changes the frame timing, so sample times resolve to
    other frames; ``start_frame`` drops leading frames; ``crf`` changes the pixels slightly.
    """
    tmp = target.with_name(f".{target.name}.partial{target.suffix}")
    with av.open(str(source)) as src:
        stream = src.streams.video[0]
        fps = rate or round(float(stream.average_rate or 10))
        frames = [f.to_image() for f in src.decode(stream)][start_frame:]
    with av.open(str(tmp), "w") as out:
        video = out.add_stream("libx264", rate=fps)
        video.width, video.height = frames[0].size
        video.pix_fmt = "yuv420p"
        video.options = {"crf": str(crf), "preset": "veryfast", "bf": "0"}
        video.time_base = Fraction(1, fps)
        for index, image in enumerate(frames):
            frame = av.VideoFrame.from_image(image)
            frame.pts = index
            frame.time_base = Fraction(1, fps)
            for packet in video.encode(frame):
                out.mux(packet)
        for packet in video.encode():
            out.mux(packet)
    tmp.replace(target)
