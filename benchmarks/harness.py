"""What every benchmark script shares: real-encoder videos, child processes that time their own work,
interleaved rounds, medians, and the printed table with ratios.

Videos are encoded the way cameras and encoders ship them (x264 ``veryfast``, CRF 23, a keyframe
every 2 s, B-frames, 30 fps), in a child process: Linux carries a process's peak RSS over fork and
exec, so encoding in the parent would raise every measured child's peak to the encoder's.

A measured child is the calling script run again with hidden options (``child_options``); it times
its work with ``usage`` (interpreter start-up and imports excluded, on both sides) and prints its
figures with ``report``, which adds its own peak RSS (VmHWM). ``run_child`` starts it, reads the
figures and adds ``rss`` in MiB. ``interleave`` runs every child once per round, in order (or
rotated, so none always goes first), so a scenario and its baseline see the same machine; scripts
that measure inside one process hand it ``timed`` or ``timed_cli`` instead of ``run_child``.
``ratio_table``, ``print_table`` and ``print_pairs`` print the medians.

Run ``python3 benchmarks/harness.py --make-video PATH SECONDS WIDTH HEIGHT textured|plain`` to
encode one video by hand.
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
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
FPS = 30
GOP = 2 * FPS
X264 = {"preset": "veryfast", "crf": "23", "g": str(GOP), "keyint_min": str(GOP), "sc_threshold": "0"}

Figures = dict[str, Any]
K = TypeVar("K")


def importable(*, tests: bool = False) -> None:
    """Put the project (and its tests' helper modules) first on ``sys.path``."""
    for path in ([ROOT / "tests"] if tests else []) + [ROOT, BENCHMARKS]:
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


# --------------------------------------------------------------------------- videos


def make_video(path: Path, seconds: int, width: int = 1280, height: int = 720, *, textured: bool = True) -> None:
    """Encode in this process: textured content panning (about 2 MB/min at 720p), or a gradient with
    a moving block (low complexity, so an hour of 1080p takes minutes)."""
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


def video(folder: Path, name: str, seconds: int, width: int = 1280, height: int = 720, *,
          textured: bool = True) -> Path:
    """``folder/name``, encoded in a child process unless it is there already (``--keep`` folders)."""
    path = folder / name
    if not path.exists():
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--make-video", str(path), str(seconds), str(width), str(height),
                        "textured" if textured else "plain"], check=True, env=child_env())
        print(f"generated {name} ({path.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - started:.0f}s", flush=True)
    return path


def main_video(folder: Path, seconds: int) -> Path:
    """The textured 720p video, under the name bench_frames gives it, so one ``--keep`` folder serves all."""
    name = f"bframes_{seconds // 60}m_720p.mp4" if seconds % 60 == 0 else f"bframes_{seconds}s_720p.mp4"
    return video(folder, name, seconds)


@contextmanager
def workdir(keep: Path | None) -> Iterator[tuple[Path, Path]]:
    """(folder for the videos: ``keep`` when given, scratch folder); the scratch folder is removed."""
    with tempfile.TemporaryDirectory(prefix="glasskit-bench-") as tmp:
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder, Path(tmp)


# --------------------------------------------------------------------------- evals

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


def range_samples(end: float, start: float = 0) -> str:
    """A target's samples: every ``every_s`` over [start, end], all expecting ``ok: true``."""
    return f"- range: [{start:g}, {end:g}]\n  field: ok\n  expect: true\n"


def write_eval(folder: Path, video: Path, targets: dict[str, str], adapter: str, every_s: str = "0.5",
               defaults: str = "") -> Path:
    """An eval directory with one case on ``video`` (linked), its targets' sample lists, and the adapter."""
    cases = folder / "cases"
    cases.mkdir(parents=True)
    (cases / video.name).symlink_to(video)
    body = "".join(f"  {name}:\n    samples:\n{textwrap.indent(samples, '    ')}"
                   for name, samples in targets.items())
    (cases / "bench.yaml").write_text(f"video: {video.name}\nsampling:\n  every_s: {every_s}\n{defaults}"
                                      f"targets:\n{body}")
    (folder / "adapter.py").write_text(adapter)
    return folder


