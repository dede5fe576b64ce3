"""Arms and checkpoints: a real ``run`` with three arms killed (SIGKILL) again and again, then resumed.

Every arm logs its factory calls and evaluate calls (with its name, from its adapter config) to a
fsynced ``calls.log``. After each kill the test reads the checkpoint the next attempt resumes from:
that attempt may call an arm only for samples *that arm* has not checkpointed (another arm's record
of the same sample does not count), each at most once. The finished report must equal an
uninterrupted run's, arms, comparisons and all, timings aside.
"""

from __future__ import annotations

import json
import random
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import resumekit
from resumekit import log_lines, run_command
from test_e2e_crash_resume import make

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

ADAPTER = resumekit.FSYNCED_LOG + """
from PIL import ImageStat

def create_evaluator(config):
    arm = config.config["arm"]
    log(f"create {arm}")
    return Counting(arm)

class Counting:
    def __init__(self, arm):
        self.arm = arm

    def evaluate(self, sample, target):
        log(f"call {self.arm} {sample.case_name} {target.id} {sample.sample_index}")
        mean = ImageStat.Stat(sample.image.convert("L")).mean[0]
        return {"ok": (sample.frame_index + len(self.arm)) % 3 != 0, "mean": round(mean, 3)}

    def close(self):
        log(f"close {self.arm}")
"""

CONFIG = """\
arms:
  wide: {adapter_config: {arm: wide}}
  dim: {adapter_config: {arm: dim}, perturb: [{brightness: 0.5}, {noise: 6}]}
"""

ARMS = ("control", "wide", "dim")
ARGS = ("--repeat", "2", "--concurrency", "2", "--arm", "control", "--arm", "wide", "--arm", "dim",
        "--seed", "5", "--keep-going")
#: Pareto membership weighs p95 latency, which differs between any two runs.
UNSTABLE = resumekit.VOLATILE | {"pareto"}

Key = tuple[int, str, str, int, str]


def make_arms(base: Path) -> Path:
    eval_dir = make(base)
    (eval_dir / "adapter.py").write_text(ADAPTER)
    (eval_dir / "adapter.yaml").write_text("arm: control\n")
    (eval_dir / "config.yaml").write_text(CONFIG)
    return eval_dir


def checkpointed(checkpoint: Path | None) -> set[Key]:
    """What a resume reuses, per arm: every intact record but adapter errors."""
    if checkpoint is None:
        return set()
    records = resumekit.checkpoint_records(checkpoint)
    for record in records:
        _trial, _case, _target, _index, arm = record["key"]  # every record of an arms run names its arm
        assert record["payload"]["arm"] == arm
    return resumekit.reusable(records)


def universe(reference: dict[str, Any]) -> list[Key]:
    return [(t["trial"], r["case"], r["target"], r["sample_index"], r["arm"])
            for t in reference["trials"] for r in t["results"] if r["status"] != "ignored"]


def check_segment(segment: list[str], done_before: set[Key], every: list[Key]) -> None:
    """Each arm called, in one attempt, only for its own samples not yet checkpointed, at most once each."""
    for arm in ARMS:
        pending = [k for k in every if k[4] == arm and k not in done_before]
        trials = sorted({k[0] for k in pending})  # one factory call per trial with pending work for this arm
        block = -1
        seen: set[Key] = set()
        for line in segment:
            words = line.split()
            if words[1] != arm:
                continue
            if words[0] == "create":
                block += 1
                assert block < len(trials), f"{arm} created for a trial with nothing pending: {segment}"
            elif words[0] == "call":
                key = (trials[block], words[2], words[3], int(words[4]), arm)
                assert key not in done_before, f"{key} was evaluated again after it was checkpointed"
                assert key not in seen, f"{key} was evaluated twice in one attempt"
                seen.add(key)


def calls_past(eval_dir: Path, count: int) -> bool:
    return sum(1 for line in log_lines(eval_dir) if line.startswith("call")) >= count


def test_sigkill_then_resume_with_arms_gives_the_uninterrupted_report(tmp_path: Path) -> None:
    reference_dir = make_arms(tmp_path / "reference")
    resumekit.run_to_the_end(run_command(reference_dir, tmp_path / "reference.json", None, ARGS), timeout=300)
    reference = json.loads((tmp_path / "reference.json").read_text())
    every = universe(reference)
    assert {k[4] for k in every} == set(ARMS) and len(every) == 3 * 2 * 76

    eval_dir = make_arms(tmp_path / "crash")
    report = tmp_path / "crash.json"
    rng = random.Random(20261201)
    checkpoint: Path | None = None
    kills = 0
    for _attempt in range(8):
        done = checkpointed(checkpoint)
        before = len(log_lines(eval_dir))
        calls_before = sum(1 for line in log_lines(eval_dir) if line.startswith("call"))
        count = calls_before + rng.randint(5, 60)
        code, _out, err = resumekit.run_until_signalled(
            run_command(eval_dir, report, checkpoint, ARGS), partial(calls_past, eval_dir, count),
            delay=rng.uniform(0, 0.01), env=resumekit.environment())
        check_segment(log_lines(eval_dir)[before:], done, every)
        if code in (0, 1):
            break
        assert code == -signal.SIGKILL, err
        kills += 1
        checkpoint = resumekit.find_checkpoint(eval_dir)
    assert kills >= 3, "the run finished before it was killed often enough to prove anything"
    if not report.exists():
        done = checkpointed(checkpoint)
        before = len(log_lines(eval_dir))
        resumekit.run_to_the_end(run_command(eval_dir, report, checkpoint, ARGS), timeout=300)
        check_segment(log_lines(eval_dir)[before:], done, every)
    resumed = json.loads(report.read_text())
    assert resumekit.normalized(resumed, UNSTABLE) == resumekit.normalized(reference, UNSTABLE)
    assert resumed["arms"].keys() == reference["arms"].keys() == set(ARMS)
    # Every arm evaluated every sample it had to, across all attempts.
    called = {(words[1], words[2], words[3], int(words[4])) for line in log_lines(eval_dir)
              if line.startswith("call") for words in [line.split()]}
    assert called == {(k[4], k[1], k[2], k[3]) for k in every}
