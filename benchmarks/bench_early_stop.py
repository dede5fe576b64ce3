"""``run --early-stop``: how many calls it takes to decide, how often it decides wrong, and what block
order costs the decoder.

Parts (``--part``, default all):

- ``blocks``: decision efficiency against block length, by simulation of the statistics alone
  (2,400 samples every 0.1 s against a 0.90 gate; independent outcomes and failures in runs of
  ~20 samples): median share of samples evaluated before every gate is decided.
- ``cli``: the issue's acceptance figures through the real CLI (``run_cli`` in process) with a
  Python adapter replaying pre-drawn outcomes on a small synthetic video: calls at 0.97 and 0.80,
  agreement with the full population's verdict when failures come in runs, wrong decisions at
  0.895 and 0.905.
- ``cached``: the dense scenario with ``--cache``: a cold full run fills the cache, then a warm
  ``--early-stop`` run reads every block ahead (calls, frames decoded, wall time), beside a warm
  full run and an early stop without the cache.
- ``decode``: decoded frames per evaluated sample, block order against time order, from the frame
  engine's own cost model (``video.strategy.plan``) on a 720p 30 fps video with a 2 s GOP, and the
  wall time of both decodes and of a full and an early-stopped run of the dense scenario.

Timings are wall times on whatever machine runs this (shared machines swing by 2x).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import importable, video

importable(tests=True)

from earlystopkit import burst_outcomes, calls, iid_outcomes, make_eval  # noqa: E402
from earlystopkit import make_video as small_video  # noqa: E402
from evalkit import read_json, run_cli  # noqa: E402

from glasskit_eval.statistics import anytime  # noqa: E402

PLANNED = 2400
BLOCKS_S = (0.2, 0.5, 1.0, 2.0, 5.0)


def decide(outcomes: list[int], block: int, rng: random.Random, minimum: float = 0.9) -> tuple[str | None, int]:
    units = [outcomes[i:i + block] for i in range(0, len(outcomes), block)]
    rng.shuffle(units)
    state = anytime.start(len(outcomes), len(units), block, 0.05)
    for unit in units:
        state = anytime.observe(state, sum(unit), len(unit))
        verdict = state.verdict(minimum)
        if verdict is not None:
            return verdict, state.seen_samples
    return None, len(outcomes)


def part_blocks(seeds: int) -> None:
    print("## Decision efficiency against block length (median share of 2,400 samples evaluated, "
          f"{seeds} seeds, gate 0.90, alpha 0.05)\n")
    print("| block | 0.97 iid | 0.97 runs of ~20 | 0.80 iid | 0.80 runs of ~20 | 0.93 iid |")
    print("|---|---|---|---|---|---|")
    for block_s in BLOCKS_S:
        size = round(block_s * 10)
        cells = []
        for rate, bursty in ((0.97, False), (0.97, True), (0.80, False), (0.80, True), (0.93, False)):
            used = []
            for seed in range(seeds):
                rng = random.Random(seed)
                outcomes = burst_outcomes(rng, PLANNED, rate) if bursty else iid_outcomes(rng, PLANNED, rate)
                used.append(decide(outcomes, size, rng)[1] / PLANNED)
            cells.append(f"{statistics.median(used):.1%}")
        print(f"| {block_s:g} s | " + " | ".join(cells) + " |")
    print()


def _cli_run(root: Path, video: Path, outcomes: list[int], block: str, seed: int) -> tuple[int, dict]:
    eval_dir = make_eval(root, video, outcomes)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--early-stop", "--early-stop-block", block,
                              "--seed", str(seed), "--output-json", root / "r.json")
    if code not in (0, 1):
        raise SystemExit(err)
    return code, read_json(root / "r.json")


def part_cli(seeds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        video = small_video(base / "long.mp4", PLANNED // 10)
        counter = iter(range(1 << 30))

        def fresh() -> Path:
            root = base / f"run{next(counter)}"
            root.mkdir()
            return root

        print(f"## Through the CLI: 2,400 samples every 0.1 s, 0.5 s blocks, {seeds} seeds\n")
        print("| true rate | gate | verdicts | median calls | max calls |")
        print("|---|---|---|---|---|")
        for rate in (0.97, 0.80):
            verdicts, made = [], []
            for seed in range(seeds):
                code, report = _cli_run(fresh(), video, iid_outcomes(random.Random(100 + seed), PLANNED, rate),
                                        "0.5", seed)
                verdicts.append("PASS" if code == 0 else "FAIL")
                made.append(report["early_stop"]["samples_evaluated"] / PLANNED)
            tally = ", ".join(f"{verdicts.count(v)} {v}" for v in ("PASS", "FAIL") if verdicts.count(v))
            print(f"| {rate} | 0.90 | {tally} | {statistics.median(made):.1%} | {max(made):.1%} |")
        print()
        print(f"## Failures in runs of ~20 samples, random block order ({seeds} seeds each)\n")
        print("| true rate | block | early verdict = full verdict | decided early | median calls |")
        print("|---|---|---|---|---|")
        for rate in (0.85, 0.88, 0.895, 0.905, 0.92, 0.95):
            for block in ("5", "0.5"):
                right = early = 0
                made = []
                for seed in range(seeds):
                    outcomes = burst_outcomes(random.Random(200 + seed), PLANNED, rate)
                    truth = 0 if sum(outcomes) >= 0.9 * PLANNED - 1e-9 else 1
                    code, report = _cli_run(fresh(), video, outcomes, block, seed)
                    right += code == truth
                    early += report["early_stop"]["samples_evaluated"] < PLANNED
                    made.append(report["early_stop"]["samples_evaluated"] / PLANNED)
                print(f"| {rate} | {block} s | {right}/{seeds} | {early}/{seeds} | {statistics.median(made):.1%} |")
        print()
        # Same seed, same order.
        first, second = fresh(), fresh()
        outcomes = iid_outcomes(random.Random(1), PLANNED, 0.97)
        _cli_run(first, video, outcomes, "0.5", 0)
        _cli_run(second, video, outcomes, "0.5", 0)
        print(f"Same seed twice, identical call logs: {calls(first) == calls(second)}\n")


def _big_video(folder: Path, seconds: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return video(folder, "dense_720p_4min.mp4", seconds, textured=False)


def part_decode(seeds: int, cache: Path) -> None:
    from glasskit_eval.video.frames import available_cores, decode_at, kept_open
    from glasskit_eval.video.frametable import frame_table
    from glasskit_eval.video.strategy import plan

    cache.mkdir(parents=True, exist_ok=True)
    video = _big_video(cache, PLANNED // 10)
    table = frame_table(video)
    times = [Fraction(i, 10) for i in range(PLANNED)]

    def frames_for(wanted: list[Fraction]) -> int:
        needed = sorted({table.select(t) for t in wanted})
        return plan(table.keyframes, needed, cores=1, frame_pixels=table.width * table.height).cost

    full = frames_for(times)

    def timed(pieces: list[list[Fraction]], keep: bool) -> tuple[float, float]:
        """(wall s, CPU s) decoding ``pieces`` one decode each (one decoder thread), decoder kept or not."""
        started, cpu = time.perf_counter(), time.process_time()
        with kept_open([video] if keep else []):
            for piece in pieces:
                for _t, frame in decode_at(video, piece, workers=1):
                    frame.image.close()
        return time.perf_counter() - started, time.process_time() - cpu

    every_wall, every_cpu = timed([times], keep=False)
    print("## Decoding: 720p, 30 fps, 2 s GOP, 2,400 samples every 0.1 s\n")
    print(f"Time order, every sample: {full:,} decoded frames ({full / PLANNED:.2f} per sample), "
          f"{every_wall:.2f} s wall, {every_cpu:.2f} s CPU ({every_cpu / PLANNED * 1000:.2f} ms CPU per sample)\n")
    print("| block | evaluated (0.97, median) | frames in block order | per sample | time order, same samples "
          "| ratio | CPU s: block order, decoder kept (per sample vs every sample) | block order, a decoder "
          "per block | time order, same samples | kept / time order |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for block_s in BLOCKS_S:
        size = round(block_s * 10)
        rng = random.Random(0)
        outcomes = iid_outcomes(rng, PLANNED, 0.97)
        runs = sorted(decide(outcomes, size, random.Random(s))[1] for s in range(seeds))
        evaluated = runs[len(runs) // 2]
        blocks = [times[i:i + size] for i in range(0, PLANNED, size)]
        random.Random(0).shuffle(blocks)
        chosen: list[list[Fraction]] = []
        count = 0
        for block in blocks:
            if count >= evaluated:
                break
            chosen.append(block)
            count += len(block)
        in_blocks = sum(frames_for(b) for b in chosen)
        flat = sorted(t for b in chosen for t in b)
        in_time = frames_for(flat)
        # Alternating rounds, the median of each: the machine's load moves under one measurement.
        kept_cpu, fresh_cpu, time_cpu = [], [], []
        for _round in range(3):
            kept_cpu.append(timed(chosen, keep=True)[1])
            fresh_cpu.append(timed(chosen, keep=False)[1])
            time_cpu.append(timed([flat], keep=False)[1])
        kept, fresh, in_order = (sorted(c)[1] for c in (kept_cpu, fresh_cpu, time_cpu))
        per_sample = (kept / count) / (every_cpu / PLANNED)
        print(f"| {block_s:g} s | {count:,} | {in_blocks:,} | {in_blocks / count:.2f} | {in_time:,} | "
              f"{in_blocks / in_time:.2f}x | {kept:.2f} ({per_sample:.2f}x) | {fresh:.2f} | {in_order:.2f} | "
              f"{kept / in_order:.2f}x |")
    print(f"\n(cores available: {available_cores()}; wall times on one decoder thread)\n")


def part_dense(cache: Path) -> None:
    video = _big_video(cache, PLANNED // 10)
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = iid_outcomes(random.Random(0), PLANNED, 0.97)
        print("## Dense scenario: 720p, 2,400 samples every 0.1 s, trivial adapter, 0.97 against 0.90\n")
        print("| run | wall s | calls |")
        print("|---|---|---|")
        for name, extra in (("full", ()), ("--early-stop (default block)", ("--early-stop",)),
                            ("--early-stop --early-stop-block 0.5", ("--early-stop", "--early-stop-block", "0.5"))):
            root = Path(tmp) / name.replace(" ", "_")
            root.mkdir()
            eval_dir = make_eval(root, video, outcomes)
            started = time.perf_counter()
            code, _out, err = run_cli("run", "--eval-dir", eval_dir, *extra)
            wall = time.perf_counter() - started
            if code != 0:
                raise SystemExit(err)
            print(f"| {name} | {wall:.1f} | {len(calls(root)):,} |")
        print()


def part_cached(cache: Path) -> None:
    import glasskit_eval.video.frames as frames

    video = _big_video(cache, PLANNED // 10)
    decoded = [0]
    # The frames the engine's decode hands over, counted where frames.decode_at takes them.
    real: Any = frames.decode_pieces  # type: ignore[attr-defined]

    def counting(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for item in real(*args, **kwargs):
            decoded[0] += 1
            yield item

    frames.decode_pieces = counting  # type: ignore[attr-defined,assignment]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        eval_dir = make_eval(root, video, iid_outcomes(random.Random(0), PLANNED, 0.97))
        print("## Cache hits are free: 720p, 2,400 samples every 0.1 s, trivial adapter, 0.97 against 0.90\n")
        print("| run | wall s | calls | frames the decoder delivered | samples read ahead |")
        print("|---|---|---|---|---|")
        for name, extra in (("full, cold --cache", ("--cache", root / "cache")),
                            ("full, warm --cache", ("--cache", root / "cache")),
                            ("--early-stop, warm --cache", ("--early-stop", "--cache", root / "cache")),
                            ("--early-stop, no cache", ("--early-stop",))):
            (root / "calls.log").unlink(missing_ok=True)
            decoded[0] = 0
            report = root / "report.json"
            started = time.perf_counter()
            code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", report, *extra)
            wall = time.perf_counter() - started
            if code != 0:
                raise SystemExit(err)
            ahead = (read_json(report).get("early_stop") or {}).get("samples_cached", 0)
            print(f"| {name} | {wall:.1f} | {len(calls(root)):,} | {decoded[0]:,} | {ahead:,} |")
        print()
    frames.decode_pieces = real  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("blocks", "cli", "decode", "dense", "cached", "all"), default="all")
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "glasskit-bench-early-stop")
    args = parser.parse_args()
    if args.part in ("blocks", "all"):
        part_blocks(args.seeds)
    if args.part in ("decode", "all"):
        part_decode(args.seeds, args.cache)
    if args.part in ("dense", "all"):
        part_dense(args.cache)
    if args.part in ("cached", "all"):
        part_cached(args.cache)
    if args.part in ("cli", "all"):
        part_cli(args.seeds)


if __name__ == "__main__":
    main()