def write_case(folder: Path, video: Path, case: str, adapter: str) -> Path:
    """An eval directory with one case of the caller's own text."""
    (folder / "cases").mkdir(parents=True)
    (folder / "cases" / video.name).symlink_to(video)
    (folder / "cases" / "bench.yaml").write_text(case)
    (folder / "adapter.py").write_text(adapter)
    return folder


def calls_made(eval_dir: Path) -> int:
    """The adapter calls an adapter logged as numbers, one a line, in ``calls.log`` beside it."""
    log = eval_dir / "calls.log"
    return sum(int(n) for n in log.read_text().split()) if log.exists() else 0


# --------------------------------------------------------------------------- inside a child


def usage() -> tuple[float, float]:
    """(wall clock, CPU seconds of every thread so far); subtract two of them."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), r.ru_utime + r.ru_stime


def peak_rss_kib() -> int | None:
    """This process's own peak RSS (VmHWM): a forked child's ``ru_maxrss`` starts at its parent's
    RSS (exec keeps the high-water mark of the copied address space)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def load_engine() -> Callable[..., int]:
    """The CLI's ``main`` with av and every module imported: imports are start-up, not work (the
    baselines pay theirs untimed too)."""
    import importlib
    import pkgutil

    import av  # noqa: F401

    import glasskit_eval
    from glasskit_eval.cli import main

    for module in pkgutil.walk_packages(glasskit_eval.__path__, "glasskit_eval."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    return main


def timed_cli(argv: Sequence[str], ok: Sequence[int] = (0,)) -> tuple[float, float]:
    """(wall, CPU seconds) of one ``glasskit_eval`` command in this process; any other exit code ends
    the benchmark with the command's output."""
    from glasskit_eval.cli import main

    out = io.StringIO()
    wall, cpu = usage()
    code = main(list(argv), out=out, err=out)
    wall2, cpu2 = usage()
    if code not in ok:
        raise SystemExit(f"{argv[0]} failed ({code}):\n{out.getvalue()}")
    return wall2 - wall, cpu2 - cpu


def timed_calls(argv: Sequence[str], eval_dir: Path, ok: Sequence[int] = (0,)) -> tuple[float, int]:
    """(wall seconds, adapter calls logged) of one command, the call log emptied first."""
    (eval_dir / "calls.log").unlink(missing_ok=True)
    wall, _cpu = timed_cli(argv, ok)
    return wall, calls_made(eval_dir)


def bare_decode(video: Path, wanted: Callable[[int], bool] = lambda _index: True, *, as_engine: bool = False) -> int:
    """One PyAV decoder with frame threads over the whole video; the frames ``wanted`` by index
    converted to RGB (``as_engine``: one reformat into a buffer, as the frame engine does); how many."""
    import av
    from PIL import Image

    converted = 0
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for index, frame in enumerate(container.decode(stream)):
            if wanted(index):
                if as_engine:
                    plane = frame.reformat(format="rgb24").planes[0]
                    Image.frombuffer("RGB", (plane.width, plane.height), plane, "raw", "RGB",
                                     plane.line_size, 1).close()
                else:
                    frame.to_image().close()
                converted += 1
    return converted


def report(figures: Figures) -> None:
    """A child's last word: its figures and its own peak RSS, as one JSON line."""
    print(json.dumps({**figures, "hwm_kib": peak_rss_kib()}))


def options(parser: argparse.ArgumentParser, *, minutes: float, fractions: bool = False, minutes_help: str | None = None,
            scenarios: Sequence[str] = ()) -> None:
    """``--rounds``, ``--minutes`` (whole unless ``fractions``), ``--keep``, ``--only`` (when there are
    ``scenarios``), and the hidden child options."""
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--minutes", type=float if fractions else int, default=minutes, help=minutes_help)
    parser.add_argument("--keep", type=Path, help="folder for the generated videos (reused)")
    if scenarios:
        parser.add_argument("--only", nargs="+", choices=list(scenarios), help="run these scenarios")
    child_options(parser)


def child_options(parser: argparse.ArgumentParser) -> None:
    """The hidden options a script's child is started with (see ``run_child``)."""
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--video", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)


# --------------------------------------------------------------------------- the parent


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_child(script: str, kind: str, video: Path, seconds: int, *extra: str) -> Figures:
    """Run ``script --child kind --video V --seconds S``; its figures plus ``rss``, its peak RSS in MiB
    (the child's VmHWM, or ``wait4``'s when the child could not read it)."""
    proc = subprocess.Popen([sys.executable, script, "--child", kind, "--video", str(video),
                             "--seconds", str(seconds), *extra], stdout=subprocess.PIPE, env=child_env())
    assert proc.stdout is not None
    output = proc.stdout.read()
    _pid, status, rusage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{kind} failed with exit code {code}")
    figures: Figures = json.loads(output)
    figures["rss"] = (figures.pop("hwm_kib", None) or rusage.ru_maxrss) / 1024
    return figures


def interleave(rounds: int, runs: Sequence[K], measure: Callable[[K], Figures],
               line: Callable[[K, Figures], str] | None = None, *, rotate: bool = False) -> dict[K, list[Figures]]:
    """Every run once per round, in order (``rotate``: each round starts one run later, so none is
    always first); ``line`` describes one result, printed after ``round N:`` with the time the run
    took, start-up included."""
    results: dict[K, list[Figures]] = {run: [] for run in runs}
    for round_no in range(1, rounds + 1):
        shift = (round_no - 1) % len(runs) if rotate else 0
        for run in [*runs[shift:], *runs[:shift]]:
            started = time.perf_counter()
            figures = measure(run)
            results[run].append(figures)
            if line is not None:
                print(f"round {round_no}: {line(run, figures)}  ({time.perf_counter() - started:.1f}s with "
                      "start-up)", flush=True)
    return results


def timed(work: Callable[[], object]) -> Figures:
    """``wall`` and ``cpu`` seconds of one call in this process."""
    wall, cpu = usage()
    work()
    wall2, cpu2 = usage()
    return {"wall": wall2 - wall, "cpu": cpu2 - cpu}


def child_line(kind: str, figures: Figures) -> str:
    return f"{kind:22s} wall {figures['wall']:8.3f}s  cpu {figures['cpu']:8.3f}s  peak RSS {figures['rss']:5.0f} MiB"


def median(results: Sequence[Figures], key: str) -> float:
    return statistics.median(r[key] for r in results)


def peak(results: Sequence[Figures]) -> float:
    """The largest peak RSS of the rounds."""
    return max(r["rss"] for r in results)


def ratio(measured: float, reference: float) -> str:
    return f"{measured / reference:.2f}x" if reference else "-"


def print_table(header: Sequence[str], rows: Sequence[Sequence[object]], left: Sequence[int] = (0,)) -> None:
    """Columns as wide as their widest cell; the ``left`` ones left-aligned, the others right-aligned."""
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(len(header))]
    for row in cells:
        print("  " + " ".join(c.ljust(w) if i in left else c.rjust(w)
                              for i, (c, w) in enumerate(zip(row, widths))).rstrip())


