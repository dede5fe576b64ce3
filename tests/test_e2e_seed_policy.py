"""`seed` takes `run`'s call policy: `--timeout`, `--retries`, `--max-calls-per-second`.

Seed opens its adapter through the engine's one door, so a draft whose call hangs times out (an
incomplete seed: exit 1, case file unchanged) instead of holding the command, and transient
failures are retried as in `run`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from evalkit import ROOT, make_eval, run_cli

pytestmark = pytest.mark.e2e

CASE = """\
video: cfr_h264.mp4
targets:
  door:
    samples:
    - at: [0.5, 1.0, 1.5]
      field: open
"""

#: Sleeps on the draft at 1.0 s; answers the others at once.
SLEEPER = """
import time

def create_evaluator(config):
    def evaluate(sample, target):
        if sample.timestamp_s == 1.0:
            time.sleep(60)
        return {"open": sample.timestamp_s > 0.7}
    return evaluate
"""

#: Fails the first call of each sample with a TransientError, then answers; logs each call's time.
FLAKY = """
import json, os, time
from glasskit_eval import TransientError

LOG = os.environ["SEED_POLICY_LOG"]

def create_evaluator(config):
    seen = set()
    def evaluate(sample, target):
        with open(LOG, "a") as handle:
            handle.write(json.dumps([sample.timestamp_s, time.monotonic()]) + "\\n")
        if sample.timestamp_s not in seen:
            seen.add(sample.timestamp_s)
            raise TransientError("busy")
        return {"open": sample.timestamp_s > 0.7}
    return evaluate
"""


def test_a_draft_that_hangs_times_out_and_leaves_the_case_file(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"door": CASE}, SLEEPER)
    path = eval_dir / "cases" / "door.yaml"
    # A command adapter: its process is stopped when the run ends, so nothing waits for the sleep.
    command = f"{sys.executable} -m glasskit_eval.protocol_server {eval_dir / 'adapter.py'}:create_evaluator"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "glasskit_eval", "seed", "--eval-dir", str(eval_dir),
                           "--adapter-command", command, "--timeout", "1", "--keep-going"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ERROR door/door @1s" in done.stdout and "timed out after 1s (--timeout)" in done.stdout
    assert "Seed incomplete: 1 expectations could not be proposed; case files were left unchanged." in done.stdout
    assert path.read_text() == CASE
    # The sleep is 60 s: the seed ends about a second after the call started (plus start-up).
    assert elapsed < 20, elapsed


def test_seed_retries_transient_failures_and_spaces_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "calls.log"
    monkeypatch.setenv("SEED_POLICY_LOG", str(log))
    eval_dir = make_eval(tmp_path, {"door": CASE}, FLAKY)
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--retries", "1", "--retry-backoff", "0",
                             "--max-calls-per-second", "20")
    assert code == 0, out + err
    samples = yaml.safe_load((eval_dir / "cases" / "door.yaml").read_text())["targets"]["door"]["samples"]
    assert [(s["at"], s["expect"]) for s in samples] == [(0.5, False), ([1.0, 1.5], True)]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(t for t, _ in calls) == [0.5, 0.5, 1.0, 1.0, 1.5, 1.5]  # each sample once more
    starts = sorted(at for _, at in calls)
    # 20 calls a second: six calls span at least five intervals of 50 ms.
    assert starts[-1] - starts[0] >= 5 * 0.05 - 0.01


def test_without_retries_a_transient_failure_is_an_incomplete_seed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEED_POLICY_LOG", str(tmp_path / "calls.log"))
    eval_dir = make_eval(tmp_path, {"door": CASE}, FLAKY)
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--keep-going")
    assert code == 1, out + err
    assert (eval_dir / "cases" / "door.yaml").read_text() == CASE


def test_resume_keeps_the_recorded_call_policy_and_refuses_a_new_one(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"door": CASE}, SLEEPER)
    code, out, err = run_cli("seed", "--eval-dir", eval_dir, "--resume", "x", "--timeout", "3")
    assert code == 2 and "cannot be combined" in err and "--timeout" in err
