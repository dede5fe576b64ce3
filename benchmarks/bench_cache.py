"""Observation cache benchmark: the dense scenario with a 50 ms adapter, cold cache vs warm.

Usage: python3 benchmarks/bench_cache.py [--minutes 2] [--concurrency 8] [--keep DIR]

The video is bench_frames' dense one (1280x720, 30 fps, N minutes, x264 ultrafast); the case
has 2 targets sampled every 0.5 s over the whole clip; the adapter sleeps 50 ms per call.
Three runs of ``glasskit_eval run --cache`` in this process on one cache directory: cold (every
call reaches the adapter), warm (every observation from the cache: decoding and pixel hashing
remain), and, for reference, the same run without ``--cache``. Each run's adapter calls are
counted, and a warm run must make none.
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

from bench_frames import make_video, write_eval  # noqa: E402

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
            log.write("x\\n")
        return {"ok": True}
"""


def timed_run(argv: list[str], eval_dir: Path) -> tuple[float, int]:
    from glasskit_eval.cli import main

    calls = eval_dir / "calls.log"
    calls.unlink(missing_ok=True)
    out = io.StringIO()
    started = time.perf_counter()
    code = main(argv, out=out, err=out)
    elapsed = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"run failed ({code}):\n{out.getvalue()}")
    made = len(calls.read_text().splitlines()) if calls.exists() else 0
    return elapsed, made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="directory for the generated video (reused when present)")
    args = parser.parse_args()
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        video = folder / f"dense_{args.minutes}m_720p.mp4"
        if not video.exists():
            make_video(video, seconds, 1280, 720)
        samples = f"- range: [0, {seconds}]\n  field: ok\n  expect: true\n"
        eval_dir = write_eval(Path(tmp) / "eval", video, {"a": samples, "b": samples}, ADAPTER, "0.5")
        cache = Path(tmp) / "cache"
        base = ["run", "--eval-dir", str(eval_dir), "--concurrency", str(args.concurrency)]
        cold, cold_calls = timed_run([*base, "--cache", str(cache)], eval_dir)
        warm, warm_calls = timed_run([*base, "--cache", str(cache)], eval_dir)
        plain, plain_calls = timed_run(base, eval_dir)
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
