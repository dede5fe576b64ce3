"""Crash and interrupt tests: a real ``python -m glasskit_eval run`` killed again and again.

The adapter appends one fsynced line per factory call, evaluate call and close to
``calls.log``. After every stop the test reads the checkpoint the next attempt will
resume from; the calls of that attempt must all be samples that were *not*
checkpointed (mapped to their trial by the order of factory calls), each at most
once. When the run is finally allowed to finish, its JSON report must equal an
uninterrupted run's, durations and paths aside.

Kill moments are random but seeded: "after N more adapter calls, plus up to 10 ms",
with N = 0 landing in start-up. SIGKILL cannot tear a single write(2), so some
kills also append a cut-off copy of a record, as power loss mid-write would leave.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from evalkit import VIDEOS
from resumekit import (
    FSYNCED_LOG,
    checkpoint_records,
    environment,
    find_checkpoint,
    log_lines,
    normalized,
    reusable,
    run_command,
    run_to_the_end,
    run_until_signalled,
)

from glasskit_eval.checkpoints.store import RECORDS_NAME

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]

CASES = {
    "alpha": """
video: cfr_h264.mp4
sample_defaults:
  field: ok
targets:
  door:
    samples:
    - range: [0, 2]
      every_s: 0.1
      expect: true
  lamp:
    samples:
    - range: [0.05, 2]
      every_s: 0.2
      expect: true
""",
    "beta": """
video: cfr_h264.mp4
sample_defaults:
  field: ok
targets:
  sign:
    samples:
    - at: 0.3
      expect: true
      ignore: known flaky
    - range: [0.5, 2]
      every_s: 0.25
      expect: true
""",
    "gamma": """
video: cfr_h264.mp4
sample_defaults:
  field: ok
targets:
  left:
    samples:
    - range: [0.03, 2]
      every_s: 0.1
      expect: true
  right:
    samples:
    - range: [0.07, 2]
      every_s: 0.1
      expect: false
""",
}

ADAPTER = FSYNCED_LOG + """
import time

def create_evaluator(config):
    log("create")
    return Counting()

class Counting:
    def evaluate(self, sample, target):
        log(f"call {sample.case_name} {target.id} {sample.sample_index}")
        time.sleep(0.001 + (sample.sample_index % 4) / 1000)
        return {"ok": sample.frame_index % 3 != 0, "frame": sample.frame_index}

    def close(self):
        log("close")
