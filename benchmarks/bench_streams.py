"""Stream evals benchmark: whole `run`s of stream targets against bare PyAV decodes, in one run.

Usage: python3 benchmarks/bench_streams.py [--rounds 3] [--minutes 10] [--keep DIR]
                                           [--only SCENARIO ...] [--check]

Uses ``bench_frames``' kind of video (1280x720 x264 veryfast, CRF 23, 30 fps, a keyframe every
2 s, with B-frames): ``--minutes`` (10; a fraction such as 0.5 for a quick check) of it, and a
20 s clip of the same kind for the paced scenario. Generated in a temporary directory, or in
``--keep DIR`` and reused from there. Every run is a subprocess of its own, ``--rounds`` times,
interleaved; each child times its work (interpreter start-up and imports excluded, both sides)
in wall and CPU seconds, and the parent reads its peak RSS from ``wait4``. Engine children run
the CLI's ``run`` (``--output-json``) in-process and report the streams' ``frames_delivered`` and
``frames_dropped`` from the JSON report.

The stream adapter is trivial: a plain (synchronous) ``on_frame`` that answers None, except one
emission 0.4 s after each event (an event every 30 s), so scoring has something to match.

Scenarios (goals from the issue):
  replay       one stream target fed every frame, replay clock. Baseline: one PyAV decoder with
               frame threads over the whole video converting every frame to RGB the way the
               engine does (``reformat`` to rgb24, one copy into a Pillow image). Goal <= 1.1x.
  two-targets  two stream targets on the case (one decode, two streams) against ``replay``'s
               one target. Goal <= 1.15x.
  every        ``stream: {every_s: 0.2}``. Baseline: the same decoder converting only the grid's
               frames (every 6th at 30 fps, and the last). Goal <= 1.1x.
  paced        ``--pace 1.0`` on the 20 s clip: the run's wall should be 20 s +/- 0.5 s with no
               frame dropped.

``--check`` exits 1 when a goal is missed. The load average is printed at the start and the end:
on a busy machine compare ratios from the same run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_frames import FPS, _usage, make_video

ROOT = Path(__file__).resolve().parent.parent
EVERY_S = "0.2"
EVERY_FRAMES = 6  # 0.2 s at 30 fps: the grid's nearest frames are exactly every 6th
PACED_SECONDS = 20
#: Frames after an event's onset at which the adapter emits (0.4 s: on the every_s grid too).
EMIT_AFTER = 12


def event_times(seconds: int) -> list[int]:
    """An event every 30 s from 10 s on, clear of the clip's end; one at the middle of a short clip."""
    return list(range(10, seconds - 1, 30)) or [seconds // 2]


def adapter_source(seconds: int) -> str:
    emit = sorted(at * FPS + EMIT_AFTER for at in event_times(seconds))
    return f"""
EMIT = frozenset({emit!r})

def create_evaluator(config):
    return Trivial()

class Trivial:
    def on_frame(self, sample, target):
        if sample.frame_index in EMIT:
            return {{"alert": "boiling"}}
        return None
"""


def case_text(video: Path, seconds: int, targets: int, every: bool) -> str:
    stream = f"    stream: {{every_s: {EVERY_S}}}\n" if every else ""
    events = "".join(f"      - at: {at}\n        expect: boiling\n" for at in event_times(seconds))
    body = "".join(f"  t{i}:\n    sample_defaults: {{field: alert}}\n{stream}    events:\n{events}"
                   for i in range(targets))
    return f"video: {video.name}\ntargets:\n{body}"


# --------------------------------------------------------------------------- children


def child_engine(kind: str, video: Path, seconds: int) -> dict[str, Any]:
    import importlib
    import io
    import pkgutil

    import av  # noqa: F401  (imports are start-up, not work: the baselines pay them untimed too)

    import glasskit_eval
    from glasskit_eval.cli import main

    for module in pkgutil.walk_packages(glasskit_eval.__path__, "glasskit_eval."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    targets = 2 if kind == "engine-two" else 1
    every = kind == "engine-every"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "cases").mkdir()
        (root / "cases" / video.name).symlink_to(video)
        (root / "cases" / "bench.yaml").write_text(case_text(video, seconds, targets, every))
        (root / "adapter.py").write_text(adapter_source(seconds))
        report = root / "report.json"
        argv = ["run", "--eval-dir", tmp, "--output-json", str(report)]
        if kind == "engine-paced":
            argv += ["--pace", "1.0"]
        out = io.StringIO()
        wall, cpu = _usage()
        code = main(argv, out=out, err=out)
        wall2, cpu2 = _usage()
        if code != 0:
            raise SystemExit(f"{kind} run failed ({code}):\n{out.getvalue()}")
        streams = json.loads(report.read_text())["streams"]
    return {"wall": wall2 - wall, "cpu": cpu2 - cpu,
            "delivered": sum(s["frames_delivered"] for s in streams),
            "dropped": sum(s["frames_dropped"] for s in streams),
            "detected": sum(s["metrics"]["detected"] for s in streams),
            "events": sum(s["metrics"]["events"] for s in streams)}


def child_baseline(kind: str, video: Path, seconds: int) -> dict[str, Any]:
    """One decoder with frame threads; every ``step``-th frame converted to RGB as the engine does."""
    import av
    from PIL import Image

    step = EVERY_FRAMES if kind == "base-every" else 1
    # The grid's last time is the clip's end, whose nearest frame is the last one.
    last = seconds * FPS - 1
    wall, cpu = _usage()
    container = av.open(str(video))
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    converted = 0
    for index, frame in enumerate(container.decode(stream)):
        if index % step == 0 or index == last:
            plane = frame.reformat(format="rgb24").planes[0]
            Image.frombuffer("RGB", (plane.width, plane.height), plane, "raw", "RGB", plane.line_size, 1).close()
            converted += 1
    container.close()
    wall2, cpu2 = _usage()
    return {"wall": wall2 - wall, "cpu": cpu2 - cpu, "delivered": converted}


def child(args: argparse.Namespace) -> None:
    video = Path(args.video)
    if args.child.startswith("engine-"):
        result = child_engine(args.child, video, args.seconds)
    else:
        result = child_baseline(args.child, video, args.seconds)
    print(json.dumps(result))


# --------------------------------------------------------------------------- parent


def video_for(folder: Path, seconds: int) -> Path:
    # The name bench_frames gives whole minutes, so one --keep folder serves both.
    name = f"bframes_{seconds // 60}m_720p.mp4" if seconds % 60 == 0 else f"bframes_{seconds}s_720p.mp4"
    path = folder / name
    if not path.exists():
        started = time.perf_counter()
        # In a child: Linux carries a process's peak RSS over fork and exec, so encoding in the
        # parent would raise every measured child's peak to the encoder's.
        subprocess.run([sys.executable, __file__, "--make-video", str(path), "--seconds", str(seconds)], check=True)
        print(f"generated {name} ({path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - started:.0f}s", flush=True)
    return path


def run_child(kind: str, video: Path, seconds: int) -> dict[str, Any]:
    """The child's own figures plus its peak RSS (MiB)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, "--video", str(video),
                             "--seconds", str(seconds)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{kind} failed")
    result: dict[str, Any] = json.loads(output)
    result["rss"] = usage.ru_maxrss / 1024
    return result


#: scenario -> (measured child, reference child, goal on the wall ratio)
SCENARIOS: dict[str, tuple[str, str | None, float]] = {
    "replay": ("engine-one", "base-all", 1.10),
    "two-targets": ("engine-two", "engine-one", 1.15),
    "every": ("engine-every", "base-every", 1.10),
    "paced": ("engine-paced", None, 0.0),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the main video (fractions allowed)")
    parser.add_argument("--keep", type=Path, help="folder for the generated videos (reused)")
    parser.add_argument("--only", nargs="+", choices=list(SCENARIOS), help="run these scenarios")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--video", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--make-video", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_video:
        make_video(args.make_video, args.seconds, 1280, 720, textured=True)
        return 0
    if args.child:
        child(args)
        return 0
    seconds = round(args.minutes * 60)
    if seconds < 4:
        parser.error("--minutes must give at least 4 seconds of video")
    names = args.only or list(SCENARIOS)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)", flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        videos: dict[str, tuple[Path, int]] = {}
        if any(n != "paced" for n in names):
            videos["main"] = (video_for(folder, seconds), seconds)
        if "paced" in names:
            videos["paced"] = (video_for(folder, PACED_SECONDS), PACED_SECONDS)
        runs: list[str] = []
        for name in names:
            for kind in SCENARIOS[name][:2]:
                if kind is not None and kind not in runs:
                    runs.append(kind)
        for round_no in range(1, args.rounds + 1):
            for kind in runs:
                path, length = videos["paced" if kind == "engine-paced" else "main"]
                started = time.perf_counter()
                r = run_child(kind, path, length)
                results.setdefault(kind, []).append(r)
                extra = f"  dropped {r['dropped']}" if "dropped" in r else ""
                print(f"round {round_no}: {kind:13s} wall {r['wall']:8.3f}s  cpu {r['cpu']:8.3f}s  "
                      f"peak RSS {r['rss']:5.0f} MiB  frames {r['delivered']}{extra}  "
                      f"({time.perf_counter() - started:.1f}s with start-up)", flush=True)

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in results[kind])

    def peak(kind: str) -> float:
        return max(r["rss"] for r in results[kind])

    on = [f"{length} s of 720p" + (" (paced)" if key == "paced" else "") for key, (_p, length) in videos.items()]
    print(f"\nmedians of {args.rounds} rounds on {' and '.join(on)} (peak RSS: the largest of the rounds)")
    print(f"  {'scenario':12s} {'wall':>9s} {'ref wall':>9s} {'ratio':>7s} {'goal':>7s} {'cpu ratio':>9s} "
          f"{'RSS':>8s} {'ref RSS':>8s}  frames")
    missed = []
    for name in names:
        kind, ref, goal = SCENARIOS[name]
        wall, rss = med(kind, "wall"), peak(kind)
        if ref is None:
            dropped = max(r["dropped"] for r in results[kind])
            ok = abs(wall - PACED_SECONDS) <= 0.5 and dropped == 0
            print(f"  {name:12s} {wall:8.3f}s {PACED_SECONDS:8d}s {'':>7s} {'+/-0.5s':>7s} {'':>9s} "
                  f"{rss:4.0f} MiB {'':>8s}  {int(med(kind, 'delivered'))} delivered, {dropped} dropped (most "
                  f"of any round){'' if ok else '  MISSED'}")
        else:
            ratio = wall / med(ref, "wall")
            ok = ratio <= goal
            print(f"  {name:12s} {wall:8.3f}s {med(ref, 'wall'):8.3f}s {ratio:6.2f}x {goal:6.2f}x "
                  f"{med(kind, 'cpu') / med(ref, 'cpu'):8.2f}x {rss:4.0f} MiB {peak(ref):4.0f} MiB  "
                  f"{int(med(kind, 'delivered'))} vs {int(med(ref, 'delivered'))}{'' if ok else '  MISSED'}")
        if not ok:
            missed.append(name)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
