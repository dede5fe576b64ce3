"""Arms benchmark: a whole `run` with 4 arms against the same run with the plain adapter alone.

Usage: python3 benchmarks/bench_arms.py [--rounds 3] [--minutes 2] [--keep DIR]

``--minutes`` takes a fraction for a quick check (``--minutes 0.25 --rounds 1``); the figures that
count come from the default 2 minutes on an idle machine.

The video is bench_frames' ``main`` one (1280x720, x264 veryfast with B-frames, 30 fps); the
scenario is its ``dense-2`` (2 targets, a sample every 0.5 s) with the trivial adapter. The 4-arm
run is the plain adapter plus three ``--arm NAME=CONFIG.yaml`` arms of the same adapter, so the
difference is the fan-out: one decode handed to four evaluators. Each run is a subprocess, rounds
interleaved; wall time excludes start-up, peak RSS is the child's own (VmHWM; see ``harness``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from harness import TRIVIAL_ADAPTER, range_samples, timed_cli, write_eval

#: The issue's bounds for 4 arms against one.
WALL_BOUND = 1.25
RSS_BOUND = 1.2


def child(arms: int, video: Path, seconds: int) -> dict[str, float]:
    harness.load_engine()
    with tempfile.TemporaryDirectory() as tmp:
        write_eval(Path(tmp), video, {"t0": range_samples(seconds), "t1": range_samples(seconds)}, TRIVIAL_ADAPTER)
        argv = ["run", "--eval-dir", tmp]
        for n in range(arms - 1):
            config = Path(tmp) / f"arm{n}.yaml"
            config.write_text(f"arm: {n}\n")
            argv += ["--arm", f"a{n}={config}"]
        wall, cpu = timed_cli(argv)
        return {"wall": wall, "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.options(parser, minutes=2.0, fractions=True,
                    minutes_help="length of the 720p video (default 2; a fraction for a quick check, e.g. 0.25)")
    args = parser.parse_args()
    if args.child is not None:
        harness.report(child(int(args.child), args.video, args.seconds))
        return 0
    seconds = max(1, round(args.minutes * 60))
    with harness.workdir(args.keep) as (folder, _scratch):
        video = harness.main_video(folder, seconds)
        figures = harness.interleave(args.rounds, [1, 4],
                                     lambda arms: harness.run_child(__file__, str(arms), video, seconds),
                                     lambda arms, f: f"{arms} arm(s) wall {f['wall']:8.3f}s  peak RSS {f['rss']:5.0f} MiB")
    one = harness.median(figures[1], "wall"), harness.peak(figures[1])
    four = harness.median(figures[4], "wall"), harness.peak(figures[4])
    samples = 2 * seconds * 2
    wall, rss = four[0] / one[0], four[1] / one[1]
    print(f"dense-2, {seconds} s of 720p, {samples} samples per arm, trivial adapter, {args.rounds} rounds")
    print(f"1 arm : wall {one[0]:.2f} s, peak RSS {one[1]:.0f} MiB")
    print(f"4 arms: wall {four[0]:.2f} s ({wall:.2f}x), peak RSS {four[1]:.0f} MiB ({rss:.2f}x)")
    # The bounds: 4 arms within 1.25x the wall and 1.2x the peak RSS of one.
    print(f"bounds: wall <= {WALL_BOUND}x {'met' if wall <= WALL_BOUND else 'MISSED'}, "
          f"peak RSS <= {RSS_BOUND}x {'met' if rss <= RSS_BOUND else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
