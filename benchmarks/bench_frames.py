"""Frame engine benchmark: the engine and its baselines side by side, in one run.

Usage: python3 benchmarks/bench_frames.py [--rounds 3] [--minutes 10] [--keep DIR]

Generates deterministic synthetic videos (low-complexity content, x264 ultrafast, a
keyframe every 2 s) in a temporary directory (or ``--keep DIR``, reused when present),
then runs every scenario and baseline in its own subprocess, ``--rounds`` times,
interleaved, and prints medians, ratios and each subprocess's peak RSS (``wait4``).

Scenarios (the issue's):
  dense        N-minute 1280x720 30 fps video, 2 targets, ``range: [0, N*60]`` every 0.5 s,
               trivial adapter. Baseline: raw PyAV sequential decode, the same frames
               converted to RGB PIL images (PyAV's default threading; also shown with
               frame threading on).
               Targets are called one after the other (declaration order); ``dense-time``
               is the same with ``--order time`` (targets interleaved, no frame store).
  dense-5t     dense with 5 targets on the same times (one decode, frames kept for 4).
  dense-2x     dense on a video twice as long: time per sample and RSS must stay flat.
  sparse-tail  the same video, 5 samples in the last 10 s. Baseline: PyAV keyframe seek
               and decode forward, per sample.
  latency      60 s 640x480 video, 120 samples, adapter sleeping 50 ms, concurrency 8.
               Baseline: decode on a thread while the sleeps run (bounded queue,
               8 in flight); ideal: 120 x 0.05 / 8 s.

Times are measured inside the child around the work (interpreter start-up excluded;
the engine's time includes planning, probing and the frame table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FPS = 30


# --------------------------------------------------------------------------- videos


def make_video(path: Path, seconds: int, width: int, height: int) -> None:
    """Mostly static gradient with a small moving block: cheap to encode and decode."""
    import av

    tmp = path.with_suffix(".tmp.mp4")
    container = av.open(str(tmp), "w")
    stream = container.add_stream("libx264", rate=FPS)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = {"preset": "ultrafast", "g": str(2 * FPS), "keyint_min": str(2 * FPS),
                      "sc_threshold": "0"}
    row = bytes((x * 255 // width) & 255 for x in range(width))
    base = row * height
    chroma = bytes([128]) * (width * height // 4)
    block = 32
    for i in range(seconds * FPS):
        luma = bytearray(base)
        bx, by = (i * 7) % (width - block), (i * 3) % (height - block)
        fill = bytes([(i * 5) & 255]) * block
        for r in range(block):
            off = (by + r) * width + bx
            luma[off:off + block] = fill
        frame = av.VideoFrame(width, height, "yuv420p")
        frame.planes[0].update(bytes(luma))
        frame.planes[1].update(chroma)
        frame.planes[2].update(chroma)
        frame.pts = i
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    tmp.rename(path)


def ensure_videos(folder: Path, minutes: int) -> dict[str, Path]:
    wanted = {
        "dense": (f"dense_{minutes}m_720p.mp4", minutes * 60, 1280, 720),
        "dense2x": (f"dense_{2 * minutes}m_720p.mp4", 2 * minutes * 60, 1280, 720),
        "latency": ("latency_60s_480p.mp4", 60, 640, 480),
    }
    out = {}
    for key, (name, seconds, width, height) in wanted.items():
        path = folder / name
        if not path.exists():
            started = time.perf_counter()
            make_video(path, seconds, width, height)
            print(f"generated {name} in {time.perf_counter() - started:.1f}s", flush=True)
        out[key] = path
    return out


# --------------------------------------------------------------------------- children

TRIVIAL_ADAPTER = """
def create_evaluator(config):
    return Trivial()

class Trivial:
    def evaluate(self, sample, target):
        return {"ok": True}
"""

SLEEPY_ADAPTER = """
import asyncio

def create_evaluator(config):
    return Sleepy()

class Sleepy:
    async def evaluate(self, sample, target):
        await asyncio.sleep(0.05)
        return {"ok": True}
