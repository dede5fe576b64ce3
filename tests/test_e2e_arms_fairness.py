"""Fair scheduling of arms: a stuck arm holds the others back only by its bounded queue, and each arm
has its own --concurrency budget. Real Python adapters count their calls; nothing here measures time.

Both arms share one state module (imported once per process). The ``slow`` arm's calls wait until
the ``fast`` arm is a whole frame queue ahead of it: if a stuck arm starved the others (a shared
queue, a shared budget), that never happens and the run reports the wait as lost. Once it has
happened the slow arm keeps the fast one waiting a little longer, so a decoder that ignored the
bound would show it: the fast arm's lead must stay within the queue, the slow arm's calls in
flight and the frame in hand. The fast arm's first three calls wait for each other (a barrier of
three), which only an arm with its own budget of three can pass.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from evalkit import make_eval, read_json, run_cli

from glasskit_eval.evaluation._tee import ARM_QUEUE_DEPTH

pytestmark = pytest.mark.e2e

CONCURRENCY = 3
#: What the slow arm's queue holds (the tee's depth for this --concurrency).
DEPTH = ARM_QUEUE_DEPTH + CONCURRENCY

CASE = """\
video: cfr_h264.mp4
sample_defaults:
  field: ok
targets:
  a:
    samples:
    - range: [0, 2]
      every_s: 0.1
      expect: true
  b:
    samples:
    - range: [0.05, 2]
      every_s: 0.1
      expect: true
"""

STATE = f"""
import threading, time

lock = threading.Lock()
started = {{"fast": 0, "slow": 0}}
in_flight = {{"fast": 0, "slow": 0}}
most_in_flight = {{"fast": 0, "slow": 0}}
lead = [0]
ahead = threading.Event()
lost = []
barrier = threading.Barrier({CONCURRENCY}, timeout=60)

def evaluate(arm):
    with lock:
        started[arm] += 1
        number = started[arm]
        in_flight[arm] += 1
        most_in_flight[arm] = max(most_in_flight[arm], in_flight[arm])
        lead[0] = max(lead[0], started["fast"] - started["slow"])
        if started["fast"] - started["slow"] >= {DEPTH}:
            ahead.set()
    try:
        if arm == "fast" and number <= {CONCURRENCY}:
            barrier.wait()
        if arm == "slow":
            if not ahead.wait(60):
                lost.append(number)
            if number == 1:
                time.sleep(0.3)  # room for a fast arm that ignored the bound to overrun it
    finally:
        with lock:
            in_flight[arm] -= 1
"""

ADAPTER = """
import fairstate

def create_evaluator(config):
    arm = config.config["arm"]
    def evaluate(sample, target):
        fairstate.evaluate(arm)
        return {"ok": True}
    return evaluate
"""

CONFIG = """\
arms:
  fast: {adapter_config: {arm: fast}}
  slow: {adapter_config: {arm: slow}}
"""


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fairstate.py").write_text(STATE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import fairstate

    yield fairstate
    sys.modules.pop("fairstate", None)


@pytest.mark.parametrize("order", ["declaration", "time"])
def test_a_stuck_arm_holds_the_others_only_by_its_queue_and_each_arm_has_its_own_budget(
        tmp_path: Path, state: ModuleType, order: str) -> None:
    eval_dir = make_eval(tmp_path, {"fair": CASE}, adapter=ADAPTER, config=CONFIG)
    code, _out, err = run_cli("run", "--eval-dir", eval_dir, "--output-json", "r.json", "--arm", "fast", "--arm",
                              "slow", "--control", "fast", "--concurrency", str(CONCURRENCY), "--order", order)
    assert code == 0, err
    report = read_json(tmp_path / "r.json")
    assert report["arms"]["fast"]["summary"]["passed"] == report["arms"]["slow"]["summary"]["passed"] == 40
    # The fast arm got a whole queue ahead of the stuck one: it was not starved.
    assert state.lost == []
    assert state.lead[0] >= DEPTH
    # ... and no further than the slow arm's queue, its calls in flight and the frame in hand.
    assert state.lead[0] <= DEPTH + CONCURRENCY + 1
    # Each arm had its own budget: three calls in flight at once (the barrier), never more.
    assert state.most_in_flight == {"fast": CONCURRENCY, "slow": CONCURRENCY}
