"""The gates ``run --early-stop`` decides and its tracker (glasskit_eval.evaluation.earlystop)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import make_eval

from glasskit_eval.evaluation import earlystop
from glasskit_eval.evaluation._judge import Verdict, make_result
from glasskit_eval.evaluation.gates import CaseThresholds, GateOptions, evaluate_gates
from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters, ScheduledSample
from glasskit_eval.results import EarlyStop, Gate, GateDecision, Status

pytestmark = pytest.mark.frames

CASES = {
    "one": """\
        video: cfr_h264.mp4
        targets:
          a:
            samples: [{range: [0, 1], every_s: 0.1, expect: true}]
          b:
            samples: [{range: [0, 1], every_s: 0.1, expect: true}, {at: 1.5, expect: true, ignore: bad}]
        thresholds:
          min_pass_rate: 0.8
          max_failures: 3
          per_target: {b: {min_pass_rate: 0.9}}
        """,
    "two": """\
        video: cfr_h264.mp4
        targets:
          a:
            samples: [{at: [0.5, 1.0], expect: true}]
        """,
}
CONFIG = """\
thresholds:
  min_pass_rate: 0.7
  per_target: {a: {min_pass_rate: 0.75}}
"""


@pytest.mark.parametrize("options", [GateOptions(), GateOptions(min_pass_rate=0.9), GateOptions(max_failures=2),
                                     GateOptions(min_target_pass_rate=0.6)])
def test_goals_are_the_rate_and_failure_gates_evaluate_gates_makes(tmp_path: Path, options: GateOptions) -> None:
    plan = build_plan(make_eval(tmp_path, CASES, config=CONFIG), Filters(), allow_empty=False)
    samples = [s for c in plan.cases for s in c.samples]
    results = [make_result(s, Verdict(Status.IGNORED if s.ignored else Status.PASSED, "")) for s in samples]
    gates = evaluate_gates(results, options=options, eval_thresholds=plan.eval_dir.config.thresholds,
                           cases=[CaseThresholds(c.case.name, c.case.thresholds) for c in plan.cases])
    assert [g.name for g in earlystop.goals(plan, options)] == [g.name for g in gates if g.name != "adapter_errors"]


def _samples(tmp_path: Path) -> list[ScheduledSample]:
    plan = build_plan(make_eval(tmp_path, CASES, config=CONFIG), Filters(case="one"), allow_empty=False)
    return list(plan.cases[0].samples)


def test_tracker_decides_each_goal_and_stops_when_all_are(tmp_path: Path) -> None:
    samples = _samples(tmp_path)
    options = earlystop.EarlyStopOptions(Fraction(1, 2), seed=0, alpha=0.05)
    blocks = earlystop.order([samples], options, 1)
    goals = [earlystop.Goal("fails", None, 1), earlystop.Goal("rate", 0.5, None, target="a"),
             earlystop.Goal("nothing", 0.5, None, target="zzz")]
    tracker = earlystop.Tracker(goals, blocks, options)
    assert tracker.planned == 20 and not tracker.done
    decisions = {d.name: d for d in tracker.record().gates}
    # A goal over no samples is decided as the ordinary gate: a rate of nothing fails.
    assert decisions["nothing"].verdict == "fail" and not decisions["nothing"].early
    for block in blocks:
        status = Status.FAILED if block.target == "b" else Status.PASSED
        tracker.observe(block, [make_result(s, Verdict(Status.IGNORED if s.ignored else status, ""))
                                for s in block.samples])
    decisions = {d.name: d for d in tracker.record().gates}
    first_b = next(i for i, b in enumerate(blocks) if b.target == "b" and b.size)
    seen = sum(b.size for b in blocks[:first_b + 1])
    fails = decisions["fails"]
    # Decided at the first block of `b` (5 failures > 1), with what was known then.
    assert (fails.verdict, fails.early, fails.after, fails.low, fails.high) == ("fail", True, seen, 5, 5 + 20 - seen)
    # Half of `a` passed: at least 5 of its 10 samples pass whatever the rest do, so 0.5 is met.
    rate = decisions["rate"]
    assert (rate.verdict, rate.early, rate.after, rate.low, rate.high) == ("pass", True, 5, 0.5, 1.0)
    assert tracker.done and tracker.evaluated == 20


def test_decided_gates_replace_only_early_decisions() -> None:
    record = EarlyStop(212, 2400, 0, 0.5, 0.05, (
        GateDecision("eval_min_pass_rate", "pass", 0.931, 0.99, 0.9, 212, 2400, True),
        GateDecision("one_max_failures", "fail", 4, 40, 3, 800, 2400, True),
        GateDecision("eval_b_min_pass_rate", "pass", 0.95, 0.95, 0.9, 100, 100, False)))
    gates = [Gate("adapter_errors", True, "no errors"), Gate("eval_min_pass_rate", False, "88% pass rate"),
             Gate("one_max_failures", True, "2 failures"), Gate("eval_b_min_pass_rate", True, "95% pass rate")]
    out = earlystop.decided_gates(gates, record)
    assert [(g.name, g.passed) for g in out] == [("adapter_errors", True), ("eval_min_pass_rate", True),
                                                 ("one_max_failures", False), ("eval_b_min_pass_rate", True)]
    assert out[1].message == ("Decided early: PASS eval_min_pass_rate >= 90% after 212 of 2,400 samples "
                              "(95% anytime-valid bound 93.1%)")
    assert out[2].message.startswith("Decided early: FAIL one_max_failures <= 3 after 800 of 2,400 samples")
    assert out[0] is gates[0] and out[3] is gates[3]


def test_the_schedule_plays_the_seeded_order_side_by_side_and_stops_each_arm_on_its_own(tmp_path: Path) -> None:
    from glasskit_eval.arms.plan import Arm, ArmPlan

    plan = build_plan(make_eval(tmp_path, CASES, config=CONFIG), Filters(), allow_empty=False)
    options = earlystop.EarlyStopOptions(Fraction(1, 2), seed=3, alpha=0.05)
    spec = object()
    arms = ArmPlan((Arm("control", spec, {}), Arm("worse", spec, {})), control="control")  # type: ignore[arg-type]
    schedule = earlystop.EarlyStopping(options, GateOptions(min_pass_rate=0.5), concurrency=12).start(plan, 2, arms)
    assert list(schedule.blocks) == earlystop.order([c.samples for c in plan.cases], options, 2)
    # As many blocks at once as --concurrency holds (the largest block has 6 samples: 0.5 s at 0.1 s, and 1.5 s).
    assert schedule.side_by_side == 12 // max(len(b.samples) for b in schedule.blocks) == 2
    assert schedule.order == "time"
    for j, block in enumerate(schedule.blocks):
        status = Status.PASSED if j % 2 == 0 else Status.FAILED
        for arm, mine in ((0, status), (1, Status.FAILED)):
            if not schedule.done(arm):
                schedule.observe(arm, j, [make_result(s, Verdict(Status.IGNORED if s.ignored else mine, ""))
                                          for s in block.samples])
    assert schedule.done(1)  # every sample of `worse` fails: decided early
    unreached = next(s for s in plan.cases[0].samples if s.ignored)
    assert schedule.unreached(unreached, "worse").status is Status.IGNORED
    assert schedule.unreached(plan.cases[1].samples[0], "worse").status is Status.NOT_EVALUATED
    gates, record = schedule.settle([Gate("control/eval_min_pass_rate", True, "x"),
                                     Gate("worse/eval_min_pass_rate", True, "y")])
    assert record is not None and [d.name for d in record.gates if d.name.endswith("/eval_min_pass_rate")] == [
        "control/eval_min_pass_rate", "worse/eval_min_pass_rate"]
    assert all(d.name.startswith(("control/", "worse/")) for d in record.gates)
    assert gates[1].passed is False and gates[1].message.startswith("Decided early: FAIL worse/eval_min_pass_rate")


def test_blocks_read_ahead_are_constants_of_the_tracker(tmp_path: Path) -> None:
    """Known blocks are counted as evaluated and cached at once; every block known decides exactly, and a
    known block is never observed again when its turn comes."""
    samples = _samples(tmp_path)
    options = earlystop.EarlyStopOptions(Fraction(1, 2), seed=0, alpha=0.05)
    blocks = earlystop.order([samples], options, 1)
    goals = [earlystop.Goal("rate", 0.75, None)]

    def results(block: earlystop.Block) -> list:
        status = Status.FAILED if block.target == "b" and block.samples[0].time < Fraction(1, 2) else Status.PASSED
        return [make_result(s, Verdict(Status.IGNORED if s.ignored else status, "")) for s in block.samples]

    every = earlystop.Tracker(goals, blocks, options, {j: results(b) for j, b in enumerate(blocks)})
    (decision,) = every.record().gates
    assert every.done and (decision.verdict, decision.low, decision.high, decision.after, decision.cached) == (
        "pass", 0.75, 0.75, 20, 20)
    assert (every.evaluated, every.record().samples_cached, decision.early) == (20, 20, False)

    known = {j: results(b) for j, b in enumerate(blocks) if b.target == "a"}
    some = earlystop.Tracker(goals, blocks, options, known)
    (decision,) = some.record().gates
    # 10 of `a` passed: the whole rate is between 10/20 and 20/20, the truth (15/20) inside.
    assert (decision.low, decision.high, decision.cached, some.evaluated) == (0.5, 1.0, 10, 10)
    schedule = earlystop.TrialStopping(blocks, 1, [some], _single_arm(), list(range(len(blocks))), goals)
    schedule.read_ahead(0, known)
    for j, block in enumerate(blocks):
        schedule.observe(0, j, results(block))
    (decision,) = schedule.trackers[0].record().gates
    assert schedule.trackers[0].evaluated == 20 and decision.verdict == "pass"
    assert decision.low <= 0.75 <= decision.high


def _single_arm():  # type: ignore[no-untyped-def]
    from glasskit_eval.arms.plan import Arm, ArmPlan

    return ArmPlan((Arm("control", object(), {}),), control="control")  # type: ignore[arg-type]
