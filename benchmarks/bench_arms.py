"""Arms benchmark: a whole `run` with 4 arms against the same run with the plain adapter alone.

Usage: python3 benchmarks/bench_arms.py [--rounds 3] [--minutes 2] [--keep DIR]

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
    parser.add_argument("--minutes", type=int, default=2)
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--child", type=int)
    parser.add_argument("--video", type=Path)
    parser.add_argument("--seconds", type=int)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.video, args.seconds)))
        return 0
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        video = folder / f"main-{args.minutes}m.mp4"
        if not video.exists():
            make_video(video, seconds, 1280, 720, textured=True)
        figures: dict[int, list[tuple[float, float]]] = {1: [], 4: []}
        for _ in range(args.rounds):
            for arms in (1, 4):
                figures[arms].append(run_child(arms, video, seconds))
    one = statistics.median(w for w, _ in figures[1]), max(r for _, r in figures[1])
    four = statistics.median(w for w, _ in figures[4]), max(r for _, r in figures[4])
    samples = 2 * seconds * 2
    print(f"dense-2, {args.minutes} min 720p, {samples} samples per arm, trivial adapter, {args.rounds} rounds")
    print(f"1 arm : wall {one[0]:.2f} s, peak RSS {one[1]:.0f} MiB")
    print(f"4 arms: wall {four[0]:.2f} s ({four[0] / one[0]:.2f}x), peak RSS {four[1]:.0f} MiB ({four[1] / one[1]:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
