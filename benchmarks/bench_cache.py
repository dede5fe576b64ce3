"""Observation cache benchmark: the dense scenario with a 50 ms adapter, cold cache vs warm.

Usage: python3 benchmarks/bench_cache.py [--minutes 2] [--concurrency 8] [--keep DIR]

The video is bench_frames' main one (1280x720, 30 fps, N minutes, x264 veryfast, B-frames); the case
has 2 targets sampled every 0.5 s over the whole clip; the adapter sleeps 50 ms per call.
Three runs of ``glasskit_eval run --cache`` in this process on one cache directory: cold (every
call reaches the adapter), warm (every observation from the cache: decoding and pixel hashing
remain), and, for reference, the same run without ``--cache``. Each run's adapter calls are
counted, and a warm run must make none.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import importable, main_video, range_samples, timed_calls, workdir, write_eval

ADAPTER = """
import asyncio
from pathlib import Path

CALLS = Path(__file__).parent / "calls.log"

def create_evaluator(config):
    return Sleepy()

class Sleepy:
    async def evaluate(self, sample, target):
        await asyncio.sleep(0.05)
        with CALLS.open("a") as log:
            log.write("1\\n")
        return {"ok": True}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="directory for the generated video (reused when present)")
    args = parser.parse_args()
    importable()
    seconds = args.minutes * 60
    with workdir(args.keep) as (folder, scratch):
        video = main_video(folder, seconds)
        samples = range_samples(seconds)
        eval_dir = write_eval(scratch / "eval", video, {"a": samples, "b": samples}, ADAPTER)
        cache = scratch / "cache"
        base = ["run", "--eval-dir", str(eval_dir), "--concurrency", str(args.concurrency)]
        cold, cold_calls = timed_calls([*base, "--cache", str(cache)], eval_dir)
        warm, warm_calls = timed_calls([*base, "--cache", str(cache)], eval_dir)
        plain, plain_calls = timed_calls(base, eval_dir)
        count = 2 * 2 * seconds
        print(f"dense {args.minutes} min 720p, {count} samples, 50 ms adapter, concurrency {args.concurrency}")
        print(f"  no cache   {plain:7.2f} s  {plain_calls} adapter calls")
        print(f"  cold cache {cold:7.2f} s  {cold_calls} adapter calls")
        print(f"  warm cache {warm:7.2f} s  {warm_calls} adapter calls")
        print(f"  warm / cold = {warm / cold:.3f} ({cold / warm:.1f}x faster)")
        if warm_calls:
            raise SystemExit("the warm run called the adapter")


if __name__ == "__main__":
    main()