"""

# 3 x 76 adapter calls: far more than 22 short attempts can finish, so every stop lands mid-run.
ARGS = ("--repeat", "3", "--concurrency", "2", "--min-pass-rate", "0.5")

Key = tuple[int, str, str, int]


def make(base: Path) -> Path:
    eval_dir = base / "eval"
    (eval_dir / "cases").mkdir(parents=True)
    shutil.copy(VIDEOS / "cfr_h264.mp4", eval_dir / "cases")
    for name, text in CASES.items():
        (eval_dir / "cases" / f"{name}.yaml").write_text(text.lstrip())
    (eval_dir / "adapter.py").write_text(ADAPTER)
    return eval_dir


def checkpointed(checkpoint: Path | None) -> set[Key]:
    """What a resume reuses: every intact record that is not an adapter error."""
    return set() if checkpoint is None else reusable(checkpoint_records(checkpoint))


def all_samples(reference: dict[str, Any]) -> list[Key]:
    return [(t["trial"], r["case"], r["target"], r["sample_index"])
            for t in reference["trials"] for r in t["results"]]


def ignored(reference: dict[str, Any]) -> set[tuple[str, str, int]]:
    return {(r["case"], r["target"], r["sample_index"])
            for t in reference["trials"] for r in t["results"] if r["status"] == "ignored"}


def check_segment(segment: list[str], done_before: set[Key], universe: list[Key],
                  skipped: set[tuple[str, str, int]]) -> None:
    """Every call in one attempt was for a sample not yet checkpointed, at most once."""
    pending = [k for k in universe if k not in done_before and k[1:] not in skipped]
    trials = sorted({k[0] for k in pending})  # one factory call per trial with pending work, in order
    block = -1
    seen: set[Key] = set()
    for line in segment:
        if line == "create":
            block += 1
            assert block < len(trials), f"evaluator created for a trial with nothing pending: {segment}"
            continue
        if line == "close":
            continue
        _, case, target, index = line.split()
        key = (trials[block], case, target, int(index))
        assert key not in done_before, f"{key} was evaluated again after it was checkpointed"
        assert key not in seen, f"{key} was evaluated twice in one attempt"
        seen.add(key)


def reference_report(tmp_path: Path) -> dict[str, Any]:
    eval_dir = make(tmp_path / "reference")
    report = tmp_path / "reference.json"
    run_to_the_end(run_command(eval_dir, report, None, ARGS))
    data: dict[str, Any] = json.loads(report.read_text())
    return data


def calls_past(eval_dir: Path, count: int) -> bool:
    return sum(1 for line in log_lines(eval_dir) if line != "close") >= count


def tear(checkpoint: Path, rng: random.Random) -> None:
    """Leave what a power cut in the middle of appending a record leaves."""
    records = checkpoint / RECORDS_NAME
    lines = records.read_bytes().splitlines(keepends=True)
    with open(records, "ab") as handle:
        handle.write(lines[-1][:rng.randrange(1, len(lines[-1]) - 1)])


def stop_and_resume(tmp_path: Path, stops: int, how: signal.Signals | None, seed: int) -> None:
    reference = reference_report(tmp_path)
    universe, skipped = all_samples(reference), ignored(reference)
    eval_dir = make(tmp_path / "crash")
    report = tmp_path / "crash.json"
    rng = random.Random(seed)
    checkpoint: Path | None = None
    finished = False
    for attempt in range(stops):
        done = checkpointed(checkpoint)
        before = len(log_lines(eval_dir))
        # SIGINT needs our handlers in place: wait for the first factory call at least.
        count = before + (rng.randint(0, 3) if how is None else rng.randint(1, 12))
        delay = rng.uniform(0, 0.01)
        sig = how if how is not None else signal.SIGKILL
        if how is not None and attempt % 3 == 2:
            sig = signal.SIGTERM
        code, _out, err = run_until_signalled(run_command(eval_dir, report, checkpoint, ARGS),
                                              partial(calls_past, eval_dir, count), signum=sig, delay=delay,
                                              env=environment())
        segment = log_lines(eval_dir)[before:]
        check_segment(segment, done, universe, skipped)
        if how is not None:
            assert segment.count("create") == segment.count("close"), f"adapter not closed: {segment}\n{err}"
            if code == 130:
                assert "Eval interrupted" in err, err
                assert "Traceback" not in err, err
        if code in (0, 1):
            # It completed before the signal landed (too few stops to prove anything for SIGKILL).
            assert how is not None, f"run finished after only {attempt} kills"
            finished = True
            break
        # SIGINT and SIGTERM exit 130 (128 + SIGINT, as upstream); SIGKILL ends the process itself.
        assert code in (-signal.SIGKILL, 130), (code, err)
        checkpoint = find_checkpoint(eval_dir)
        if how is not None and checkpoint is not None and "Resume with" in err:
            assert f"python -m glasskit_eval run --resume {checkpoint}" in err
        if how is None and checkpoint is not None and rng.random() < 0.3 and checkpointed(checkpoint):
            tear(checkpoint, rng)
    if not finished:
        done = checkpointed(checkpoint)
        before = len(log_lines(eval_dir))
        run_to_the_end(run_command(eval_dir, report, checkpoint, ARGS))
        check_segment(log_lines(eval_dir)[before:], done, universe, skipped)
    final = json.loads(report.read_text())
    assert normalized(final) == normalized(reference)
    evaluated = {(c, t, int(i)) for line in log_lines(eval_dir) if line.startswith("call")
                 for _, c, t, i in [line.split()]}
    assert evaluated == {k[1:] for k in universe} - skipped


def test_sigkill_at_random_moments_then_resume_gives_the_uninterrupted_report(tmp_path: Path) -> None:
    stop_and_resume(tmp_path, stops=22, how=None, seed=20261130)


def test_sigint_and_sigterm_close_the_adapter_exit_130_and_resume(tmp_path: Path) -> None:
    stop_and_resume(tmp_path, stops=6, how=signal.SIGINT, seed=7)
