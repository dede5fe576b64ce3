"""What the progress display costs: the dense scenario with it on a terminal, in a log, and off.

    python benchmarks/bench_progress.py [--minutes 3] [--rounds 3] [--keep DIR] [--check]

The dense scenario of ``bench_frames.py`` (an N-minute 1280x720 30 fps video, 2 targets
sampled every 0.5 s, a trivial adapter), run in this process through ``main`` three ways:

* ``off``: the progress display replaced by one that does nothing (the baseline);
* ``terminal``: stderr is a pseudo-terminal (drained by a thread), so the live line is drawn;
* ``log``: stderr is a regular file, so heartbeats and streamed failures are what runs.

Rounds rotate the order of the variants so machine noise hits each alike. The target is a
cost below 1% of a trivial-adapter run. Wall-time ratios are printed (medians, and the
fastest round of each variant, the least disturbed by other load), but on a loaded machine
they vary by more than the display costs; so the terminal variant also adds up the CPU
time spent inside the display's methods and prints it as a share of the run's CPU time,
which is what ``--check`` tests.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (
    TRIVIAL_ADAPTER,
    importable,
    interleave,
    main_video,
    print_pairs,
    range_samples,
    workdir,
    write_eval,
)

importable()

from glasskit_eval.cli import main as cli_main  # noqa: E402
from glasskit_eval.reports import console  # noqa: E402
from glasskit_eval.reports.progress import ProgressDisplay  # noqa: E402

TARGET = 1.01
#: (CPU seconds inside the display, CPU seconds of the whole run) of each terminal run.
CPU: list[tuple[float, float]] = []
VARIANTS = ("off", "terminal", "log")


class NoProgress(ProgressDisplay):
    """The display with every event a no-op: what a run costs without progress."""

    def case_started(self, *args: Any) -> None: ...

    def result(self, *args: Any) -> None: ...

    def tick(self) -> None: ...

    def case_finished(self) -> None: ...

    def write_above(self, text: str) -> None:
        print(text, file=self.out)


class TimedProgress(ProgressDisplay):
    """The real display, adding up the CPU time (of the calling thread) spent inside it.

    Wall times on a loaded machine vary by more than the whole display costs; the CPU
    time spent in its methods, against the run's CPU time, is the steadier measure.
    """

    spent = 0.0

    def case_started(self, *args: Any) -> None:
        started = time.thread_time()
        super().case_started(*args)
        TimedProgress.spent += time.thread_time() - started

    def result(self, *args: Any) -> None:
        started = time.thread_time()
        super().result(*args)
        TimedProgress.spent += time.thread_time() - started

    def tick(self) -> None:
        started = time.thread_time()
        super().tick()
        TimedProgress.spent += time.thread_time() - started

    def case_finished(self) -> None:
        started = time.thread_time()
        super().case_finished()
        TimedProgress.spent += time.thread_time() - started


def one_run(eval_dir: Path, variant: str, scratch: Path) -> tuple[float, int, int]:
    """Wall time of one run, the bytes written to stderr, and the heartbeat lines printed."""
    out = io.StringIO()
    argv = ["run", "--eval-dir", str(eval_dir), "--keep-checkpoints", "1"]
    if variant == "terminal":
        import pty

        master, slave = pty.openpty()
        err = os.fdopen(slave, "w", encoding="utf-8")
        written = [0]

        def drain() -> None:
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                written[0] += len(chunk)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        if os.environ.get("TERM", "dumb") == "dumb":
            os.environ["TERM"] = "xterm"  # the live line is drawn only on a capable terminal
        original = console.ProgressDisplay
        console.ProgressDisplay = TimedProgress  # type: ignore[misc]
        try:
            started, cpu = time.perf_counter(), time.process_time()
            code = cli_main(argv, out=out, err=err)
            elapsed = time.perf_counter() - started
            CPU.append((TimedProgress.spent, time.process_time() - cpu))
            TimedProgress.spent = 0.0
        finally:
            console.ProgressDisplay = original  # type: ignore[misc]
            err.close()
            reader.join(timeout=5)
            os.close(master)
        size = written[0]
    else:
        log = scratch / f"{variant}.log"
        original = console.ProgressDisplay
        if variant == "off":
            console.ProgressDisplay = NoProgress  # type: ignore[misc]
        try:
            with log.open("w", encoding="utf-8") as err:
                started = time.perf_counter()
                code = cli_main(argv, out=out, err=err)
                elapsed = time.perf_counter() - started
        finally:
            console.ProgressDisplay = original  # type: ignore[misc]
        size = log.stat().st_size
    if code != 0:
        raise SystemExit(f"{variant} run failed ({code}):\n{out.getvalue()}")
    beats = sum(1 for line in out.getvalue().splitlines() if line.startswith("[") and " samples, " in line)
    return elapsed, size, beats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=3, help="length of the dense video (default: 3)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="folder for the generated video (reused)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the display takes 1%% or more of the run's CPU time")
    args = parser.parse_args(argv)
    with workdir(args.keep) as (folder, scratch):
        video = main_video(folder, args.minutes * 60)
        samples = range_samples(args.minutes * 60)
        eval_dir = write_eval(scratch / "evaldir", video, {"a": samples, "b": samples}, TRIVIAL_ADAPTER)
        one_run(eval_dir, "off", scratch)  # warm-up: imports, page cache, thread pools
        results = interleave(args.rounds, list(VARIANTS), lambda variant: dict(
            zip(("wall", "size", "beats"), one_run(eval_dir, variant, scratch))), rotate=True)
    times = {variant: [r["wall"] for r in runs] for variant, runs in results.items()}
    sizes = {variant: runs[-1]["size"] for variant, runs in results.items()}
    beats = {variant: runs[-1]["beats"] for variant, runs in results.items()}
    samples_count = args.minutes * 60 * 2 * 2
    off = statistics.median(times["off"])
    rows: list[tuple[str, Any]] = [("samples", samples_count), ("rounds", args.rounds)]
    for variant in VARIANTS:
        rows.append((f"{variant} (median / best s)",
                     f"{statistics.median(times[variant]):.3f} / {min(times[variant]):.3f}"))
    for variant in ("terminal", "log"):
        rows.append((f"{variant}/off, medians / bests",
                     f"{statistics.median(times[variant]) / off:.4f} / "
                     f"{min(times[variant]) / min(times['off']):.4f}"))
    shares = [inside / whole for inside, whole in CPU]
    rows.append(("terminal: display CPU / run CPU (median)", f"{statistics.median(shares) * 100:.3f}%"))
    rows.append(("live-line bytes on the terminal", sizes["terminal"]))
    rows.append(("heartbeat lines in the log", beats["log"]))
    print_pairs(rows)
    return 1 if args.check and statistics.median(shares) > TARGET - 1 else 0


if __name__ == "__main__":
    raise SystemExit(main())
