"""Stream cache benchmark: what ``run --cache`` costs and saves on a replay stream target.

Usage: python3 benchmarks/bench_stream_cache.py [--seconds 20] [--size 1280x720] [--keep DIR]

The video is bench_frames' plain one (x264 veryfast, 30 fps, B-frames); the case has one stream
target fed every frame; the adapter answers ``None`` except on every 30th frame and counts its
calls. Runs, each of ``glasskit_eval run`` in this process:

  bare        PyAV decoding the video (frame threads) and converting every frame to RGB
  no cache    run without --cache
  cold        --cache on an empty cache (readwrite): every fed frame is decoded and hashed to make
              the key, the stream misses and is fed, so its frames are decoded a second time
  warm        --cache again: the hashing pass, then the stream is rescored from its entry
  write       --cache-mode write: no lookup, frames hashed as they are fed (one decode)

A warm run must make no adapter call, and the others one per frame.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_frames import make_video  # noqa: E402

ADAPTER = """
from pathlib import Path

CALLS = Path(__file__).parent / "calls.log"

def create_evaluator(config):
    return Trivial()

class Trivial:
    adapter_version = "1"

    def __init__(self):
        self.count = 0

    def on_frame(self, sample, target):
        self.count += 1
        return {"alert": "tick"} if sample.frame_index % 30 == 0 else None

    def end_stream(self, target):
        with CALLS.open("a") as log:
            log.write(f"{self.count}\\n")
"""


def bare_decode(video: Path) -> float:
    import av

    started = time.perf_counter()
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            frame.to_image()
    return time.perf_counter() - started


def timed_run(argv: list[str], eval_dir: Path) -> tuple[float, int]:
    from glasskit_eval.cli import main

    calls = eval_dir / "calls.log"
    calls.unlink(missing_ok=True)
    out = io.StringIO()
    started = time.perf_counter()
    code = main(argv, out=out, err=out)
    elapsed = time.perf_counter() - started
    if code not in (0, 1):
        raise SystemExit(f"run failed ({code}):\n{out.getvalue()}")
    made = sum(int(n) for n in calls.read_text().split()) if calls.exists() else 0
    return elapsed, made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--keep", type=Path, help="directory for the generated video (reused when present)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        video = folder / f"stream_{args.seconds}s_{width}x{height}.mp4"
        if not video.exists():
            make_video(video, args.seconds, width, height, textured=False)
        eval_dir = Path(tmp) / "eval"
        (eval_dir / "cases").mkdir(parents=True)
        (eval_dir / "cases" / video.name).symlink_to(video)
        (eval_dir / "cases" / "bench.yaml").write_text(
            f"video: {video.name}\ntargets:\n  pan:\n    sample_defaults: {{field: alert}}\n"
            f"    events:\n      - at: 1.0\n        expect: tick\n")
        (eval_dir / "adapter.py").write_text(ADAPTER)
        cache = Path(tmp) / "cache"
        base = ["run", "--eval-dir", str(eval_dir)]
        bare = bare_decode(video)
        rows = [("bare", bare, None)]
        rows.append(("no cache", *timed_run(base, eval_dir)))
        rows.append(("cold", *timed_run([*base, "--cache", str(cache)], eval_dir)))
        rows.append(("warm", *timed_run([*base, "--cache", str(cache)], eval_dir)))
        rows.append(("write", *timed_run([*base, "--cache", str(cache), "--cache-mode", "write"], eval_dir)))
        print(f"{args.seconds} s {width}x{height} 30 fps, one stream target fed every frame")
        print(f"  {'run':10s} {'wall s':>8s} {'x bare':>7s} {'adapter calls':>14s}")
        for name, wall, made in rows:
            shown = "" if made is None else str(made)
            print(f"  {name:10s} {wall:8.2f} {wall / bare:7.2f} {shown:>14s}")
        warm_calls = rows[3][2]
        if warm_calls:
            raise SystemExit(f"the warm run made {warm_calls} adapter calls")


if __name__ == "__main__":
    main()