"""


def write_eval(folder: Path, video: Path, targets: dict[str, str], adapter: str, every: str) -> Path:
    cases = folder / "cases"
    cases.mkdir(parents=True)
    (cases / video.name).symlink_to(video)
    body = "".join(f"  {name}:\n    samples:\n{textwrap.indent(samples, '    ')}"
                   for name, samples in targets.items())
    (cases / "bench.yaml").write_text(f"video: {video.name}\nsampling:\n  every_s: {every}\n"
                                      f"targets:\n{body}")
    (folder / "adapter.py").write_text(adapter)
    return folder


def child_engine(scenario: str, video: Path, seconds: int) -> float:
    import importlib
    import pkgutil

    import av  # noqa: F401  (imports are start-up, not work: the baselines pay them untimed too)

    import glasskit_eval
    from glasskit_eval.cli import main

    for module in pkgutil.walk_packages(glasskit_eval.__path__, "glasskit_eval."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    with tempfile.TemporaryDirectory() as tmp:
        if scenario in ("dense", "dense5", "densetime"):
            samples = f"- range: [0, {seconds}]\n  field: ok\n  expect: true\n"
            names = "abcde" if scenario == "dense5" else "ab"
            eval_dir = write_eval(Path(tmp), video, {name: samples for name in names}, TRIVIAL_ADAPTER, "0.5")
            argv = ["run", "--eval-dir", str(eval_dir)]
            if scenario == "densetime":
                argv += ["--order", "time"]
        elif scenario == "sparse":
            times = ", ".join(str(t) for t in sparse_times(seconds))
            samples = f"- at: [{times}]\n  field: ok\n  expect: true\n"
            eval_dir = write_eval(Path(tmp), video, {"a": samples}, TRIVIAL_ADAPTER, "0.5")
            argv = ["run", "--eval-dir", str(eval_dir)]
        else:
            samples = f"- range: [0, {seconds}]\n  field: ok\n  expect: true\n"
            eval_dir = write_eval(Path(tmp), video, {"a": samples}, SLEEPY_ADAPTER, "0.5")
            argv = ["run", "--eval-dir", str(eval_dir), "--concurrency", "8"]
        import io

        out = io.StringIO()
        started = time.perf_counter()
        code = main(argv, out=out, err=out)
        elapsed = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"engine run failed ({code}):\n{out.getvalue()}")
        return elapsed


def sparse_times(seconds: int) -> list[str]:
    return [f"{seconds - 10 + 2 * i + 0.25:.2f}" for i in range(5)]


def dense_times(seconds: int) -> list[Fraction]:
    return [Fraction(i, 2) for i in range(2 * seconds)]


def nearest_indices(times: list[Fraction], wanted: list[Fraction]) -> list[int]:
    import bisect

    out = []
    for want in wanted:
        i = bisect.bisect_left(times, want)
        if i >= len(times):
            out.append(len(times) - 1)
        elif i == 0:
            out.append(0)
        else:
            out.append(i - 1 if want - times[i - 1] <= times[i] - want else i)
    return out


def child_baseline_dense(video: Path, seconds: int, threads: str) -> float:
    """Raw PyAV: one sequential decode, the needed frames converted to RGB PIL images."""
    import av

    started = time.perf_counter()
    container = av.open(str(video))
    stream = container.streams.video[0]
    if threads != "default":
        stream.thread_type = threads
    wanted = set(range(0, seconds * FPS, FPS // 2))  # every 0.5 s of a 30 fps video
    for index, frame in enumerate(container.decode(stream)):
        if index in wanted:
            frame.to_image().close()
    container.close()
    return time.perf_counter() - started


def child_baseline_sparse(video: Path, seconds: int) -> float:
    """Raw PyAV: per sample, seek to the keyframe before it and decode forward."""
    import av

    started = time.perf_counter()
    container = av.open(str(video))
    stream = container.streams.video[0]
    for text in sparse_times(seconds):
        target = int(Fraction(text) / stream.time_base)
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
    return time.perf_counter() - started


def child_baseline_latency(video: Path, seconds: int) -> float:
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

    started = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - started


def child(args: argparse.Namespace) -> None:
    video = Path(args.video)
    seconds = args.seconds
    kind = args.child
    if kind.startswith("engine-"):
        elapsed = child_engine(kind.removeprefix("engine-"), video, seconds)
    elif kind == "base-dense":
        elapsed = child_baseline_dense(video, seconds, "default")
    elif kind == "base-dense-auto":
        elapsed = child_baseline_dense(video, seconds, "AUTO")
    elif kind == "base-sparse":
        elapsed = child_baseline_sparse(video, seconds)
    elif kind == "base-latency":
        elapsed = child_baseline_latency(video, seconds)
    else:
        raise SystemExit(f"unknown child {kind}")
    print(json.dumps({"elapsed": elapsed}))


# --------------------------------------------------------------------------- parent


def run_child(kind: str, video: Path, seconds: int) -> tuple[float, float]:
    """(elapsed seconds, peak RSS in MB) of one child run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, "--video", str(video),
                             "--seconds", str(seconds)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed with exit code {proc.returncode}")
    CPU_SECONDS.setdefault(kind, []).append(usage.ru_utime + usage.ru_stime)
    return json.loads(output)["elapsed"], usage.ru_maxrss / 1024


