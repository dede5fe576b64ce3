"""``run --early-stop``: samples in a seeded random order of blocks, and a stop once every gate is decided.

What lives here: the gates the early stop decides (:func:`goals`, the same names and precedence
as :func:`~.gates.evaluate_gates`), a :class:`Tracker` that feeds each evaluated block to every
gate's anytime-valid bound (:mod:`glasskit_eval.statistics.anytime`) and says when all are
decided, and ``decided_gates`` (made in :mod:`.gates`, as every gate), which puts the decisions
in place of the ordinary pass-rate gates. Failure-count gates (``max_failures``) are decided early only when they fail (a failure
count over the whole set is only known once every sample is seen).

:class:`EarlyStopping` is the trial loop's schedule (:class:`~._engine.Schedule`): every case's
blocks in :func:`order`, as many side by side as ``--concurrency`` allows (a function of the order
alone, so a resume tests after the same blocks), each block's frames in time order, one tracker
per arm, so each arm stops once its own gates are decided. The trial loop owns the calls and
reads a block's results already on record (a checkpoint being resumed) in their place in the
order, so a resume reaches the same decision after the same blocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..arms.plan import ArmPlan
from ..cases.model import Thresholds
from ..plan.blocks import Block, make_blocks, shuffled
from ..plan.planning import Plan
from ..plan.schedule import ScheduledSample
from ..results import EarlyStop, Gate, GateDecision, SampleResult, Status
from ..statistics import anytime
from ._judge import Verdict, ignored_result, make_result
from ._ordering import TIME
from .gates import GateOptions, arm_gate_name, decided_gates

__all__ = ["Block", "EarlyStopOptions", "EarlyStopping", "Goal", "Tracker", "decided_gates", "goals", "order"]


@dataclass(frozen=True, slots=True)
class EarlyStopOptions:
    """``--early-stop`` with ``--early-stop-block``, ``--seed`` and ``--alpha``."""

    block_s: Fraction
    seed: int = 0
    alpha: float = 0.05


@dataclass(frozen=True, slots=True)
class Goal:
    """One gate the early stop decides: a minimum pass rate, or a maximum of failures."""

    name: str
    minimum: float | None
    max_failures: int | None
    case: str | None = None
    target: str | None = None

    def covers(self, case: str, target: str) -> bool:
        return (self.case is None or self.case == case) and (self.target is None or self.target == target)


def goals(plan: Plan, options: GateOptions) -> list[Goal]:
    """The pass-rate and failure-count gates of a trial over ``plan``, named as ``evaluate_gates`` names them."""
    eval_t = plan.eval_dir.config.thresholds or Thresholds()
    samples = [s for c in plan.cases for s in c.samples]
    found = [Goal(name, minimum, maximum) for name, minimum, maximum in options.eval_gates(eval_t)]
    if options.min_target_pass_rate is not None:
        for target in sorted({s.target.id for s in samples if not s.ignored}):
            found.append(Goal(f"all_targets_{target}_min_pass_rate", options.min_target_pass_rate, None,
                              target=target))
    else:
        present = {s.target.id for s in samples}
        for target, minimum in (eval_t.per_target or {}).items():
            if target in present:
                found.append(Goal(f"eval_{target}_min_pass_rate", minimum, None, target=target))
    if options.min_pass_rate is None and options.max_failures is None:
        for case_plan in plan.cases:
            t, name = case_plan.case.thresholds, case_plan.case.name
            if t is None:
                continue
            if t.min_pass_rate is not None:
                found.append(Goal(f"{name}_min_pass_rate", t.min_pass_rate, None, case=name))
            if t.max_failures is not None:
                found.append(Goal(f"{name}_max_failures", None, t.max_failures, case=name))
            present_in_case = {s.target.id for s in case_plan.samples}
            for target, minimum in (t.per_target or {}).items():
                if target in present_in_case:
                    found.append(Goal(f"{name}_{target}_min_pass_rate", minimum, None, case=name, target=target))
    return found


def missing_gate_message() -> str:
    return ("--early-stop decides pass-rate gates, and this run has none: set --min-pass-rate or "
            "--min-target-pass-rate, or thresholds.min_pass_rate / per_target in config.yaml or a case file")


def order(samples: Sequence[Sequence[ScheduledSample]], options: EarlyStopOptions, trial: int) -> list[Block]:
    """Every case's samples as blocks, in the trial's seeded random order."""
    return shuffled(make_blocks(samples, options.block_s), options.seed, trial)


class _GoalState:
    """One goal's evidence so far (mutable, private to a tracker)."""

    def __init__(self, goal: Goal, blocks: Sequence[Block], alpha: float,
                 known: Mapping[int, Sequence[SampleResult]]) -> None:
        self.goal = goal
        mine = [(j, b) for j, b in enumerate(blocks) if goal.covers(b.case, b.target) and b.size]
        self.planned = sum(b.size for _j, b in mine)
        # Blocks read before the order started are constants: the sequence covers the others.
        rest = [b for j, b in mine if j not in known]
        judged = [r for j, _b in mine if j in known for r in known[j] if r.evaluated]
        passes = sum(1 for r in judged if r.status is Status.PASSED)
        self.sequence = anytime.start(sum(b.size for b in rest), len(rest), max((b.size for b in rest), default=0),
                                      alpha, known=self.planned - sum(b.size for b in rest), known_passes=passes)
        self.seen = self.cached = len(judged)
        self.failures = sum(1 for r in judged if r.status is Status.FAILED)
        self.verdict: str | None = None
        self.after = 0
        #: The bounds when the goal was decided (the sequence goes on tightening after).
        self.bounds: tuple[float, float] | None = None
        if self.planned == 0:
            # Nothing to evaluate: the ordinary gate's verdict is already known.
            self.verdict = "pass" if goal.minimum is None or goal.minimum <= 0 else "fail"
        elif judged:
            self._settle()

    def observe(self, block: Block, results: Sequence[SampleResult]) -> None:
        if not self.goal.covers(block.case, block.target):
            return
        judged = [r for r in results if r.evaluated]
        if not judged:
            return
        passes = sum(1 for r in judged if r.status is Status.PASSED)
        self.seen += len(judged)
        self.failures += sum(1 for r in judged if r.status is Status.FAILED)
        if self.verdict is not None:
            return  # decided: its bounds are kept as they were then
        if self.goal.minimum is not None:
            self.sequence = anytime.observe(self.sequence, passes, len(judged))
        self._settle()

    def _settle(self) -> None:
        if self.verdict is None:
            self.verdict = self._decide()
            if self.verdict is not None:
                self.after = self.seen
                self.bounds = self._bounds()

    def _decide(self) -> str | None:
        if self.goal.max_failures is not None:
            if self.failures > self.goal.max_failures:
                return "fail"
            return "pass" if self.seen == self.planned else None
        assert self.goal.minimum is not None
        return self.sequence.verdict(self.goal.minimum)

    def _bounds(self) -> tuple[float, float]:
        if self.goal.max_failures is not None:
            return float(self.failures), float(self.failures + self.planned - self.seen)
        return self.sequence.low, self.sequence.high

    def decision(self) -> GateDecision:
        goal = self.goal
        low, high = self.bounds or self._bounds()
        minimum = float(goal.max_failures if goal.max_failures is not None else goal.minimum or 0.0)
        verdict = self.verdict or "undecided"
        after = self.after if self.verdict is not None else self.seen
        return GateDecision(goal.name, verdict, low, high, minimum, after, self.planned,
                            self.verdict is not None and self.after < self.planned, self.cached)


