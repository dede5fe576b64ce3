"""Command adapters against in-process adapters on a 2-minute 1080p video.

    python benchmarks/bench_command_adapter.py [--samples 200] [--concurrency 4]

Everything runs on one deterministic video that the script generates with PyAV
(1920x1080, 30 fps, 120 s) encoded the way cameras and encoders ship it: x264
``veryfast``, CRF 23, High profile, a keyframe every 2 s, with B-frames (x264's
default 3, reordered by the decoder). It is cached in the temp directory. It reports:

1. The bridge's cost per frame, on real decoded frames: PNG encoding at every zlib
   level (time and size) with our encoder and, for reference, with Pillow's; base64;
   and the pipe round trip of the request to a child process; plus PNG throughput
   with one and two encoding threads.
2. A raw single-threaded baseline, the minimal client: decode the sampled frames,
   encode each as PNG at level 1, base64 it into a JSON line and send it through a
   pipe to a child that answers, one at a time. With ``--upstream-estimate``, the same
   at Pillow's default level 6, which is what upstream does per frame (upstream takes
   about 2.4x that baseline's time, as it encodes in the event loop).
3. ``glasskit_eval run`` on the same 200 samples with ``--concurrency 4``, each a whole
   child process whose own peak RSS is reported: an in-process Python adapter, then
   trivial command adapters (the same Python adapter served by protocol_server, and a
   Node adapter on the JavaScript helper). The summary gives each command adapter's
   wall time as a ratio of the minimal client's. ``--load N`` runs N CPU-bound
   processes (``while True: pass``) beside every run, as on a busy CI machine; they
   are killed when the runs are done. ``--runs-only`` skips 1 and 2, ``--only NAME``
   picks runs by a word of their name (``python``, ``protocol``, ``node``).

Peak RSS is the run's own process (``RUSAGE_SELF`` in the child, which is what the
memory goal is about); the largest adapter process's peak is printed beside it.

Run from the repository root (or with glasskit_eval importable).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import av
from PIL import Image, ImageChops, ImageDraw

from glasskit_eval.adapters._wire import PNG_COMPRESS_LEVEL
from glasskit_eval.video.png import encode_png

WIDTH, HEIGHT = 1920, 1080
VIDEO_VERSION = 2
FPS_GOP_SECONDS = 2
#: x264 as most encoders ship it: B-frames make the decoder hold frames for reordering.
X264_OPTIONS = {"preset": "veryfast", "crf": "23", "profile": "high", "bf": "3"}
PIPE_CHILD = (
    "import sys\n"
    "out = sys.stdout.buffer\n"
    "for line in sys.stdin.buffer:\n"
    "    out.write(b'{\"id\":1,\"result\":true}\\n')\n"
    "    out.flush()\n"
)


# -- the video ---------------------------------------------------------------------------


def make_video(path: Path, seconds: int, fps: int) -> None:
    """A camera-like clip: a textured scene panning slowly, with moving objects."""
    scene_w, scene_h = WIDTH + 640, HEIGHT + 360
    noise = Image.effect_noise((scene_w // 4, scene_h // 4), 24).resize((scene_w, scene_h))
    gradient = Image.linear_gradient("L").resize((scene_w, scene_h))
    scene = Image.merge("RGB", (noise, gradient, ImageChops.invert(gradient)))
    tmp = path.with_suffix(".partial.mp4")
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        gop = str(FPS_GOP_SECONDS * fps)
        stream.options = {**X264_OPTIONS, "g": gop, "keyint_min": gop}
        for index in range(seconds * fps):
            x, y = (index * 3) % 640, (index * 2) % 360
            frame = scene.crop((x, y, x + WIDTH, y + HEIGHT))
            draw = ImageDraw.Draw(frame)
            for k in range(6):
                cx, cy = (index * 9 + k * 300) % WIDTH, (k * 170 + index * 5) % HEIGHT
                draw.ellipse((cx, cy, cx + 180, cy + 120), fill=(k * 40, (k * 90) % 256, 255 - k * 30))
            draw.text((40, 40), f"frame {index}", fill=(255, 255, 255))
            for packet in stream.encode(av.VideoFrame.from_image(frame)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)


def cached_video(seconds: int, fps: int) -> Path:
    folder = Path(tempfile.gettempdir()) / "glasskit-eval-bench"
    folder.mkdir(exist_ok=True)
    path = folder / f"scene-v{VIDEO_VERSION}-bframes-{WIDTH}x{HEIGHT}-{fps}fps-{seconds}s.mp4"
    if not path.exists():
        print(f"generating {path} (once; later runs reuse it) ...", flush=True)
        started = time.perf_counter()
        make_video(path, seconds, fps)
        print(f"  done in {time.perf_counter() - started:.0f}s", flush=True)
    return path


def sample_times(count: int, seconds: int) -> list[Fraction]:
    step = Fraction(seconds) / count
    return [step * i for i in range(count)]


def decode_selected(path: Path, times: Sequence[Fraction]) -> Iterator[Image.Image]:
    """The frame nearest each time (ties to the earlier), decoded start to end."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        base = stream.time_base
        pending = list(times)
        previous: tuple[Fraction, Any] | None = None
        for frame in container.decode(stream):
            now = Fraction(frame.pts) * base
            while pending and pending[0] <= now:
                want = pending.pop(0)
                if previous is not None and want - previous[0] <= now - want:
                    yield previous[1].to_image()
                else:
                    yield frame.to_image()
            if not pending:
                return
            previous = (now, frame)