def print_pairs(rows: Sequence[tuple[str, object]]) -> None:
    """Two columns: names padded to the longest, then values."""
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


def ratio_table(scenarios: Sequence[tuple[str, Sequence[Figures], Sequence[Figures]]]) -> None:
    """Medians of (name, engine runs, baseline runs): wall, CPU and their ratios, and peak RSS."""
    rounds = min(len(engine) for _n, engine, _b in scenarios) if scenarios else 0
    print(f"\nmedians of {rounds} rounds (peak RSS: the largest of the rounds)")
    rows = []
    for name, engine, base in scenarios:
        ew, bw, ec, bc = median(engine, "wall"), median(base, "wall"), median(engine, "cpu"), median(base, "cpu")
        rows.append([name, f"{ew:.3f}s", f"{bw:.3f}s", ratio(ew, bw), f"{ec:.3f}s", f"{bc:.3f}s", ratio(ec, bc),
                     f"{peak(engine):.0f} MiB", f"{peak(base):.0f} MiB"])
    print_table(["scenario", "engine wall", "base wall", "wall ratio", "engine cpu", "base cpu", "cpu ratio",
                 "engine RSS", "base RSS"], rows)


def load_average(when: str) -> None:
    cores = f" ({os.cpu_count()} cores)" if when == "at start" else ""
    print(f"load average {when}: {' '.join(f'{x:.2f}' for x in os.getloadavg())}{cores}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--make-video":
        make_video(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                   textured=sys.argv[6] == "textured")
    else:
        raise SystemExit(__doc__)
