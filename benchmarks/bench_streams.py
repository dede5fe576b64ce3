"""Stream evals benchmark: whole `run`s of stream targets against bare PyAV decodes, in one run.

Usage: python3 benchmarks/bench_streams.py [--rounds 3] [--minutes 10] [--keep DIR]
                                           [--only SCENARIO ...] [--check]

Uses ``bench_frames``' kind of video (1280x720 x264 veryfast, CRF 23, 30 fps, a keyframe every
2 s, with B-frames): ``--minutes`` (10; a fraction such as 0.5 for a quick check) of it, and a
20 s clip of the same kind for the paced scenario. Generated in a temporary directory, or in
``--keep DIR`` and reused from there. Every run is a subprocess of its own, ``--rounds`` times,
interleaved; each child times its work (interpreter start-up and imports excluded, both sides)
in wall and CPU seconds and reads its own peak RSS (VmHWM; see ``harness``). Engine children run
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
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from harness import FPS, bare_decode, timed_cli, usage, write_case

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
    harness.load_engine()
    targets = 2 if kind == "engine-two" else 1
    every = kind == "engine-every"
    with tempfile.TemporaryDirectory() as tmp:
        root = write_case(Path(tmp), video, case_text(video, seconds, targets, every), adapter_source(seconds))
        report_json = root / "report.json"
        argv = ["run", "--eval-dir", tmp, "--output-json", str(report_json)]
        if kind == "engine-paced":
            argv += ["--pace", "1.0"]
        wall, cpu = timed_cli(argv)
        streams = json.loads(report_json.read_text())["streams"]
    return {"wall": wall, "cpu": cpu,
            "delivered": sum(s["frames_delivered"] for s in streams),
            "dropped": sum(s["frames_dropped"] for s in streams),
            "detected": sum(s["metrics"]["detected"] for s in streams),
            "events": sum(s["metrics"]["events"] for s in streams)}


def child_baseline(kind: str, video: Path, seconds: int) -> dict[str, Any]:
    """One decoder with frame threads; every ``step``-th frame converted to RGB as the engine does."""
    step = EVERY_FRAMES if kind == "base-every" else 1
    # The grid's last time is the clip's end, whose nearest frame is the last one.
    last = seconds * FPS - 1
    wall, cpu = usage()
    converted = bare_decode(video, lambda index: index % step == 0 or index == last, as_engine=True)
    wall2, cpu2 = usage()
    return {"wall": wall2 - wall, "cpu": cpu2 - cpu, "delivered": converted}


def child(args: argparse.Namespace) -> None:
    if args.child.startswith("engine-"):
        harness.report(child_engine(args.child, args.video, args.seconds))
    else:
        harness.report(child_baseline(args.child, args.video, args.seconds))


# --------------------------------------------------------------------------- parent


#: scenario -> (measured child, reference child, goal on the wall ratio)
SCENARIOS: dict[str, tuple[str, str | None, float]] = {
    "replay": ("engine-one", "base-all", 1.10),
    "two-targets": ("engine-two", "engine-one", 1.15),
    "every": ("engine-every", "base-every", 1.10),
    "paced": ("engine-paced", None, 0.0),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.options(parser, minutes=10.0, fractions=True, minutes_help="length of the main video (fractions allowed)",
                    scenarios=list(SCENARIOS))
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    seconds = round(args.minutes * 60)
    if seconds < 4:
        parser.error("--minutes must give at least 4 seconds of video")
    names = args.only or list(SCENARIOS)
    harness.load_average("at start")
    with harness.workdir(args.keep) as (folder, _scratch):
        videos: dict[str, tuple[Path, int]] = {}
        if any(n != "paced" for n in names):
            videos["main"] = (harness.main_video(folder, seconds), seconds)
        if "paced" in names:
            videos["paced"] = (harness.main_video(folder, PACED_SECONDS), PACED_SECONDS)
        runs: list[str] = []
        for name in names:
            for kind in SCENARIOS[name][:2]:
                if kind is not None and kind not in runs:
                    runs.append(kind)

        def line(kind: str, r: dict[str, Any]) -> str:
            extra = f"  dropped {r['dropped']}" if "dropped" in r else ""
            return (f"{kind:13s} wall {r['wall']:8.3f}s  cpu {r['cpu']:8.3f}s  "
                    f"peak RSS {r['rss']:5.0f} MiB  frames {r['delivered']}{extra}")

        results = harness.interleave(args.rounds, runs, lambda kind: harness.run_child(
            __file__, kind, *videos["paced" if kind == "engine-paced" else "main"]), line)

    on = [f"{length} s of 720p" + (" (paced)" if key == "paced" else "") for key, (_p, length) in videos.items()]
    print(f"\nmedians of {args.rounds} rounds on {' and '.join(on)} (peak RSS: the largest of the rounds)")
    rows: list[list[object]] = []
    missed = []
    for name in names:
        kind, ref, goal = SCENARIOS[name]
        mine = results[kind]
        wall = harness.median(mine, "wall")
        if ref is None:
            dropped = max(r["dropped"] for r in mine)
            ok = abs(wall - PACED_SECONDS) <= 0.5 and dropped == 0
            rows.append([name, f"{wall:.3f}s", f"{PACED_SECONDS}s", "", "+/-0.5s", "", f"{harness.peak(mine):.0f} MiB", "",
                         f"{int(harness.median(mine, 'delivered'))} delivered, {dropped} dropped (most of any round)"
                         f"{'' if ok else '  MISSED'}"])
        else:
            theirs = results[ref]
            ok = wall / harness.median(theirs, "wall") <= goal
            rows.append([name, f"{wall:.3f}s", f"{harness.median(theirs, 'wall'):.3f}s", harness.ratio(wall, harness.median(theirs, "wall")),
                         f"{goal:.2f}x", harness.ratio(harness.median(mine, "cpu"), harness.median(theirs, "cpu")), f"{harness.peak(mine):.0f} MiB",
                         f"{harness.peak(theirs):.0f} MiB", f"{int(harness.median(mine, 'delivered'))} vs "
                         f"{int(harness.median(theirs, 'delivered'))}{'' if ok else '  MISSED'}"])
        if not ok:
            missed.append(name)
    harness.print_table(["scenario", "wall", "ref wall", "ratio", "goal", "cpu ratio", "RSS", "ref RSS", "frames"], rows,
                        left=(0, 8))
    harness.load_average("at the end")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
