"""What durable checkpoints cost: the same run with and without them, side by side.

    python benchmarks/bench_checkpoints.py [--samples 2400] [--rounds 7] [--check]

A trivial adapter (returns ``True`` at once) on 2,400 samples is the worst case for
checkpoint overhead: nothing else takes time. Each round runs both variants in this
one process, alternating which goes first, so machine noise hits both alike. The
checkpointed variant pays for everything a real run pays: fingerprinting the inputs,
creating the checkpoint, encoding and fsyncing every record (group commits on the
writer thread) and closing it. The target is a median wall-time ratio of at most 1.10;
CPU time (all threads) is printed too, as it is less sensitive to other load.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, importable, interleave, print_pairs

importable()

from glasskit_eval.adapters.python import PythonAdapterSpec  # noqa: E402
from glasskit_eval.checkpoints.lifecycle import CheckpointedCommand, plan_fingerprints  # noqa: E402
from glasskit_eval.evaluation.options import TrialOptions  # noqa: E402
from glasskit_eval.evaluation.reuse import RunStore  # noqa: E402
from glasskit_eval.evaluation.trials import run_trials  # noqa: E402
from glasskit_eval.plan.planning import build_plan  # noqa: E402
from glasskit_eval.plan.schedule import Filters  # noqa: E402
from glasskit_eval.results import SampleResult, Status  # noqa: E402
from glasskit_eval.summary import CaseHeader  # noqa: E402

VIDEO = ROOT / "fixtures" / "videos" / "cfr_h264.mp4"  # 20 frames, 2 s
TARGET = 1.10


class Quiet:
    def trial_started(self, trial: int, total: int) -> None: ...

    def case_started(self, case: CaseHeader, trial: int, total: int) -> None: ...

    def case_finished(self, case: CaseHeader, results: list[SampleResult], trial: int, total: int) -> None: ...

    def notice(self, text: str) -> None: ...

    def sample_finished(self, result: SampleResult, trial: int, total: int) -> None: ...

    def tick(self) -> None: ...


def make_eval(base: Path, samples: int) -> Path:
    """Cases of one target sampling every frame of the 20-frame clip (20 samples each)."""
    eval_dir = base / "eval"
    (eval_dir / "cases").mkdir(parents=True)
    shutil.copy(VIDEO, eval_dir / "cases" / VIDEO.name)
    for case in range((samples + 19) // 20):
        count = min(20, samples - case * 20)
        stop = f"{count / 10:g}"
        (eval_dir / "cases" / f"c{case:04d}.yaml").write_text(
            f"video: {VIDEO.name}\ntargets:\n  t:\n    samples:\n    - range: [0, {stop}]\n"
            "      every_s: 0.1\n      expect: true\n")
    (eval_dir / "adapter.py").write_text(textwrap.dedent("""
        def create_evaluator(config):
            return Trivial()

        class Trivial:
            def evaluate(self, sample, target):
                return True
        """))
    return eval_dir


def one_run(eval_dir: Path, checkpointed: bool) -> tuple[float, float, int]:
    started, cpu_started = time.perf_counter(), time.process_time()
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    spec = PythonAdapterSpec(f"{eval_dir / 'adapter.py'}:create_evaluator")
    store = None
    checkpoint = None
    if checkpointed:
        life = CheckpointedCommand("run", "Eval")
        checkpoint = life.create(plan.eval_dir.root, {"bench": True}, plan_fingerprints(plan, None),
                                 total=plan.sample_count)
        store = RunStore(life)
    outcome = asyncio.run(run_trials(plan, spec, TrialOptions(), Quiet(), store=store))
    if checkpoint is not None:
        checkpoint.close()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    evaluated = sum(1 for t in outcome.trials for r in t.results if r.status is Status.PASSED)
    if checkpoint is not None:
        shutil.rmtree(checkpoint.path)
    return elapsed, cpu, evaluated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--check", action="store_true", help=f"exit 1 if the ratio exceeds {TARGET}")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-checkpoints-") as tmp:
        eval_dir = make_eval(Path(tmp), args.samples)
        one_run(eval_dir, True)  # warm-up: imports, page cache, thread pools
        one_run(eval_dir, False)

        def measure(checkpointed: bool) -> dict[str, float]:
            elapsed, used, evaluated = one_run(eval_dir, checkpointed)
            if evaluated != args.samples:
                raise SystemExit(f"expected {args.samples} passed samples, got {evaluated}")
            return {"wall": elapsed, "cpu": used}

        results = interleave(args.rounds, [False, True], measure, rotate=True)
    times = {key: [r["wall"] for r in runs] for key, runs in results.items()}
    cpu = {key: [r["cpu"] for r in runs] for key, runs in results.items()}
    plain, durable = statistics.median(times[False]), statistics.median(times[True])
    # The fastest round is the least disturbed by other load on the machine.
    best_plain, best_durable = min(times[False]), min(times[True])
    ratio = durable / plain
    rows: list[tuple[str, Any]] = [
        ("samples", args.samples), ("rounds", args.rounds),
        ("without checkpoint (median / best s)", f"{plain:.3f} / {best_plain:.3f}"),
        ("with checkpoint (median / best s)", f"{durable:.3f} / {best_durable:.3f}"),
        ("per-sample overhead, best (us)", f"{(best_durable - best_plain) / args.samples * 1e6:.1f}"),
        ("ratio of bests", f"{best_durable / best_plain:.3f}"),
        ("CPU time, all threads (median s)",
         f"{statistics.median(cpu[False]):.3f} -> {statistics.median(cpu[True]):.3f}"),
        ("CPU ratio", f"{statistics.median(cpu[True]) / statistics.median(cpu[False]):.3f}"),
        ("ratio of medians (target <= 1.10)", f"{ratio:.3f}"),
    ]
    print_pairs(rows)
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    raise SystemExit(main())
