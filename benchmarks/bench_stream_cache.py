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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import bare_decode, importable, timed_calls, usage, video, workdir, write_case

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--keep", type=Path, help="directory for the generated video (reused when present)")
    args = parser.parse_args()
    importable()
    width, height = (int(v) for v in args.size.split("x"))
    with workdir(args.keep) as (folder, scratch):
        path = video(folder, f"stream_{args.seconds}s_{width}x{height}.mp4", args.seconds, width, height,
                     textured=False)
        eval_dir = write_case(scratch / "eval", path,
                              f"video: {path.name}\ntargets:\n  pan:\n    sample_defaults: {{field: alert}}\n"
                              f"    events:\n      - at: 1.0\n        expect: tick\n", ADAPTER)
        cache = scratch / "cache"
        base = ["run", "--eval-dir", str(eval_dir)]
        started, _cpu = usage()
        bare_decode(path)
        bare = usage()[0] - started
        rows: list[tuple[str, float, int | None]] = [("bare", bare, None)]
        for name, extra in (("no cache", []), ("cold", ["--cache", str(cache)]), ("warm", ["--cache", str(cache)]),
                            ("write", ["--cache", str(cache), "--cache-mode", "write"])):
            rows.append((name, *timed_calls([*base, *extra], eval_dir, ok=(0, 1))))
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
