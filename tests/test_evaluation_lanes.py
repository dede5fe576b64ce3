"""The one door (glasskit_eval.evaluation.lanes) and the one trial loop's schedule hook (evaluation.trials).

Lanes: every evaluator is opened, checked, cancelled and closed in one place, the same for a plain
run and for arms: an error (a fail-fast stop among them) abandons every lane's pending calls, then
closes every lane; an arm with nothing to do opens no evaluator. The adapters are real in-process
Python adapters; the record of what the runner did to them is kept by the adapter itself.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_eval

from glasskit_eval.adapters.base import Evaluator, FactoryConfig
from glasskit_eval.adapters.choose import adapter_spec
from glasskit_eval.adapters.resilient import CallPolicy
from glasskit_eval.arms.plan import Arm, ArmPlan
from glasskit_eval.errors import SampleFailure, UsageError
from glasskit_eval.evaluation._engine import CaseBlock
from glasskit_eval.evaluation.lanes import Door, Needs, open_lanes
from glasskit_eval.evaluation.options import TrialOptions
from glasskit_eval.evaluation.trials import run_trials
from glasskit_eval.plan.planning import Plan, build_plan
from glasskit_eval.plan.schedule import Filters, ScheduledSample
from glasskit_eval.results import EarlyStop, Gate, SampleResult

CASE = """\
video: cfr_h264.mp4
targets:
  ok:
    samples:
    - range: [0, 1]
      every_s: 0.2
      field: ok
      expect: true
"""

ADAPTER = """
def create_evaluator(config):
    def evaluate(sample, target):
        return {"ok": True}
    return evaluate
