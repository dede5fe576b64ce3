"""Frame engine benchmark: whole `run`s against bare PyAV baselines, side by side, in one run.

Usage: python3 benchmarks/bench_frames.py [--rounds 3] [--minutes 10] [--long-minutes 60]
                                          [--keep DIR] [--only SCENARIO ...]

Generates deterministic synthetic videos encoded the way most encoders do it (x264
``veryfast``, CRF 23, a keyframe every 2 s, **with B-frames**, 30 fps) in a temporary
directory (or ``--keep DIR``, reused when present; nothing is committed):

  main   ``--minutes`` (10) of 1280x720, textured content panning (about 2 MB/min);
  long   ``--long-minutes`` (60; 0 to skip) of 1920x1080, low-complexity content (a gradient
         and a moving block, so generating an hour takes minutes, not an hour).

Every scenario and baseline runs in its own subprocess, ``--rounds`` times, interleaved.
Each child times its work (interpreter start-up and imports excluded, both sides) in wall
and CPU seconds (all threads) and reads its own peak RSS (VmHWM); see ``harness``.

Scenarios:
  sparse-tail    a whole `run` of 5 samples in the last 10 s.
  sparse-spread  a whole `run` of 20 samples spread over the video.
                 Baseline for both: a bare PyAV keyframe-seek loop that decodes to each
                 sample's nearest frame and converts it to RGB (one decoder, default threads).
  dense-2        a whole `run` of 2 targets, ``range: [0, N*60]`` every 0.5 s, trivial adapter.
  dense-5        the same with 5 targets.
                 Baseline for both: one PyAV decoder with frame threads over the whole video,
                 converting only the needed frames to RGB.
  latency        60 s 640x480, 120 samples, adapter sleeping 50 ms, concurrency 8. Baseline:
                 decode on a thread while the sleeps run (bounded queue, 8 in flight).

The load average of the machine is printed at the start and the end: other processes make
every figure noisier, so compare ratios from the same run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
from harness import (
    FPS,
    SLEEPY_ADAPTER,
    TRIVIAL_ADAPTER,
    bare_decode,
    range_samples,
    timed_cli,
    usage,
    video,
    write_eval,
)


def ensure_videos(folder: Path, minutes: int, long_minutes: int,
                  needed: set[str]) -> dict[str, tuple[Path, int]]:
    out = {}
    if "main" in needed:
        out["main"] = (harness.main_video(folder, minutes * 60), minutes * 60)
    if "latency" in needed:
        out["latency"] = (video(folder, "bframes_60s_480p.mp4", 60, 640, 480), 60)
    if long_minutes and "long" in needed:
        name = f"bframes_{long_minutes}m_1080p.mp4"
        out["long"] = (video(folder, name, long_minutes * 60, 1920, 1080, textured=False), long_minutes * 60)
    return out


# --------------------------------------------------------------------------- children


def sparse_tail_times(seconds: int) -> list[Fraction]:
    return [Fraction(seconds - 10) + 2 * i + Fraction(1, 4) for i in range(5)]


def sparse_spread_times(seconds: int) -> list[Fraction]:
    # 20 samples, none on a keyframe: a fixed, irregular offset into each twentieth.
    return [Fraction(seconds * i, 20) + Fraction(7 + (i * 13) % 50, FPS) for i in range(20)]


def child_engine(scenario: str, video: Path, seconds: int) -> tuple[float, float]:
    harness.load_engine()
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["run", "--eval-dir", tmp]
        if scenario.startswith("dense-"):
            count = int(scenario.removeprefix("dense-").removesuffix("-time"))
            if scenario.endswith("-time"):
                argv += ["--order", "time"]  # targets interleaved in time: no frame store
            write_eval(Path(tmp), video, {f"t{i}": range_samples(seconds) for i in range(count)}, TRIVIAL_ADAPTER)
        elif scenario in ("sparse-tail", "sparse-spread"):
            times = sparse_tail_times(seconds) if scenario == "sparse-tail" else sparse_spread_times(seconds)
            listed = ", ".join(str(float(t)) for t in times)
            write_eval(Path(tmp), video, {"a": f"- at: [{listed}]\n  field: ok\n  expect: true\n"},
                       TRIVIAL_ADAPTER)
        elif scenario == "latency":
            write_eval(Path(tmp), video, {"a": range_samples(seconds)}, SLEEPY_ADAPTER)
            argv += ["--concurrency", "8"]
        else:
            raise SystemExit(f"unknown scenario {scenario}")
        return timed_cli(argv)


def child_baseline_dense(video: Path, seconds: int) -> tuple[float, float]:
    """One PyAV decoder with frame threads; the frames every 0.5 s converted to RGB."""
    wall, cpu = usage()
    bare_decode(video, lambda index: index % (FPS // 2) == 0 and index < seconds * FPS)
    wall2, cpu2 = usage()
    return wall2 - wall, cpu2 - cpu


def child_baseline_sparse(video: Path, times: list[Fraction]) -> tuple[float, float]:
    """Per sample: seek to the keyframe before it, decode to its nearest frame, convert to RGB."""
    import av

    wall, cpu = usage()
    container = av.open(str(video))
    stream = container.streams.video[0]
    for want in times:
        target = int(want / stream.time_base)
        container.seek(target, stream=stream, backward=True)
        best = None
        for frame in container.decode(stream):
            if best is not None and frame.pts > target:
                if frame.pts - target < target - best.pts:
                    best = frame
                break
            best = frame
        assert best is not None
        best.to_image().close()
    container.close()
    wall2, cpu2 = usage()
    return wall2 - wall, cpu2 - cpu


def child_baseline_latency(video: Path, seconds: int) -> tuple[float, float]:
    """Decode on a thread into a bounded queue while 8 adapter sleeps run at a time."""
    import asyncio
    import threading

    import av

    async def run() -> None:
        loop = asyncio.get_running_loop()
        frames: asyncio.Queue[Any] = asyncio.Queue(maxsize=2)
        wanted = set(range(0, seconds * FPS, FPS // 2))

        def decode() -> None:
            container = av.open(str(video))
            stream = container.streams.video[0]
            for index, frame in enumerate(container.decode(stream)):
                if index in wanted:
                    image = frame.to_image()
                    asyncio.run_coroutine_threadsafe(frames.put(image), loop).result()
            asyncio.run_coroutine_threadsafe(frames.put(None), loop).result()
            container.close()

        slots = asyncio.Semaphore(8)
        tasks = []

        async def call(image: Any) -> None:
            try:
                await asyncio.sleep(0.05)
            finally:
                image.close()
                slots.release()

        thread = threading.Thread(target=decode)
        thread.start()
        while (image := await frames.get()) is not None:
            await slots.acquire()
            tasks.append(asyncio.create_task(call(image)))
        await asyncio.gather(*tasks)
        thread.join()

    wall, cpu = usage()
    asyncio.run(run())
    wall2, cpu2 = usage()
    return wall2 - wall, cpu2 - cpu


def child(args: argparse.Namespace) -> None:
    video = Path(args.video)
    seconds = args.seconds
    kind = args.child
    if kind.startswith("engine-"):
        wall, cpu = child_engine(kind.removeprefix("engine-"), video, seconds)
    elif kind == "base-dense":
        wall, cpu = child_baseline_dense(video, seconds)
    elif kind == "base-sparse-tail":
        wall, cpu = child_baseline_sparse(video, sparse_tail_times(seconds))
    elif kind == "base-sparse-spread":
        wall, cpu = child_baseline_sparse(video, sparse_spread_times(seconds))
    elif kind == "base-latency":
        wall, cpu = child_baseline_latency(video, seconds)
    else:
        raise SystemExit(f"unknown child {kind}")
    harness.report({"wall": wall, "cpu": cpu})


# --------------------------------------------------------------------------- parent


#: scenario -> (video key, engine child, baseline child)
SCENARIOS = {
    "sparse-tail": ("main", "engine-sparse-tail", "base-sparse-tail"),
    "sparse-spread": ("main", "engine-sparse-spread", "base-sparse-spread"),
    "long-sparse-tail": ("long", "engine-sparse-tail", "base-sparse-tail"),
    "long-sparse-spread": ("long", "engine-sparse-spread", "base-sparse-spread"),
    "dense-2": ("main", "engine-dense-2", "base-dense"),
    "dense-5": ("main", "engine-dense-5", "base-dense"),
    "dense-2-time": ("main", "engine-dense-2-time", "base-dense"),
    "latency": ("latency", "engine-latency", "base-latency"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.options(parser, minutes=10, scenarios=sorted(SCENARIOS))
    parser.add_argument("--long-minutes", type=int, default=60)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    harness.load_average("at start")
    with harness.workdir(args.keep) as (folder, _scratch):
        names = [name for name in (args.only or SCENARIOS) if SCENARIOS[name][0] != "long" or args.long_minutes]
        videos = ensure_videos(folder, args.minutes, args.long_minutes, {SCENARIOS[n][0] for n in names})
        chosen = [name for name in names if SCENARIOS[name][0] in videos]
        # Baselines shared by scenarios run once per round.
        runs: list[tuple[str, Path, int]] = []
        for name in chosen:
            key, engine, base = SCENARIOS[name]
            path, seconds = videos[key]
            for kind in (engine, base):
                if (kind, path, seconds) not in runs:
                    runs.append((kind, path, seconds))
        results = harness.interleave(args.rounds, runs, lambda run: harness.run_child(__file__, *run),
                             lambda run, figures: f"{run[1].name:26s} {harness.child_line(run[0], figures)}")
    harness.ratio_table([(name, results[(engine, *videos[key])], results[(base, *videos[key])])
                 for name in chosen for key, engine, base in [SCENARIOS[name]]])
    harness.load_average("at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
