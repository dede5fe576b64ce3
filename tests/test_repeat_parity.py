"""``--repeat`` with a deterministic flaky adapter: trials, stability and tables as upstream reports them.

The expected numbers are upstream's (black-box notes, section 1d, on the same
adapter behaviour); when the upstream tool is installed the JSON reports are
also compared directly, minus timings, paths and our extra keys.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_eval, read_json, run_cli

UPSTREAM = Path("/opt/upstream/bin/glasskit")

CASE = """
video: cfr_h264.mp4
targets:
  flip:
    label: Flip
    samples:
    - range: [0.5, 1.9]
      expect: true
    - at: 1.9
      expect: true
  steady:
    samples:
    - at: 0.2
      expect: true
    - at: 0.3
      expect: true
      ignore: known flaky
"""

# The trial number lives in a file: upstream re-imports the adapter for every trial.
ADAPTER = """
import os
HERE = os.path.dirname(os.path.abspath(__file__))

def create_evaluator(config):
    path = os.path.join(HERE, "counter.txt")
    n = 1
    if os.path.exists(path):
        with open(path) as handle:
            n = int(handle.read()) + 1
    with open(path, "w") as handle:
        handle.write(str(n))
    return Flaky(n)

class Flaky:
    def __init__(self, trial):
        self.trial = trial

    def evaluate(self, sample, target):
        t = sample.timestamp_s
        if target.id == "steady" or t == 1.0:
            return True
        if t == 0.5:
            return self.trial != 2
        if t == 1.9 and self.trial == 2:
            raise RuntimeError("trial2 err")
        return t != 1.5
"""

ARGS = ("--repeat", "3", "--keep-going", "--max-flaky-samples", "0", "--min-pass-rate", "0.5")
OURS_ONLY = {"frame_index", "media_timestamp_s", "error_kind"}
VOLATILE = {"duration_seconds", "evaluation_duration_seconds", "average_evaluation_seconds_per_attempt",
            "average_evaluation_seconds_per_sample", "throughput_attempts_per_second",
            "throughput_samples_per_second", "path", "eval_dir",
            # Wording of comparison reasons and declared-mode reporting belong to compare.py.
            "reason", "compare_mode"}


def normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in VOLATILE | OURS_ONLY}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def test_repeat_trials_stability_and_tables(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"rep": CASE}, ADAPTER)
    report = tmp_path / "ours.json"
    code, out, err = run_cli("run", "--eval-dir", eval_dir, *ARGS, "--output-json", report)
    assert code == 1, err
    data = read_json(report)
    assert data["gates"] == [{"message": "2 flaky samples (gate: <= 0)", "name": "max_flaky_samples",
                              "passed": False}]
    assert [t["success"] for t in data["trials"]] == [True, False, True]
    assert [g["name"] for g in data["trials"][1]["gates"] if not g["passed"]] == ["adapter_errors",
                                                                                  "eval_min_pass_rate"]
    summary = data["summary"]
    assert {k: summary[k] for k in ("evaluated_samples", "evaluated_attempts", "passed_attempts",
                                    "failed_attempts", "error_attempts", "flaky_samples", "error_samples",
                                    "consistently_passed_samples", "consistently_failed_samples",
                                    "ignored_samples", "successful_trials", "trials")} == {
        "evaluated_samples": 5, "evaluated_attempts": 15, "passed_attempts": 10, "failed_attempts": 4,
        "error_attempts": 1, "flaky_samples": 2, "error_samples": 1, "consistently_passed_samples": 2,
        "consistently_failed_samples": 1, "ignored_samples": 1, "successful_trials": 2, "trials": 3}
    assert (summary["minimum_trial_pass_rate"], summary["maximum_trial_pass_rate"]) == (0.4, 0.8)
    statuses = {(s["target"], s["timestamp_s"]): s["statuses"] for s in data["stability"]}
    assert statuses == {("flip", 0.5): ["passed", "failed", "passed"], ("flip", 1.0): ["passed"] * 3,
                        ("flip", 1.5): ["failed"] * 3, ("flip", 1.9): ["passed", "error", "passed"],
                        ("steady", 0.2): ["passed"] * 3, ("steady", 0.3): ["ignored"] * 3}
    ignored = next(s for s in data["stability"] if s["ignored"])
    assert (ignored["evaluated"], ignored["pass_rate"], ignored["consistently_passed"]) == (0, None, False)

    for line in ("Trials: 3 total, 2 passed gates, 1 failed gates",
                 "Samples: 5 evaluated per trial, 1 ignored",
                 "Attempts: 15 evaluated, 10 passed, 4 failed, 1 errors",
                 "Trial pass rate (min / mean / max): 40.0% / 66.7% / 80.0%",
                 "Stability: 2 consistently passed, 1 consistently failed, 2 flaky, 1 with errors",
                 "1 adapter error can be retried without rerunning completed samples."):
        assert line in out
    rows = [line.split() for line in out.splitlines()]
    assert ["2", "40.0%", "2", "2", "1", "failed"] == rows[[r[:1] for r in rows].index(["2"])][:6]
    assert ["Stability", "max_flaky_samples", "2", "flaky", "samples", "(gate:", "<=", "0)"] in rows
    assert ["Flip", "(flip)", "25.0/58.3/75.0%", "4", "1", "1", "2", "1"] in rows
    assert ["rep", "Flip", "(flip)", "0.5s", "P/F/P", "flaky"] in rows
    assert ["rep", "Flip", "(flip)", "1.5s", "F/F/F", "failed", "every", "trial"] in rows
    assert ["rep", "Flip", "(flip)", "1.9s", "P/E/P", "flaky,", "adapter/comparison", "errors"] in rows


@pytest.mark.skipif(not UPSTREAM.exists(), reason="upstream glasskit not installed")
def test_repeat_report_matches_upstream(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"rep": CASE}, ADAPTER)
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    assert run_cli("run", "--eval-dir", eval_dir, *ARGS, "--output-json", ours)[0] == 1
    (eval_dir / "counter.txt").unlink()
    shutil.rmtree(eval_dir / "runs")
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([str(UPSTREAM), "eval", "run", "--eval-dir", str(eval_dir), *ARGS, "--output-json",
                           str(theirs)], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert normalized(read_json(ours)) == normalized(json.loads(theirs.read_text()))
