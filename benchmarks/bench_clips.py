"""Clip samples benchmark: whole `run`s with clips against bare PyAV baselines, in one run.

Usage: python3 benchmarks/bench_clips.py [--rounds 3] [--minutes 10] [--keep DIR] [--only SCENARIO ...]

Uses ``bench_frames``' video (``--minutes`` of 1280x720 x264 veryfast with B-frames, 30 fps, a
keyframe every 2 s; generated in a temporary directory or ``--keep DIR``, reused when present).
Every scenario and baseline runs in its own subprocess, ``--rounds`` times, interleaved; each
child times its work (start-up and imports excluded), the parent reads its peak RSS.

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
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frames import FPS, TRIVIAL_ADAPTER, _usage, ensure_videos, sparse_tail_times

ROOT = Path(__file__).resolve().parent.parent
EVERY = Fraction(1, 4)
BEFORE = Fraction(2)
CLIP = "{before_s: 2.0, every_s: 0.25}"


def nearest_index(t: Fraction) -> int:
    """The frame a time gets at a constant 30 fps: nearest, ties to the earlier frame."""
    return max(math.ceil(t * FPS - Fraction(1, 2)), 0)


def clip_times(anchor: Fraction) -> list[Fraction]:
    return [anchor - j * EVERY for j in range(int(BEFORE / EVERY), -1, -1)]


def child_engine(scenario: str, video: Path, seconds: int) -> tuple[float, float]:
    import importlib
    import io
    import pkgutil

    import av  # noqa: F401  (imports are start-up, not work)

    import glasskit_eval
    from glasskit_eval.cli import main

    for module in pkgutil.walk_packages(glasskit_eval.__path__, "glasskit_eval."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "cases").mkdir()
        (root / "cases" / video.name).symlink_to(video)
        if scenario == "sliding":
            samples = f"    - range: [2, {seconds}]\n      field: ok\n      expect: true\n"
        else:
            listed = ", ".join(str(float(t)) for t in sparse_tail_times(seconds))
            samples = f"    - at: [{listed}]\n      field: ok\n      expect: true\n"
        (root / "cases" / "bench.yaml").write_text(
            f"video: {video.name}\nsampling:\n  every_s: 0.5\nsample_defaults:\n  clip: {CLIP}\n"
            f"targets:\n  a:\n    samples:\n{samples}")
        (root / "adapter.py").write_text(TRIVIAL_ADAPTER)
        out = io.StringIO()
        wall, cpu = _usage()
        code = main(["run", "--eval-dir", tmp, "--concurrency", "8"], out=out, err=out)
        wall2, cpu2 = _usage()
        if code != 0:
            raise SystemExit(f"engine run failed ({code}):\n{out.getvalue()}")
        return wall2 - wall, cpu2 - cpu


def child_baseline_sliding(video: Path, seconds: int) -> tuple[float, float]:
    import av

    wall, cpu = _usage()
    wanted = {nearest_index(EVERY * k) for k in range(int(seconds / EVERY) + 1)}
    container = av.open(str(video))
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    for index, frame in enumerate(container.decode(stream)):
        if index in wanted:
            frame.to_image().close()
    container.close()
    wall2, cpu2 = _usage()
    return wall2 - wall, cpu2 - cpu


def child_baseline_sparse(video: Path, seconds: int) -> tuple[float, float]:
    import av

    wall, cpu = _usage()
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
    wall2, cpu2 = _usage()
    return wall2 - wall, cpu2 - cpu


CHILDREN = {
    "engine-sliding": lambda v, s: child_engine("sliding", v, s),
    "engine-sparse": lambda v, s: child_engine("sparse", v, s),
    "base-sliding": child_baseline_sliding,
    "base-sparse": child_baseline_sparse,
}
#: scenario -> (engine child, baseline child)
SCENARIOS = {"sliding": ("engine-sliding", "base-sliding"), "sparse": ("engine-sparse", "base-sparse")}


def run_child(kind: str, video: Path, seconds: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one child run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, "--video", str(video),
                             "--seconds", str(seconds)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{kind} failed")
    result = json.loads(output)
    return result["wall"], result["cpu"], usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="folder for the generated video (reused)")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), help="run these scenarios")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--video", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        wall, cpu = CHILDREN[args.child](Path(args.video), args.seconds)
        print(json.dumps({"wall": wall, "cpu": cpu}))
        return 0
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)", flush=True)
    names = args.only or list(SCENARIOS)
    samples: dict[str, list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path, seconds = ensure_videos(folder, args.minutes, 0, {"main"})["main"]
        for round_no in range(1, args.rounds + 1):
            for name in names:
                for kind in SCENARIOS[name]:
                    started = time.perf_counter()
                    wall, cpu, rss = run_child(kind, path, seconds)
                    samples.setdefault(kind, []).append((wall, cpu, rss))
                    print(f"round {round_no}: {kind:15s} wall {wall:8.3f}s  cpu {cpu:8.3f}s  peak RSS {rss:5.0f} MiB"
                          f"  ({time.perf_counter() - started:.1f}s with start-up)", flush=True)
    med = {kind: (statistics.median(w for w, _c, _r in vals), statistics.median(c for _w, c, _r in vals),
                  max(r for _w, _c, r in vals)) for kind, vals in samples.items()}
    print(f"\nmedians of {args.rounds} rounds (peak RSS: the largest of the rounds)")
    print(f"  {'scenario':10s} {'engine wall':>12s} {'base wall':>10s} {'wall ratio':>10s} "
          f"{'engine cpu':>11s} {'base cpu':>9s} {'cpu ratio':>9s} {'engine RSS':>11s} {'base RSS':>9s}")
    for name in names:
        engine, base = SCENARIOS[name]
        ew, ec, er = med[engine]
        bw, bc, br = med[base]
        print(f"  {name:10s} {ew:11.3f}s {bw:9.3f}s {ew / bw:9.2f}x {ec:10.3f}s {bc:8.3f}s "
              f"{ec / bc:8.2f}x {er:7.0f} MiB {br:5.0f} MiB")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
