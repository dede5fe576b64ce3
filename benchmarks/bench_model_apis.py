"""What ``--retries 3 --timeout 30`` costs a dense run with a trivial adapter.

    python benchmarks/bench_model_apis.py [--cases 20] [--rounds 5] [--concurrency 4]

1. ``glasskit_eval run`` in-process on a dense eval (every frame of the 2 s fixture video, 8
   targets, ``--cases`` case files: 3,200 adapter calls by default) with a trivial async
   adapter and a trivial sync one, alternating plain runs and runs with
   ``--retries 3 --timeout 30`` so machine load hits both alike; medians are compared.
2. The wrapper alone, per call: the trivial async adapter called directly, through the
   wrapper with no policy, and with retries and a timeout (which adds a task per call).

Run from the repository root (or with glasskit_eval importable). Nothing ever fails or times
out here, so the figures are the price of being ready to retry.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ROOT, importable, interleave, timed_cli

importable()

from glasskit_eval.adapters.base import Sample, Target  # noqa: E402
from glasskit_eval.adapters.calls import DirectCaller  # noqa: E402
from glasskit_eval.adapters.resilient import CallPolicy, ResilientCaller  # noqa: E402

VIDEO = ROOT / "fixtures" / "videos" / "cfr_h264.mp4"
TARGETS = 8

ADAPTER = """
class Async:
    async def evaluate(self, sample, target):
        return {"ok": True}

class Sync:
    def evaluate(self, sample, target):
        return {"ok": True}

def create_async(config):
    return Async()

def create_sync(config):
    return Sync()
"""


def make_eval(root: Path, cases: int) -> Path:
    eval_dir = root / "eval"
    (eval_dir / "cases").mkdir(parents=True)
    shutil.copy(VIDEO, eval_dir / "cases" / VIDEO.name)
    (eval_dir / "adapter.py").write_text(ADAPTER)
    targets = "".join(f"  t{i}:\n    samples:\n    - range: [0, 2]\n      every_s: 0.1\n      field: ok\n"
                      "      expect: true\n" for i in range(TARGETS))
    for n in range(cases):
        (eval_dir / "cases" / f"case{n:03d}.yaml").write_text(f"video: {VIDEO.name}\ntargets:\n{targets}")
    return eval_dir


def timed_run(eval_dir: Path, adapter: str, concurrency: int, extra: list[str]) -> float:
    return timed_cli(["run", "--eval-dir", str(eval_dir), "--adapter", f"{eval_dir / 'adapter.py'}:{adapter}",
                      "--concurrency", str(concurrency), *extra])[0]


class Trivial:
    batch = False

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        return {"ok": True}

    async def evaluate_many(self, samples: Any, target: Target) -> list[Any]:
        return []

    async def cancel_pending(self) -> None:
        return None

    async def close(self) -> None:
        return None


def per_call_us(calls: int) -> dict[str, float]:
    target = Target(id="t", index=0, label=None, config={})
    samples = [Sample(image=None, timestamp_s=0.0, frame_index=0, sample_index=i,  # type: ignore[arg-type]
                      video_path="v", case_name="c") for i in range(calls)]

    async def loop(caller: Any) -> float:
        started = time.perf_counter()
        for sample in samples:
            await caller.call(sample, target)
        return (time.perf_counter() - started) / calls * 1e6

    variants = {
        "direct": lambda: DirectCaller(Trivial()),
        "wrapper, no policy": lambda: ResilientCaller(DirectCaller(Trivial()), CallPolicy()),
        "wrapper, --retries 3 --timeout 30": lambda: ResilientCaller(
            DirectCaller(Trivial()), CallPolicy(timeout_s=30, retries=3)),
    }
    best: dict[str, float] = {}
    for _round in range(5):
        for name, make in variants.items():
            value = asyncio.run(loop(make()))
            best[name] = min(best.get(name, value), value)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    options = ["--retries", "3", "--timeout", "30"]
    with tempfile.TemporaryDirectory(prefix="glasskit-bench-apis-") as tmp:
        eval_dir = make_eval(Path(tmp), args.cases)
        calls = args.cases * TARGETS * 20
        print(f"Dense run: {args.cases} cases x {TARGETS} targets x 20 frames = {calls} calls, "
              f"--concurrency {args.concurrency}, {args.rounds} alternating rounds")
        plain_async = 0.0
        for adapter in ("create_async", "create_sync"):
            timed_run(eval_dir, adapter, args.concurrency, [])  # warm caches (frame tables, imports)
            runs = interleave(args.rounds, [(), tuple(options)], lambda extra, adapter=adapter: {  # type: ignore[misc]
                "wall": timed_run(eval_dir, adapter, args.concurrency, list(extra))})
            plain = [r["wall"] for r in runs[()]]
            resilient = [r["wall"] for r in runs[tuple(options)]]
            a, b = statistics.median(plain), statistics.median(resilient)
            lo_a, lo_b = min(plain), min(resilient)
            plain_async = plain_async or lo_a
            print(f"  {adapter[7:]:>5} adapter: plain {a:.3f}s, {' '.join(options)} {b:.3f}s "
                  f"(median; {100 * (b - a) / a:+.1f}%); best {lo_a:.3f}s vs {lo_b:.3f}s "
                  f"({100 * (lo_b - lo_a) / lo_a:+.1f}%)")
            print(f"        plain {[round(x, 3) for x in plain]}, with options {[round(x, 3) for x in resilient]}")
    print("Per call, trivial async adapter (best of 5 x 20,000 calls):")
    costs = per_call_us(20_000)
    for name, value in costs.items():
        print(f"  {name:>34}: {value:.2f} us")
    extra = costs["wrapper, --retries 3 --timeout 30"] - costs["wrapper, no policy"]
    share = extra * 1e-6 * calls / plain_async
    print(f"Options' own cost on the dense async run: {extra:.2f} us x {calls} calls = "
          f"{extra * calls / 1000:.1f} ms, {100 * share:.2f}% of its best plain time (the run-level "
          "difference above is within the noise of a loaded machine)")


if __name__ == "__main__":
    main()
