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
and CPU seconds (all threads); the parent reads each child's peak RSS from ``wait4``.

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
GOP = 2 * FPS
X264 = {"preset": "veryfast", "crf": "23", "g": str(GOP), "keyint_min": str(GOP), "sc_threshold": "0"}


# --------------------------------------------------------------------------- videos


def make_video(path: Path, seconds: int, width: int, height: int, *, textured: bool) -> None:
    """x264 veryfast CRF 23 (B-frames on, x264's default), 2 s GOP, deterministic content."""
    import av
    from PIL import Image, ImageFilter

    tmp = path.with_suffix(".tmp.mp4")
    container = av.open(str(tmp), "w")
    stream = container.add_stream("libx264", rate=FPS)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.options = dict(X264)
    if textured:
        noise = Image.effect_noise((width + 512, height + 256), 64).filter(ImageFilter.GaussianBlur(1))
        texture = Image.merge("RGB", (noise, noise.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
                                      noise.transpose(Image.Transpose.FLIP_TOP_BOTTOM)))
    row = bytes((x * 255 // width) & 255 for x in range(width))
    chroma = bytes([128]) * (width * height // 4)
    block = 32
    for i in range(seconds * FPS):
        if textured:
            x, y = (i * 3) % 512, (i * 2) % 256
            frame = av.VideoFrame.from_image(texture.crop((x, y, x + width, y + height)))
        else:
            luma = bytearray(row * height)
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


def ensure_videos(folder: Path, minutes: int, long_minutes: int,
                  needed: set[str]) -> dict[str, tuple[Path, int]]:
    wanted = {
        "main": (f"bframes_{minutes}m_720p.mp4", minutes * 60, 1280, 720, True),
        "latency": ("bframes_60s_480p.mp4", 60, 640, 480, True),
    }
    if long_minutes:
        wanted["long"] = (f"bframes_{long_minutes}m_1080p.mp4", long_minutes * 60, 1920, 1080, False)
    out = {}
    for key, (name, seconds, width, height, textured) in wanted.items():
        if key not in needed:
            continue
        path = folder / name
        if not path.exists():
            started = time.perf_counter()
            make_video(path, seconds, width, height, textured=textured)
            print(f"generated {name} ({path.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - started:.0f}s", flush=True)
        out[key] = (path, seconds)
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


def sparse_tail_times(seconds: int) -> list[Fraction]:
    return [Fraction(seconds - 10) + 2 * i + Fraction(1, 4) for i in range(5)]


def sparse_spread_times(seconds: int) -> list[Fraction]:
    # 20 samples, none on a keyframe: a fixed, irregular offset into each twentieth.
    return [Fraction(seconds * i, 20) + Fraction(7 + (i * 13) % 50, FPS) for i in range(20)]


def write_eval(folder: Path, video: Path, targets: dict[str, str], adapter: str) -> Path:
    cases = folder / "cases"
    cases.mkdir(parents=True)
    (cases / video.name).symlink_to(video)
    body = "".join(f"  {name}:\n    samples:\n{textwrap.indent(samples, '    ')}"
                   for name, samples in targets.items())
    (cases / "bench.yaml").write_text(f"video: {video.name}\nsampling:\n  every_s: 0.5\ntargets:\n{body}")
    (folder / "adapter.py").write_text(adapter)
    return folder


def _usage() -> tuple[float, float]:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), r.ru_utime + r.ru_stime


def child_engine(scenario: str, video: Path, seconds: int) -> tuple[float, float]:
    import importlib
    import io
    import pkgutil

    import av  # noqa: F401  (imports are start-up, not work: the baselines pay them untimed too)

    import glasskit_eval
    from glasskit_eval.cli import main

    for module in pkgutil.walk_packages(glasskit_eval.__path__, "glasskit_eval."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["run", "--eval-dir", tmp]
        if scenario.startswith("dense-"):
            samples = f"- range: [0, {seconds}]\n  field: ok\n  expect: true\n"
            count = int(scenario.removeprefix("dense-").removesuffix("-time"))
            if scenario.endswith("-time"):
                argv += ["--order", "time"]  # targets interleaved in time: no frame store
            write_eval(Path(tmp), video, {f"t{i}": samples for i in range(count)}, TRIVIAL_ADAPTER)
        elif scenario in ("sparse-tail", "sparse-spread"):
            times = sparse_tail_times(seconds) if scenario == "sparse-tail" else sparse_spread_times(seconds)
            listed = ", ".join(str(float(t)) for t in times)
            write_eval(Path(tmp), video, {"a": f"- at: [{listed}]\n  field: ok\n  expect: true\n"},
                       TRIVIAL_ADAPTER)
        elif scenario == "latency":
            samples = f"- range: [0, {seconds}]\n  field: ok\n  expect: true\n"
            write_eval(Path(tmp), video, {"a": samples}, SLEEPY_ADAPTER)
            argv += ["--concurrency", "8"]
        else:
            raise SystemExit(f"unknown scenario {scenario}")
        out = io.StringIO()
        wall, cpu = _usage()
        code = main(argv, out=out, err=out)
        wall2, cpu2 = _usage()
        if code != 0:
            raise SystemExit(f"engine run failed ({code}):\n{out.getvalue()}")
        return wall2 - wall, cpu2 - cpu


def child_baseline_dense(video: Path, seconds: int) -> tuple[float, float]:
    """One PyAV decoder with frame threads; the frames every 0.5 s converted to RGB."""
    import av

    wall, cpu = _usage()
    container = av.open(str(video))
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    wanted = set(range(0, seconds * FPS, FPS // 2))
    for index, frame in enumerate(container.decode(stream)):
        if index in wanted:
            frame.to_image().close()
    container.close()
    wall2, cpu2 = _usage()
    return wall2 - wall, cpu2 - cpu


def child_baseline_sparse(video: Path, times: list[Fraction]) -> tuple[float, float]:
    """Per sample: seek to the keyframe before it, decode to its nearest frame, convert to RGB."""
    import av

    wall, cpu = _usage()
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
    wall2, cpu2 = _usage()
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

    wall, cpu = _usage()
    asyncio.run(run())
    wall2, cpu2 = _usage()
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
    print(json.dumps({"wall": wall, "cpu": cpu, "hwm_kib": _peak_rss_kib()}))


def _peak_rss_kib() -> int | None:
    """This process's own peak RSS (VmHWM): a forked child's ``ru_maxrss`` starts at its parent's
    RSS (exec keeps the high-water mark of the copied address space), and the parent may have just
    generated the videos."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


# --------------------------------------------------------------------------- parent


def run_child(kind: str, video: Path, seconds: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one child run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, "--video", str(video),
                             "--seconds", str(seconds)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} failed with exit code {proc.returncode}")
    result = json.loads(output)
    return result["wall"], result["cpu"], (result.get("hwm_kib") or usage.ru_maxrss) / 1024


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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--long-minutes", type=int, default=60)
    parser.add_argument("--keep", type=Path, help="folder for the generated videos (reused)")
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), help="run these scenarios")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--video", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
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
        samples: dict[tuple[str, Path], list[tuple[float, float, float]]] = {}
        for round_no in range(1, args.rounds + 1):
            for kind, path, seconds in runs:
                wall, cpu, rss = run_child(kind, path, seconds)
                samples.setdefault((kind, path), []).append((wall, cpu, rss))
                print(f"round {round_no}: {path.name:26s} {kind:22s} wall {wall:8.3f}s  cpu {cpu:8.3f}s  "
                      f"peak RSS {rss:5.0f} MiB", flush=True)
    med = {key: (statistics.median(w for w, _c, _r in vals), statistics.median(c for _w, c, _r in vals),
                 max(r for _w, _c, r in vals)) for key, vals in samples.items()}
    print(f"\nmedians of {args.rounds} rounds (peak RSS: the largest of the rounds)")
    print(f"  {'scenario':20s} {'engine wall':>12s} {'base wall':>10s} {'wall ratio':>10s} "
          f"{'engine cpu':>11s} {'base cpu':>9s} {'cpu ratio':>9s} {'engine RSS':>11s} {'base RSS':>9s}")
    for name in chosen:
        key, engine, base = SCENARIOS[name]
        path = videos[key][0]
        ew, ec, er = med[(engine, path)]
        bw, bc, br = med[(base, path)]
        print(f"  {name:20s} {ew:11.3f}s {bw:9.3f}s {ew / bw:9.2f}x {ec:10.3f}s {bc:8.3f}s "
              f"{ec / bc:8.2f}x {er:7.0f} MiB {br:5.0f} MiB")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
