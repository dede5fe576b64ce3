"""Frames held at once stay O(concurrency), whatever the video length or number of targets."""

from __future__ import annotations

import textwrap
import weakref
from pathlib import Path
from typing import Any

import av
import pytest
from evalkit import run_cli
from fixturevideos import grey_ramp

from glasskit_eval.evaluation import _clipframes as clipframes
from glasskit_eval.video import _segments as segments


def make_video(path: Path, frames: int) -> None:
    grey_ramp(path, frames, 25, 10, 3)


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
    from glasskit_eval.evaluation import case

    short = peak_live_frames(tmp_path, monkeypatch, 200, 1, 2)
    long = peak_live_frames(tmp_path, monkeypatch, 800, 3, 2)
    # Calls in flight + the run's frame queue + the one the decoding thread holds + one being
    # converted; decoders queue decoded frames, not images.
    bound = 2 + case.FRAME_QUEUE_DEPTH + 1 + 1
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


# --- the whole run's memory on a real encode -------------------------------------------

#: Runs ``glasskit_eval run`` and prints the process's own peak RSS (not its adapter's). VmHWM,
#: not ``ru_maxrss``: a forked child's ``ru_maxrss`` starts at its parent's RSS (exec keeps the
#: high-water mark of the copied address space), and the parent here has just encoded 1080p.
PEAK_RSS_CHILD = (
    "import re, sys\n"
    "from glasskit_eval.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "with open('/proc/self/status') as status:\n"
    "    print('maxrss_kib=%s' % re.search(r'VmHWM:\\s*(\\d+)', status.read()).group(1))\n"
    "raise SystemExit(code)\n"
)

SLOW_COMMAND_ADAPTER = """
import asyncio

class Slow:
    calls = 0

    async def evaluate(self, sample, target):
        # The first calls are a slow model's: every queue behind them fills up meanwhile.
        Slow.calls += 1
        await asyncio.sleep(3 if Slow.calls <= 4 else 0.01)
        return sample.image.size[0] > 0

def create_evaluator(config):
    return Slow()
"""

#: H.264's largest decoded picture buffer, in frames, plus the one being decoded.
MAX_DPB_FRAMES = 17


def make_bframe_video(path: Path, frames: int, width: int, height: int) -> None:
    """x264 ``veryfast``, CRF 23, High profile, B-frames, a keyframe every 2 s: as cameras ship it.

    Textured and moving, so the frames' PNGs are megabytes, as real footage's are.
    """
    from PIL import Image, ImageChops

    tile = Image.frombytes("L", (64, 64), bytes((x * 37 + y * 91 + (x * y) % 13) & 255
                                                 for y in range(64) for x in range(64)))
    texture = Image.new("L", (width + 64, height + 64))
    for y in range(0, height + 64, 64):
        for x in range(0, width + 64, 64):
            texture.paste(tile, (x, y))
    gradient = Image.linear_gradient("L").resize(texture.size)
    scene = Image.merge("RGB", (ImageChops.add(gradient, texture, 2), texture, ImageChops.invert(gradient)))
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23", "profile": "high", "bf": "3", "g": "60",
                          "keyint_min": "60", "sc_threshold": "0"}
        for i in range(frames):
            x, y = i % 64, (i * 2) % 64
            frame = av.VideoFrame.from_image(scene.crop((x, y, x + width, y + height)))
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def peak_rss_of_run(root: Path, width: int, height: int, frames: int, concurrency: int) -> int:
    """Peak RSS (bytes) of a whole ``run`` process through a command adapter."""
    import os
    import subprocess
    import sys

    root.mkdir()
    (root / "cases").mkdir()
    make_bframe_video(root / "cases" / "v.mp4", frames, width, height)
    (root / "cases" / "c.yaml").write_text(
        f"video: v.mp4\ntargets:\n  seen:\n    samples:\n    - range: [0, {frames / 30}]\n"
        "      every_s: 0.2\n      expect: true\n")
    (root / "adapter.py").write_text(SLOW_COMMAND_ADAPTER)
    command = f"{sys.executable} -m glasskit_eval.protocol_server {root / 'adapter.py'}:create_evaluator"
    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(repo), os.environ.get("PYTHONPATH")))))
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_RSS_CHILD, "run", "--eval-dir", str(root), "--concurrency", str(concurrency),
         "--adapter-command", command],
        capture_output=True, text=True, env=env, cwd=root, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASSED" in proc.stdout, proc.stdout
    return int(proc.stdout.rsplit("maxrss_kib=", 1)[1].split()[0]) * 1024


@pytest.mark.e2e
@pytest.mark.frames
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS from /proc")
def test_command_adapter_run_on_bframe_1080p_stays_within_its_frames_in_flight(tmp_path: Path) -> None:
    """The run's peak RSS over the same run on tiny frames is bounded by what may be in flight.

    Counted in RGB images of the video's size (4 bytes a pixel; decoded 4:2:0 frames are 1.5):
    the calls in flight, the frame queue and the frame the decoding thread holds and converts;
    the command adapter's payloads (base64 PNG, at most an image each); and per parallel decoder
    its queue of decoded frames plus H.264's largest picture buffer. A slow adapter makes every
    queue fill up. When decoders queued converted images, lines were joined and copied whole into
    the pipe's buffer and every frame's conversion left a hole under its image, this run peaked
    about 280 MiB over the tiny run (the bound is about 190 MiB on two cores); now about 150.
    """
    from glasskit_eval.adapters import _process
    from glasskit_eval.evaluation import case
    from glasskit_eval.video.frames import available_cores
    from glasskit_eval.video.strategy import MAX_WORKERS

    concurrency, frames = 4, 120
    baseline = peak_rss_of_run(tmp_path / "tiny", 64, 36, frames, concurrency)
    peak = peak_rss_of_run(tmp_path / "full", 1920, 1080, frames, concurrency)

    image = 1920 * 1080 * 4
    decoded = 1920 * 1080 * 3 // 2
    workers = min(available_cores(), MAX_WORKERS)
    images = concurrency + case.FRAME_QUEUE_DEPTH + 2
    payloads = _process.PAYLOADS_IN_FLIGHT
    decoders = workers * (segments.QUEUE_DEPTH + 1 + MAX_DPB_FRAMES) * decoded
    bound = (images + payloads) * image + decoders
    assert peak - baseline <= bound, (
        f"peak RSS {peak >> 20} MiB is {(peak - baseline) >> 20} MiB over the tiny-frame run's "
        f"{baseline >> 20} MiB; frames in flight allow {bound >> 20} MiB")
