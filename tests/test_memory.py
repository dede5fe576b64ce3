"""Frames held at once stay O(concurrency), whatever the video length or number of targets."""

from __future__ import annotations

import textwrap
import weakref
from pathlib import Path
from typing import Any

import av
import pytest
from evalkit import run_cli

from glasskit_eval.evaluation import clipframes
from glasskit_eval.video import _segments as segments


def make_video(path: Path, frames: int) -> None:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": "10", "keyint_min": "10", "sc_threshold": "0"}
        for i in range(frames):
            frame = av.VideoFrame(64, 48, "yuv420p")
            frame.planes[0].update(bytes([(i * 3) & 255]) * (64 * 48))
            frame.planes[1].update(bytes([128]) * (32 * 24))
            frame.planes[2].update(bytes([128]) * (32 * 24))
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


ADAPTER = """
import asyncio

def create_evaluator(config):
    return Slow()

class Slow:
    async def evaluate(self, sample, target):
        for _ in range(3):
            await asyncio.sleep(0)
        return {"ok": True}
"""


def peak_live_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frames: int, targets: int,
                     concurrency: int, clip: str | None = None) -> int:
    live: list[weakref.ref[Any]] = []
    peak = 0
    original = segments.to_display_image

    def counting(frame: Any, table: Any) -> Any:
        nonlocal peak
        image = original(frame, table)
        live[:] = [r for r in live if r() is not None and not _closed(r())]
        live.append(weakref.ref(image))
        peak = max(peak, len(live))
        return image

    monkeypatch.setattr(segments, "to_display_image", counting)
    root = tmp_path / f"eval-{frames}-{targets}"
    (root / "cases").mkdir(parents=True)
    make_video(root / "cases" / "v.mp4", frames)
    start = "0.4" if clip is not None else "0"
    clips = f"      clip: {clip}\n" if clip is not None else ""
    body = "".join(f"  t{i}:\n    samples:\n    - range: [{start}, {frames / 25}]\n      field: ok\n"
                   f"      expect: true\n{clips}" for i in range(targets))
    (root / "cases" / "c.yaml").write_text(f"video: v.mp4\nsampling:\n  every_s: 0.08\ntargets:\n{body}")
    (root / "adapter.py").write_text(textwrap.dedent(ADAPTER))
    code, out, err = run_cli("run", "--eval-dir", root, "--concurrency", str(concurrency))
    assert code == 0, out + err
    return peak


def _closed(image: Any) -> bool:
    try:
        image.im  # noqa: B018  (a closed PIL image raises here)
    except ValueError:
        return True
    return False


def test_peak_frames_do_not_grow_with_video_length_or_targets(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    short = peak_live_frames(tmp_path, monkeypatch, 200, 1, 2)
    long = peak_live_frames(tmp_path, monkeypatch, 800, 3, 2)
    # Worker queues + the run's frame queue + calls in flight + one being handed over.
    bound = 4 * segments.QUEUE_DEPTH + 2 + 2 + 2
    assert 1 <= short <= bound
    assert long <= bound


def test_peak_frames_of_sliding_clips_follow_the_clips_in_flight_not_the_video(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clip = "{before_s: 0.4, every_s: 0.08}"  # 6 frames, sharing 5 with the next clip
    short = peak_live_frames(tmp_path, monkeypatch, 200, 1, 2, clip)
    long = peak_live_frames(tmp_path, monkeypatch, 800, 1, 2, clip)
    # Worker queues, then per clip in flight, queued or being handed over at most its own new
    # frame, plus the one clip's worth kept for the next clips.
    bound = 4 * segments.QUEUE_DEPTH + 6 + (2 + 2 + 2)
    assert 6 <= short <= bound
    assert long <= bound
    # Later targets' frames wait in the store: past its memory budget (none here), on disk.
    monkeypatch.setattr(clipframes, "MEMORY_BUDGET", 0)
    assert peak_live_frames(tmp_path, monkeypatch, 800, 3, 2, clip) <= bound
