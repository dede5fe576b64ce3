"""Arms benchmark: a whole `run` with 4 arms against the same run with the plain adapter alone.

Usage: python3 benchmarks/bench_arms.py [--rounds 3] [--minutes 2] [--keep DIR]

``--minutes`` takes a fraction for a quick check (``--minutes 0.25 --rounds 1``); the figures that
count come from the default 2 minutes on an idle machine.

The video is bench_frames' ``main`` one (1280x720, x264 veryfast with B-frames, 30 fps); the
scenario is its ``dense-2`` (2 targets, a sample every 0.5 s) with the trivial adapter. The 4-arm
run is the plain adapter plus three ``--arm NAME=CONFIG.yaml`` arms of the same adapter, so the
difference is the fan-out: one decode handed to four evaluators. Each run is a subprocess, rounds
interleaved; wall time excludes start-up, peak RSS comes from ``wait4``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frames import TRIVIAL_ADAPTER, _usage, make_video, write_eval  # noqa: E402

#: The issue's bounds for 4 arms against one.
WALL_BOUND = 1.25
RSS_BOUND = 1.2


def child(arms: int, video: Path, seconds: int) -> dict[str, float]:
    from glasskit_eval.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        samples = f"- range: [0, {seconds}]\n  field: ok\n  expect: true\n"
        write_eval(Path(tmp), video, {"t0": samples, "t1": samples}, TRIVIAL_ADAPTER)
        argv = ["run", "--eval-dir", tmp]
        for n in range(arms - 1):
            config = Path(tmp) / f"arm{n}.yaml"
            config.write_text(f"arm: {n}\n")
            argv += ["--arm", f"a{n}={config}"]
        out = io.StringIO()
        wall, cpu = _usage()
        code = main(argv, out=out, err=out)
        wall2, cpu2 = _usage()
        if code != 0:
            raise SystemExit(f"run failed ({code}):\n{out.getvalue()}")
        return {"wall": wall2 - wall, "cpu": cpu2 - cpu}


def run_child(arms: int, video: Path, seconds: int) -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(arms), "--video", str(video),
                             "--seconds", str(seconds)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{arms} arms failed")
    return json.loads(output)["wall"], usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=2.0,
                        help="length of the 720p video (default 2; a fraction for a quick check, e.g. 0.25)")
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--child", type=int)
    parser.add_argument("--video", type=Path)
    parser.add_argument("--seconds", type=int)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.video, args.seconds)))
        return 0
    seconds = max(1, round(args.minutes * 60))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        video = folder / f"main-{seconds}s.mp4"
        if not video.exists():
            make_video(video, seconds, 1280, 720, textured=True)
        figures: dict[int, list[tuple[float, float]]] = {1: [], 4: []}
        for _ in range(args.rounds):
            for arms in (1, 4):
                figures[arms].append(run_child(arms, video, seconds))
    one = statistics.median(w for w, _ in figures[1]), max(r for _, r in figures[1])
    four = statistics.median(w for w, _ in figures[4]), max(r for _, r in figures[4])
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