"""


class Recorded:
    """An evaluator that notes what the runner does to it (the fault under test is the runner's)."""

    batch = False
    streams = False

    def __init__(self, log: list[str], name: str, takes_image_only: bool = False) -> None:
        self.log = log
        self.name = name
        self.takes_image_only = takes_image_only

    async def evaluate(self, sample: Any, target: Any) -> Any:
        return {"ok": True}

    async def cancel_pending(self) -> None:
        self.log.append(f"{self.name}: cancel")

    async def close(self) -> None:
        self.log.append(f"{self.name}: close")


class RecordedSpec:
    def __init__(self, log: list[str], name: str, takes_image_only: bool = False) -> None:
        self.log = log
        self.name = name
        self.takes_image_only = takes_image_only

    def describe(self) -> str:
        return self.name

    async def create(self, config: FactoryConfig) -> Evaluator:
        self.log.append(f"{self.name}: create")
        return Recorded(self.log, self.name, self.takes_image_only)  # type: ignore[return-value]


def plan_of(tmp_path: Path, case: str = CASE) -> Plan:
    eval_dir = make_eval(tmp_path, {"c": case}, ADAPTER)
    return build_plan(str(eval_dir), Filters(), allow_empty=False)


def door(tmp_path: Path, arms: ArmPlan) -> Door:
    return Door.of(tmp_path, CallPolicy(), arms)


def test_an_error_cancels_and_closes_the_one_lane_of_a_plain_run(tmp_path: Path) -> None:
    log: list[str] = []
    plan = plan_of(tmp_path)
    arms = ArmPlan.single(RecordedSpec(log, "plain"), {})  # type: ignore[arg-type]
    needs = [Needs(plan.cases[0].samples)]

    async def go() -> None:
        async with open_lanes(door(tmp_path, arms), arms, needs, 1) as lanes:
            assert [lane.name for lane in lanes if lane is not None] == [None]
            raise SampleFailure("stopped", 0)

    with pytest.raises(SampleFailure):
        asyncio.run(go())
    # A fail-fast stop abandons the calls still pending, as it does for arms.
    assert log == ["plain: create", "plain: cancel", "plain: close"]


def test_arms_share_the_teardown_and_an_idle_arm_opens_nothing(tmp_path: Path) -> None:
    log: list[str] = []
    plan = plan_of(tmp_path)
    arms = ArmPlan(tuple(Arm(n, RecordedSpec(log, n), {}) for n in ("a", "b", "idle")), "a")  # type: ignore[arg-type]
    needs = [Needs(plan.cases[0].samples), Needs(plan.cases[0].samples), Needs()]

    async def go() -> None:
        async with open_lanes(door(tmp_path, arms), arms, needs, 1) as lanes:
            assert [lane.name if lane is not None else None for lane in lanes] == ["a", "b", None]
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(go())
    assert log == ["a: create", "b: create", "a: cancel", "a: close", "b: cancel", "b: close"]

    log.clear()

    async def fine() -> None:
        async with open_lanes(door(tmp_path, arms), arms, needs, 1):
            pass

    asyncio.run(fine())
    assert log == ["a: create", "b: create", "a: close", "b: close"]


def test_a_one_frame_function_adapter_given_clips_is_refused_closed_and_named(tmp_path: Path) -> None:
    log: list[str] = []
    plan = plan_of(tmp_path, CASE.replace("every_s: 0.2\n", "every_s: 0.2\n      clip: {before_s: 0.2, every_s: 0.1}\n")
                   .replace("[0, 1]", "[0.4, 1]"))
    arms = ArmPlan((Arm("ok", RecordedSpec(log, "ok"), {}),  # type: ignore[arg-type]
                    Arm("flat", RecordedSpec(log, "flat", takes_image_only=True), {})), "ok")  # type: ignore[arg-type]
    needs = [Needs(plan.cases[0].samples), Needs(plan.cases[0].samples)]

    async def go() -> None:
        async with open_lanes(door(tmp_path, arms), arms, needs, 1):
            raise AssertionError("not reached")

    with pytest.raises(UsageError, match=r"^arm 'flat': adapter flat is a function taking `image, target_id`"):
        asyncio.run(go())
    # The refused arm's evaluator is closed where it was opened; the lanes opened before it are torn down.
    assert log == ["ok: create", "flat: create", "flat: close", "ok: cancel", "ok: close"]


class Quiet:
    def trial_started(self, trial: int, total: int) -> None: ...
    def case_started(self, case: Any, trial: int, total: int) -> None: ...
    def case_finished(self, case: Any, results: list[SampleResult], trial: int, total: int) -> None: ...
    def sample_finished(self, result: SampleResult, trial: int, total: int) -> None: ...
    def stream_finished(self, result: Any, trial: int, total: int) -> None: ...
    def tick(self) -> None: ...
    def notice(self, text: str) -> None: ...


class Halves:
    """Evaluates a case's samples latest first, two at a time, and stops once ``after`` results exist."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.asked: list[int] = []
        self.seen = 0
        self.blocks: list[CaseBlock] = []
        self.side_by_side = 1
        self.order: str | None = None
        self.reads_ahead = False

    def start(self, plan: Plan, trial: int, arms: ArmPlan) -> Halves:
        for case in plan.cases:
            latest = sorted(case.samples, key=lambda s: -s.sample_index)
            self.blocks += [CaseBlock(case.case.name, tuple(latest[i:i + 2])) for i in range(0, len(latest), 2)]
        return self

    def block_id(self, block: int) -> int:
        return block

    def read_ahead(self, arm: int, known: Mapping[int, Sequence[SampleResult]]) -> None:
        raise AssertionError("a schedule that does not read ahead is given nothing read ahead")

    def observe(self, arm: int, block: int, results: Sequence[SampleResult]) -> None:
        self.seen += len(results)
        self.asked.append(self.seen)

    def done(self, arm: int) -> bool:
        return self.seen >= self.after

    def unreached(self, sample: ScheduledSample, arm: str | None) -> SampleResult | None:
        return None  # left without a result

    def settle(self, gates: list[Gate]) -> tuple[list[Gate], EarlyStop | None]:
        return gates, None


def test_a_schedule_orders_the_blocks_and_stops_between_them(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    root = plan.eval_dir.root
    spec = adapter_spec(None, None, root, io.StringIO())
    schedule = Halves(after=4)
    result = asyncio.run(run_trials(plan, spec, TrialOptions(), Quiet(), schedule=schedule))
    (trial,) = result.trials
    # Five samples (0 .. 0.8 s every 0.2 s): the last two, then the two before; then the schedule said stop.
    assert sorted(r.sample_index for r in trial.results) == [1, 2, 3, 4]
    assert schedule.asked[:2] == [2, 4]
    assert all(r.arm is None for r in trial.results)


def test_without_a_schedule_every_sample_is_evaluated_once_in_declaration_order(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    spec = adapter_spec(None, None, plan.eval_dir.root, io.StringIO())
    result = asyncio.run(run_trials(plan, spec, TrialOptions(), Quiet()))
    assert [r.sample_index for r in result.trials[0].results] == [0, 1, 2, 3, 4]
    assert json.dumps([g.name for g in result.trials[0].gates]).count("/") == 0  # a plain run's gates keep names



class Told(Quiet):
    """What the loop told the console, in order."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def case_started(self, case: Any, trial: int, total: int) -> None:
        self.told.append(f"start {case.name}")

    def case_finished(self, case: Any, results: list[SampleResult], trial: int, total: int) -> None:
        self.told.append(f"finish {case.name} {len(results)}")

    def sample_finished(self, result: SampleResult, trial: int, total: int) -> None:
        self.told.append(f"sample {result.case}")


class Interleaved(Halves):
    """One sample a block, the two cases' blocks alternating; never stops."""

    def start(self, plan: Plan, trial: int, arms: ArmPlan) -> Interleaved:
        first, second = (c.samples for c in plan.cases)
        for a, b in zip(first, second, strict=True):
            self.blocks += [CaseBlock(a.case.name, (a,)), CaseBlock(b.case.name, (b,))]
        return self

    def done(self, arm: int) -> bool:
        return False


def test_cases_played_alone_are_announced_before_their_blocks_interleaved_ones_before_their_summary(
        tmp_path: Path) -> None:
    plan = build_plan(str(make_eval(tmp_path, {"c1": CASE, "c2": CASE}, ADAPTER)), Filters(), allow_empty=False)
    spec = adapter_spec(None, None, plan.eval_dir.root, io.StringIO())
    told = Told()
    asyncio.run(run_trials(plan, spec, TrialOptions(), told))
    assert told.told == ["start c1", *["sample c1"] * 5, "finish c1 5", "start c2", *["sample c2"] * 5, "finish c2 5"]
    told = Told()
    result = asyncio.run(run_trials(plan, spec, TrialOptions(), told, schedule=Interleaved(after=0)))
    # c1 finishes once no block of it is left (before c2's last block), c2 after its last.
    assert told.told == [*["sample c1", "sample c2"] * 4, "sample c1", "start c1", "finish c1 5", "sample c2",
                         "start c2", "finish c2 5"]
    # Results stay case by case, each in declaration order.
    assert [(r.case, r.sample_index) for r in result.trials[0].results] == [
        (c, i) for c in ("c1", "c2") for i in range(5)]