# -- the bridge, piece by piece ------------------------------------------------------------


def timed(func: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = func()
        best = min(best, time.perf_counter() - started)
    return best, value


class PipeChild:
    """A child that answers each line with a tiny JSON line, like a trivial adapter."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PIPE_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def round_trip(self, line: bytes) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        self.proc.stdout.readline()

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


def request_line(png: bytes, width: int, height: int) -> bytes:
    sample = {
        "timestampS": 1.0, "frameIndex": 30, "sampleIndex": 0, "videoPath": "/v.mp4",
        "caseName": "c", "image": {"mimeType": "image/png", "width": width, "height": height,
                                   "dataBase64": base64.b64encode(png).decode("ascii")},
    }
    message = {"id": 1, "method": "evaluate", "params": {"sample": sample, "target": {"id": "t"}}}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def pillow_png(image: Image.Image, level: int) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=level)
    return buffer.getvalue()


def bridge_costs(frames: list[Image.Image]) -> None:
    print(f"\n== Bridge cost per 1920x1080 frame (median of {len(frames)} frames, best of 2) ==")
    print(f"{'PNG encoder':<22}  {'encode ms':>9}  {'PNG MB':>6}  {'base64 ms':>9}  {'pipe ms':>7}")
    encoders: list[tuple[str, Callable[[Image.Image], bytes]]] = [
        (f"ours, zlib level {level}", partial(encode_png, level=level)) for level in range(10)
    ]
    encoders += [(f"Pillow, level {level}", partial(pillow_png, level=level)) for level in (1, 6)]
    child = PipeChild()
    try:
        for name, encoder in encoders:
            encode_ms, size_mb, b64_ms, pipe_ms = [], [], [], []
            for image in frames:
                seconds, png = timed(partial(encoder, image), repeat=2)
                encode_ms.append(seconds * 1000)
                size_mb.append(len(png) / 1e6)
                b64_ms.append(timed(partial(base64.b64encode, png))[0] * 1000)
                line = request_line(png, *image.size)
                pipe_ms.append(timed(partial(child.round_trip, line))[0] * 1000)
            print(f"{name:<22}  {statistics.median(encode_ms):>9.1f}  {statistics.median(size_mb):>6.2f}  "
                  f"{statistics.median(b64_ms):>9.1f}  {statistics.median(pipe_ms):>7.1f}")
    finally:
        child.close()
    for name, encoder in (
        (f"ours, level {PNG_COMPRESS_LEVEL}", lambda im: encode_png(im, PNG_COMPRESS_LEVEL)),
        ("Pillow, level 6", lambda im: pillow_png(im, 6)),
    ):
        frames_per_s = {}
        for threads in (1, 2):
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(encoder, frames[:threads]))
                started = time.perf_counter()
                list(pool.map(encoder, frames * 2))
                frames_per_s[threads] = 2 * len(frames) / (time.perf_counter() - started)
        print(f"{name} throughput: {frames_per_s[1]:.1f} frames/s on 1 thread, "
              f"{frames_per_s[2]:.1f} on 2 threads ({frames_per_s[2] / frames_per_s[1]:.2f}x)")


def raw_baseline(video: Path, times: Sequence[Fraction], encoder: Callable[[Image.Image], bytes]) -> float:
    """Samples per second of decode + PNG + base64 + pipe, one after the other."""
    child = PipeChild()
    try:
        started = time.perf_counter()
        count = 0
        for image in decode_selected(video, times):
            child.round_trip(request_line(encoder(image), *image.size))
            count += 1
        elapsed = time.perf_counter() - started
    finally:
        child.close()
    assert count == len(times)
    return count / elapsed


# -- real runs -----------------------------------------------------------------------------

TRIVIAL_ADAPTER = """\
class Trivial:
    async def evaluate(self, sample, target):
        return True


def create_evaluator(config):
    return Trivial()
"""

TRIVIAL_NODE_ADAPTER = """\
import {{ runGlassKitAdapter }} from {helper};

await runGlassKitAdapter(async () => ({{
  async evaluate({{ sample }}) {{
    return sample.image.bytes.length > 0;
  }},
}}));
"""


def make_eval(root: Path, video: Path, count: int, seconds: int) -> Path:
    eval_dir = root / "eval"
    (eval_dir / "cases").mkdir(parents=True)
    os.symlink(video, eval_dir / "cases" / "scene.mp4")
    step = Fraction(seconds) / count
    (eval_dir / "cases" / "scene.yaml").write_text(
        "video: scene.mp4\n"
        "targets:\n"
        "  visible:\n"
        "    samples:\n"
        f"    - range: [0, {seconds}]\n"
        f"      every_s: {float(step)!r}\n"
        "      expect: true\n"
    )
    (eval_dir / "adapter.py").write_text(TRIVIAL_ADAPTER)
    from glasskit_eval.support.resources import as_file

    with as_file("assets", "glasskit_adapter.mjs") as helper:
        copied = eval_dir / "glasskit_adapter.mjs"
        shutil.copy(helper, copied)
    (eval_dir / "adapter.mjs").write_text(
        TRIVIAL_NODE_ADAPTER.format(helper=json.dumps("./glasskit_adapter.mjs"))
    )
    return eval_dir


#: Runs the CLI in a child process and reports that process's own peak RSS (VmHWM: a forked
#: child's ``ru_maxrss`` starts at its parent's RSS, which exec keeps) and its largest adapter
#: process's (RUSAGE_CHILDREN: the largest reaped child, not a sum) on stderr's last line.
RUN_IN_CHILD = (
    "import re, resource, sys\n"
    "from glasskit_eval.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "with open('/proc/self/status') as status:\n"
    "    own = int(re.search(r'VmHWM:\\s*(\\d+)', status.read()).group(1))\n"
    "sys.stderr.write('\\nmaxrss_kib=%d,%d\\n' % (own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "raise SystemExit(code)\n"
)


class Load:
    """CPU-bound processes beside the runs (a busy machine); killed on exit."""

    def __init__(self, count: int) -> None:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]

    def __enter__(self) -> Load:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()


def timed_run(eval_dir: Path, count: int, concurrency: int,
              adapter: Sequence[str]) -> tuple[float, float, float]:
    """Samples per second of one whole ``glasskit_eval run`` process, its peak RSS and its
    largest child's (the adapter's) in MiB."""
    report = eval_dir.parent / "report.json"
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH")))))
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RUN_IN_CHILD, "run", "--eval-dir", str(eval_dir),
         "--concurrency", str(concurrency), "--output-json", str(report), *adapter],
        capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout}")
    summary = json.loads(report.read_text())["summary"]
    assert summary["passed_attempts"] == count, summary
    shutil.rmtree(eval_dir / "runs", ignore_errors=True)
    own_kib, child_kib = (int(k) for k in proc.stderr.rsplit("maxrss_kib=", 1)[1].split(","))
    return count / elapsed, own_kib / 1024, child_kib / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration; best is kept")
    parser.add_argument("--skip-bridge", action="store_true", help="skip the per-frame breakdown")
    parser.add_argument("--runs-only", action="store_true", help="only the whole runs (no bridge, no baseline)")
    parser.add_argument("--only", action="append", default=[],
                        help="only runs whose name has this word (python, protocol, node); repeatable")
    parser.add_argument("--load", type=int, default=0,
                        help="CPU-bound processes to run beside every run (a loaded machine)")
    parser.add_argument("--upstream-estimate", action="store_true",
                        help="also time the level-6 baseline that upstream's speed is estimated from "
                             "(minutes on a 2-core machine)")
    args = parser.parse_args(argv)

    video = cached_video(args.seconds, args.fps)
    times = sample_times(args.samples, args.seconds)
    print(f"video: {video} ({video.stat().st_size / 1e6:.0f} MB), {args.samples} samples, "
          f"{os.cpu_count()} CPUs, PNG level {PNG_COMPRESS_LEVEL}")

    if not (args.skip_bridge or args.runs_only):
        frames = list(decode_selected(video, times[:: max(1, len(times) // 6)]))
        bridge_costs(frames)

    baselines: dict[str, float] = {}
    minimal = None
    if not args.runs_only:
        minimal = baseline_rates(video, times, args, baselines)

    print(f"\n== glasskit_eval run, {args.samples} samples, --concurrency {args.concurrency}, "
          f"{args.load} CPU-bound processes beside it, load average {os.getloadavg()[0]:.2f} "
          "(whole process, peak RSS of the run itself; largest adapter process) ==")
    results = whole_runs(video, args)
    if not results:
        return 0
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    in_process = results.get("in-process Python adapter", (None,))[0]
    print("\n== Summary ==")
    for name, (rate, rss, _child) in results.items():
        if not name.startswith("command"):
            continue
        line = f"{name}: peak RSS {rss:.0f} MiB (goal <= 250 MiB)"
        if minimal is not None:
            line += f", wall {minimal / rate:.2f}x the minimal level-{PNG_COMPRESS_LEVEL} client (goal <= 0.7x)"
        if in_process is not None:
            bridge_ms = (1 / rate - 1 / in_process) * 1000
            line += (f", {rate / in_process:.2f}x in-process throughput "
                     f"(the bridge adds {bridge_ms:.1f} ms per sample)")
        if args.upstream_estimate:
            upstream = baselines["Pillow PNG, level 6 (as upstream)"] / 2.4
            line += f", {rate / upstream:.2f}x the upstream estimate (level-6 baseline / 2.4)"
        print(line)
    return 0


def baseline_rates(video: Path, times: Sequence[Fraction], args: argparse.Namespace,
                   baselines: dict[str, float]) -> float:
    print("\n== Raw single-threaded baseline: decode + PNG + base64 + pipe ==")
    encoders: list[tuple[str, Callable[[Image.Image], bytes]]] = [
        (f"our PNG, level {PNG_COMPRESS_LEVEL}", lambda im: encode_png(im, PNG_COMPRESS_LEVEL)),
    ]
    if args.upstream_estimate:
        encoders.append(("Pillow PNG, level 6 (as upstream)", lambda im: pillow_png(im, 6)))
    for name, encoder in encoders:
        baselines[name] = max(raw_baseline(video, times, encoder) for _ in range(args.repeat))
        print(f"{name:<34} {baselines[name]:6.2f} samples/s")
    return baselines[encoders[0][0]]


def whole_runs(video: Path, args: argparse.Namespace) -> dict[str, tuple[float, float, float]]:
    """Per configuration: best samples/s, the largest peak RSS of the run and of its adapter (MiB)."""
    results: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="glasskit-bench-") as tmp:
        eval_dir = make_eval(Path(tmp), video, args.samples, args.seconds)
        configs: dict[str, list[str]] = {
            "in-process Python adapter": ["--adapter", f"{eval_dir / 'adapter.py'}:create_evaluator"],
            "command: protocol_server": [
                "--adapter-command",
                shlex.join([sys.executable, "-m", "glasskit_eval.protocol_server",
                            f"{eval_dir / 'adapter.py'}:create_evaluator"]),
            ],
        }
        if shutil.which("node"):
            configs["command: Node helper"] = [
                "--adapter-command", shlex.join(["node", str(eval_dir / "adapter.mjs")])
            ]
        if args.only:
            configs = {k: v for k, v in configs.items() if any(w.lower() in k.lower() for w in args.only)}
        with Load(args.load):
            for name, adapter in configs.items():
                runs = [timed_run(eval_dir, args.samples, args.concurrency, adapter) for _ in range(args.repeat)]
                results[name] = (max(rate for rate, _, _ in runs), max(rss for _, rss, _ in runs),
                                 max(child for _, _, child in runs))
                print(f"{name:<28} {results[name][0]:6.2f} samples/s, peak RSS {results[name][1]:.0f} MiB "
                      f"(runs: {', '.join(f'{rss:.0f}' for _, rss, _ in runs)} MiB; "
                      f"adapter process {results[name][2]:.0f} MiB)", flush=True)
    return results


if __name__ == "__main__":
    raise SystemExit(main())
