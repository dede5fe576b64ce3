"""Clip samples benchmark: whole `run`s with clips against bare PyAV baselines, in one run.

Usage: python3 benchmarks/bench_clips.py [--rounds 3] [--minutes 10] [--keep DIR] [--only SCENARIO ...]

Uses ``bench_frames``' video (``--minutes`` of 1280x720 x264 veryfast with B-frames, 30 fps, a
keyframe every 2 s; generated in a temporary directory or ``--keep DIR``, reused when present).
Every scenario and baseline runs in its own subprocess, ``--rounds`` times, interleaved; each
child times its work (start-up and imports excluded) and reads its own peak RSS (``harness``).

Scenarios:
  sliding  ``range: [2, N*60]`` every 0.5 s, ``clip: {before_s: 2.0, every_s: 0.25}`` (9 frames,
           7 of them shared with the next clips), trivial adapter, ``--concurrency 8``.
           Baseline: one PyAV decoder with frame threads over the whole video, converting the
           same set of frames (every 0.25 s) to RGB once each.
  sparse   5 samples in the last 10 s, the same clip (9 frames each). Baseline: per clip, a
           bare PyAV seek to the keyframe before its first frame, then decode forward,
           converting its 9 frames.

Goals (the issue's): sliding <= 1.1x the baseline's wall with peak RSS <= 300 MiB; sparse <= 1.3x.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from bench_frames import sparse_tail_times
from harness import FPS, TRIVIAL_ADAPTER, bare_decode, timed_cli, usage, write_eval

EVERY = Fraction(1, 4)
BEFORE = Fraction(2)
CLIP = "{before_s: 2.0, every_s: 0.25}"


def nearest_index(t: Fraction) -> int:
    """The frame a time gets at a constant 30 fps: nearest, ties to the earlier frame."""
    return max(math.ceil(t * FPS - Fraction(1, 2)), 0)


def clip_times(anchor: Fraction) -> list[Fraction]:
    return [anchor - j * EVERY for j in range(int(BEFORE / EVERY), -1, -1)]


def child_engine(scenario: str, video: Path, seconds: int) -> tuple[float, float]:
    harness.load_engine()
    with tempfile.TemporaryDirectory() as tmp:
        if scenario == "sliding":
            samples = f"- range: [2, {seconds}]\n  field: ok\n  expect: true\n"
        else:
            listed = ", ".join(str(float(t)) for t in sparse_tail_times(seconds))
            samples = f"- at: [{listed}]\n  field: ok\n  expect: true\n"
        write_eval(Path(tmp), video, {"a": samples}, TRIVIAL_ADAPTER, defaults=f"sample_defaults:\n  clip: {CLIP}\n")
        return timed_cli(["run", "--eval-dir", tmp, "--concurrency", "8"])


def child_baseline_sliding(video: Path, seconds: int) -> tuple[float, float]:
    wall, cpu = usage()
    wanted = {nearest_index(EVERY * k) for k in range(int(seconds / EVERY) + 1)}
    bare_decode(video, wanted.__contains__)
    wall2, cpu2 = usage()
    return wall2 - wall, cpu2 - cpu


def child_baseline_sparse(video: Path, seconds: int) -> tuple[float, float]:
    import av

    wall, cpu = usage()
    container = av.open(str(video))
    stream = container.streams.video[0]
    base = stream.time_base
    for anchor in sparse_tail_times(seconds):
        indexes = sorted({nearest_index(t) for t in clip_times(anchor)})
        first = indexes[0]
        container.seek(int(Fraction(first, FPS) / base), stream=stream, backward=True)
        for frame in container.decode(stream):
            index = round(frame.pts * base * FPS)
            if index in indexes:
                frame.to_image().close()
            if index >= indexes[-1]:
                break
    container.close()
    wall2, cpu2 = usage()
    return wall2 - wall, cpu2 - cpu


CHILDREN = {
    "engine-sliding": lambda v, s: child_engine("sliding", v, s),
    "engine-sparse": lambda v, s: child_engine("sparse", v, s),
    "base-sliding": child_baseline_sliding,
    "base-sparse": child_baseline_sparse,
}
#: scenario -> (engine child, baseline child)
SCENARIOS = {"sliding": ("engine-sliding", "base-sliding"), "sparse": ("engine-sparse", "base-sparse")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.options(parser, minutes=10, scenarios=sorted(SCENARIOS))
    args = parser.parse_args()
    if args.child:
        wall, cpu = CHILDREN[args.child](Path(args.video), args.seconds)
        harness.report({"wall": wall, "cpu": cpu})
        return 0
    harness.load_average("at start")
    names = args.only or list(SCENARIOS)
    with harness.workdir(args.keep) as (folder, _scratch):
        seconds = args.minutes * 60
        path = harness.main_video(folder, seconds)
        results = harness.interleave(args.rounds, [kind for name in names for kind in SCENARIOS[name]],
                             lambda kind: harness.run_child(__file__, kind, path, seconds), harness.child_line)
    harness.ratio_table([(name, results[SCENARIOS[name][0]], results[SCENARIOS[name][1]]) for name in names])
    harness.load_average("at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