class Tracker:
    """Every goal's bound over one trial's blocks; :attr:`done` once all are decided.

    ``known``: the results of the blocks read before the first block was called (by position in
    ``blocks``); they are counted as evaluated and never observed again.
    """

    def __init__(self, all_goals: Sequence[Goal], blocks: Sequence[Block], options: EarlyStopOptions,
                 known: Mapping[int, Sequence[SampleResult]] | None = None) -> None:
        self.options = options
        self.known = dict(known or {})
        rates = sum(1 for g in all_goals if g.minimum is not None)
        alpha = anytime.gate_alpha(options.alpha, rates)
        self.states = [_GoalState(g, blocks, alpha, self.known) for g in all_goals]
        self.planned = sum(b.size for b in blocks)
        self.evaluated = self.cached = sum(1 for results in self.known.values() for r in results if r.evaluated)

    def observe(self, block: Block, results: Sequence[SampleResult]) -> None:
        self.evaluated += sum(1 for r in results if r.evaluated)
        for state in self.states:
            state.observe(block, results)

    @property
    def done(self) -> bool:
        return all(s.verdict is not None for s in self.states)

    def record(self) -> EarlyStop:
        return EarlyStop(self.evaluated, self.planned, self.options.seed, float(self.options.block_s),
                         self.options.alpha, tuple(s.decision() for s in self.states), self.cached)


