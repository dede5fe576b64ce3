"""``compare`` of two large run reports: time and peak memory, reading included.

Writes two reports of ``--samples`` results each (about 470 bytes a result, as a real run writes
them: 10^6 samples is about 470 MB a report) to a temporary directory, then times
``python -m glasskit_eval compare A B`` in a child process under an address-space limit
(``--limit-gib``), and reports wall time, peak RSS and the latency interval it printed.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def result(case: str, index: int, status: str, latency: float) -> dict[str, object]:
    return {"artifact_image": None, "artifact_json": None, "case": case, "compare_mode": None, "error_kind": None,
            "evaluation_duration_seconds": latency, "evaluation_timing_mode": "individual", "expected": 5,
            "field": "index", "frame_index": index, "media_timestamp_s": index / 10, "observed": {"index": 5},
            "observed_value": 5, "reason": "matched" if status == "passed" else "expected 5, observed 4",
            "sample_index": index, "source": "at", "status": status, "target": "idx", "target_label": "Index",
            "timestamp_s": index / 10, "traceback": None}


def write_report(path: Path, samples: int, seed: int, slower: float) -> None:
    rng = random.Random(seed)
    per_case = 10_000
    with path.open("w") as out:
        out.write('{"report_type": "eval_run", "schema_version": 1, "success": true, "trials": [{"trial": 1, '
                  '"success": true, "gates": [], "results": [')
        level = 0.05
        for k in range(samples):
            # A slowly wandering latency (correlated neighbours), and a regression in one stretch.
            level = max(0.001, level + rng.gauss(0, 0.002))
            latency = level + rng.expovariate(100) + (slower if samples // 3 < k < samples // 2 else 0.0)
            status = "passed" if rng.random() < 0.9 else "failed"
            if k:
                out.write(", ")
            out.write(json.dumps(result(f"case{k // per_case:04d}", k % per_case, status, latency)))
        summary = {"passed": 0, "failed": 0, "errors": 0, "ignored": 0, "evaluated": samples, "pass_rate": 0.9,
                   "duration_seconds": 1.0, "average_evaluation_seconds_per_sample": 0.05,
                   "throughput_samples_per_second": 1.0, "evaluation_timing_mode": "individual"}
        out.write('], "summary": ' + json.dumps(summary) + '}], "summary": ')
        out.write(json.dumps({
            "attempt_pass_rate": 0.9, "average_evaluation_seconds_per_attempt": 0.05,
            "consistently_failed_samples": 0, "consistently_passed_samples": 0, "duration_seconds": 1.0,
            "error_attempts": 0, "error_samples": 0, "evaluated_attempts": samples, "evaluated_samples": samples,
            "evaluation_timing_mode": "individual", "failed_attempts": 0, "flaky_samples": 0, "ignored_samples": 0,
            "maximum_trial_pass_rate": 0.9, "mean_trial_pass_rate": 0.9, "minimum_trial_pass_rate": 0.9,
            "passed_attempts": samples, "successful_trials": 1, "throughput_attempts_per_second": 1.0, "trials": 1}))
        out.write("}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--limit-gib", type=float, default=4.0)
    parser.add_argument("--keep", type=Path, help="write (or reuse) the reports here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        a, b = where / f"base-{args.samples}.json", where / f"cand-{args.samples}.json"
        started = time.perf_counter()
        for path, seed, slower in ((a, 1, 0.0), (b, 2, 0.01)):
            if not path.exists():
                write_report(path, args.samples, seed, slower)
        print(f"reports: {a.stat().st_size / 1e6:.0f} MB + {b.stat().st_size / 1e6:.0f} MB "
              f"({time.perf_counter() - started:.1f} s to write or find)")
        limit = int(args.limit_gib * (1 << 30))

        def cap() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "glasskit_eval", "compare", str(a), str(b)], cwd=ROOT,
                              capture_output=True, text=True, preexec_fn=cap)
        wall = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak, cpu = usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime
        latency = [line for line in done.stdout.splitlines() if "atency" in line]
        print(f"compare: exit {done.returncode}, {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak:.0f} MiB "
              f"(limit {args.limit_gib:g} GiB)")
        for line in latency[:4]:
            print("  " + line.strip())
        if done.returncode not in (0, 1):
            print(done.stderr[-2000:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