#: Per child kind, the CPU seconds (user + system) of each run, start-up included: steadier
#: than wall time when other work shares the machine.
CPU_SECONDS: dict[str, list[float]] = {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="folder for the generated videos (reused)")
    parser.add_argument("--only", help="comma-separated scenarios to run (default: all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--video", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        videos = ensure_videos(folder, args.minutes)
        seconds = args.minutes * 60
        runs: list[tuple[str, str, Path, int]] = [
            ("dense", "engine-dense", videos["dense"], seconds),
            ("dense", "base-dense", videos["dense"], seconds),
            ("dense", "base-dense-auto", videos["dense"], seconds),
            ("dense-time", "engine-densetime", videos["dense"], seconds),
            ("dense-5t", "engine-dense5", videos["dense"], seconds),
            ("dense-2x", "engine-dense", videos["dense2x"], 2 * seconds),
            ("dense-2x", "base-dense", videos["dense2x"], 2 * seconds),
            ("sparse-tail", "engine-sparse", videos["dense"], seconds),
            ("sparse-tail", "base-sparse", videos["dense"], seconds),
            ("latency", "engine-latency", videos["latency"], 60),
            ("latency", "base-latency", videos["latency"], 60),
        ]
        if args.only:
            chosen = set(args.only.split(","))
            runs = [run for run in runs if run[0] in chosen]
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for round_no in range(1, args.rounds + 1):
            for scenario, kind, video, secs in runs:
                elapsed, rss = run_child(kind, video, secs)
                samples.setdefault((scenario, kind), []).append((elapsed, rss))
                print(f"round {round_no}: {scenario:12s} {kind:16s} {elapsed:7.3f}s {rss:7.0f} MB "
                      f"cpu {CPU_SECONDS[kind][-1]:7.2f}s", flush=True)
    med = {key: (statistics.median(e for e, _ in vals), max(r for _, r in vals))
           for key, vals in samples.items()}
    print(f"\nmedians of {args.rounds} rounds (peak RSS is the max over rounds)")
    for (scenario, kind), (elapsed, rss) in med.items():
        print(f"  {scenario:12s} {kind:16s} {elapsed:7.3f}s  peak RSS {rss:6.0f} MB")
    print("\nratios (engine / baseline)")
    if args.only:
        for label in ("dense", "dense-time", "dense-5t"):
            key = ("dense", "engine-dense") if label == "dense" else (label, "engine-" + label.replace("-", "")
                                                                       .replace("5t", "5"))
            if key in med and ("dense", "base-dense") in med:
                elapsed, rss = med[key]
                print(f"  {label + ':':12s} {elapsed / med[('dense', 'base-dense')][0]:.2f}x raw PyAV "
                      f"(default threads); peak RSS {rss:.0f} MB")
        return 0
    dense_e = med[("dense", "engine-dense")][0]
    dense2_e = med[("dense-2x", "engine-dense")][0]
    print(f"  dense:       {dense_e / med[('dense', 'base-dense')][0]:.2f}x raw PyAV (default threads), "
          f"{dense_e / med[('dense', 'base-dense-auto')][0]:.2f}x raw PyAV (frame threads); "
          f"peak RSS {med[('dense', 'engine-dense')][1]:.0f} MB")
    for label, key in (("dense-time", "engine-densetime"), ("dense-5t", "engine-dense5")):
        elapsed, rss = med[(label, key)]
        print(f"  {label + ':':12s} {elapsed / med[('dense', 'base-dense')][0]:.2f}x raw PyAV (default threads), "
              f"{elapsed / med[('dense', 'base-dense-auto')][0]:.2f}x (frame threads); peak RSS {rss:.0f} MB")
    print(f"  dense-2x:    {dense2_e / med[('dense-2x', 'base-dense')][0]:.2f}x raw PyAV; "
          f"time per sample {dense2_e / dense_e / 2:.2f}x the 1x video's, "
          f"peak RSS {med[('dense-2x', 'engine-dense')][1]:.0f} MB "
          f"({med[('dense-2x', 'engine-dense')][1] / med[('dense', 'engine-dense')][1]:.2f}x)")
    print(f"  sparse-tail: {med[('sparse-tail', 'engine-sparse')][0] / med[('sparse-tail', 'base-sparse')][0]:.2f}x "
          "the seek baseline")
    ideal = 120 * 0.05 / 8
    lat = med[("latency", "engine-latency")][0]
    print(f"  latency:     {lat / med[('latency', 'base-latency')][0]:.2f}x the pipelined baseline "
          f"({lat:.2f}s; ideal {ideal:.2f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