def not_evaluated(sample: ScheduledSample, arm: str | None = None) -> SampleResult:
    return make_result(sample, Verdict(Status.NOT_EVALUATED, "not evaluated: every gate was decided early"), arm=arm)


class EarlyStopping:
    """``run --early-stop`` as the trial loop's schedule: blocks in the trial's seeded order until each
    arm's gates are decided."""

    def __init__(self, options: EarlyStopOptions, gates: GateOptions, concurrency: int = 1) -> None:
        self.options = options
        self.gates = gates
        self.concurrency = concurrency

    def start(self, plan: Plan, trial: int, arms: ArmPlan) -> TrialStopping:
        canonical = make_blocks([c.samples for c in plan.cases], self.options.block_s)
        blocks = shuffled(canonical, self.options.seed, trial)
        where = {id(b): n for n, b in enumerate(canonical)}
        side_by_side = max(1, self.concurrency // max((len(b.samples) for b in blocks), default=1))
        found = goals(plan, self.gates)
        trackers = [Tracker(found, blocks, self.options) for _arm in arms.arms]
        return TrialStopping(blocks, side_by_side, trackers, arms, [where[id(b)] for b in blocks], found)


class TrialStopping:
    """One trial of :class:`EarlyStopping`: its order of blocks and every arm's tracker."""

    #: Each block's frames in time order (one forward run of the decoder).
    order: str | None = TIME
    #: Blocks the observation cache answers whole are read before the first block is called.
    reads_ahead = True

    def __init__(self, blocks: Sequence[Block], side_by_side: int, trackers: Sequence[Tracker],
                 arms: ArmPlan, ids: Sequence[int] = (), found: Sequence[Goal] = ()) -> None:
        self.blocks = blocks
        self.side_by_side = side_by_side
        self.trackers = list(trackers)
        self.arms = arms
        self.ids = list(ids) or list(range(len(blocks)))
        self.goals = found

    def block_id(self, block: int) -> int:
        """Block ``block``'s place in canonical order (cases as planned, targets, time): the same in
        every trial and on every resume, whatever the seed."""
        return self.ids[block]

    def read_ahead(self, arm: int, known: Mapping[int, Sequence[SampleResult]]) -> None:
        """Arm ``arm``'s results of the blocks read before the first (by position in :attr:`blocks`):
        constants beside the random order, which goes on over the other blocks."""
        tracker = self.trackers[arm]
        self.trackers[arm] = Tracker(self.goals, self.blocks, tracker.options, known)

    def observe(self, arm: int, block: int, results: Sequence[SampleResult]) -> None:
        tracker = self.trackers[arm]
        if block not in tracker.known:
            tracker.observe(self.blocks[block], results)

    def done(self, arm: int) -> bool:
        return self.trackers[arm].done

    def unreached(self, sample: ScheduledSample, arm: str | None) -> SampleResult | None:
        return ignored_result(sample, arm) if sample.ignored else not_evaluated(sample, arm)

    def settle(self, gates: list[Gate]) -> tuple[list[Gate], EarlyStop | None]:
        """The decisions in place of the ordinary gates, and one record of every arm's decisions, named as
        the trial's gates are (``<arm>/<gate>`` with arms)."""
        records = [t.record() for t in self.trackers]
        named = tuple(d if self.arms.plain else dataclasses.replace(d, name=arm_gate_name(arm.name, d.name))
                      for arm, record in zip(self.arms.arms, records) for d in record.gates)
        record = dataclasses.replace(records[0], samples_evaluated=sum(r.samples_evaluated for r in records),
                                     samples_planned=sum(r.samples_planned for r in records), gates=named)
        return decided_gates(gates, record), record
