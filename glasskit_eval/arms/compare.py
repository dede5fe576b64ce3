"""Arms' results side by side (pure): per arm summaries, every arm against the control, the Pareto set.

Everything is computed from the run's tagged results, once, and rendered by the reporters:

* per arm (and per target of each arm): counts, the pass rate with the interval every report
  uses (``statistics.intervals``: Wilson at the effective sample size), latency p50/p95, usage
  and cost;
* per target and overall, each arm against the control on the samples both evaluated: the
  paired delta (arm minus control) with its interval, the two-sided p-value Holm-adjusted across
  the arms at that scope, and the flips (one passed, the other did not);
* each arm against the control on the stream targets' events (``streamcompare``);
* the Pareto set on pass rate (higher), p95 latency (lower) and cost (lower; left out when no
  arm reports a cost, and an arm reporting none counts as free when others do), among the
  candidates only: an arm with perturbations is a condition the model is tested under
  (robustness, ``evaluation.gates.robustness_gate``), not something to ship, so it is never in the set.

Outcomes are as everywhere: 1 passed, 0 failed or error, ignored samples left out; with
``--repeat`` a sample's outcome is its pass fraction across trials, and the paired tests (the
comparisons' and the robustness gate's, :func:`paired_input`) learn their noise from each sample's
trials in both arms (``statistics.paired.trial_noise``), never from the arm-minus-control
differences, which a drop confined to one stretch of video would make look like noise. Without
repeats the noise comes from the differences (the conservative default); each comparison's
``noise_source`` says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..results import SampleResult, Status, StreamResult
from ..statistics.intervals import PassRateInterval, pass_rate_interval
from ..statistics.paired import (
    NOISE_FROM_REPEATS,
    Pair,
    PairedTest,
    TrialNoise,
    TrialPair,
    trial_noise,
)
from ..statistics.sidebyside import HIGHER, LOWER, holm_across, paired_difference_test, pareto_front
from ..summary import Counts
from .streamcompare import StreamComparison, compare_arm_streams

#: (case, target, sample_index)
Key = tuple[str, str, int]


@dataclass(frozen=True)
class ArmSummary:
    name: str
    counts: Counts
    interval: PassRateInterval | None

    @property
    def pass_rate(self) -> float | None:
        return self.counts.pass_rate

    @property
    def p95(self) -> float | None:
        latency = self.counts.latency
        return latency.p95 if latency is not None else None

    def to_json(self) -> dict[str, Any]:
        c = self.counts
        latency = c.latency
        return {
            "cost": c.cost, "errors": c.errors, "evaluated": c.evaluated, "failed": c.failed,
            "ignored": c.ignored,
            "latency": {"p50_s": latency.p50, "p95_s": latency.p95} if latency is not None else None,
            "pass_rate": c.pass_rate,
            "pass_rate_ci": self.interval.to_json() if self.interval is not None else None,
            "passed": c.passed, "usage": dict(c.usage),
        }


@dataclass(frozen=True)
class Flip:
    case: str
    target: str
    timestamp_s: float
    control_status: Status
    arm_status: Status
    trial: int = 1

    def to_json(self, with_trial: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {"arm_status": self.arm_status.value, "case": self.case,
                                "control_status": self.control_status.value, "target": self.target,
                                "timestamp_s": self.timestamp_s}
        if with_trial:
            data["trial"] = self.trial
        return data


@dataclass(frozen=True)
class ArmComparison:
    control: str
    arm: str
    #: None: every target together.
    target: str | None
    test: PairedTest | None
    flips: tuple[Flip, ...]

    def to_json(self, with_trial: bool = False) -> dict[str, Any]:
        t = self.test
        return {
            "arm": self.arm, "ci": {"low": t.low, "high": t.high} if t is not None else None,
            "control": self.control, "delta_pass_rate": t.delta_pass_rate if t is not None else None,
            "flips": [f.to_json(with_trial) for f in self.flips],
            "p_value": t.p_value if t is not None else None,
            "p_value_raw": t.p_value_raw if t is not None else None,
            "significant": t.significant if t is not None else False,
            "target": self.target,
            "method": t.method if t is not None else None,
            "noise_source": t.noise_source if t is not None else None,
            "family_tests": t.family_tests if t is not None else None,
        }


@dataclass(frozen=True)
class ArmsReport:
    """Everything the reporters show about a run's arms."""

    names: tuple[str, ...]
    control: str
    specs: Mapping[str, Mapping[str, Any]]
    summaries: Mapping[str, ArmSummary]
    #: arm -> target -> summary.
    by_target: Mapping[str, Mapping[str, ArmSummary]]
    comparisons: tuple[ArmComparison, ...]
    pareto: tuple[str, ...]
    repeat: int = 1
    #: ``--baseline``: each arm's diff against its own arm of the baseline (JSON form), by arm.
    baselines: Mapping[str, Mapping[str, Any]] | None = None
    #: Each arm against the control on the stream targets' events (``streamcompare``).
    streams: tuple[StreamComparison, ...] = ()

    def arms_json(self) -> dict[str, Any]:
        found = self.baselines
        return {name: {"by_target": {t: s.to_json() for t, s in self.by_target[name].items()},
                       "spec": dict(self.specs.get(name, {})), "summary": self.summaries[name].to_json()}
                | ({"baseline": dict(found[name]) if name in found else None} if found is not None else {})
                for name in self.names}

    def comparisons_json(self) -> list[dict[str, Any]]:
        return [c.to_json(self.repeat > 1) for c in self.comparisons]

    def stream_comparisons_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.streams]

    @property
    def noise_source(self) -> str | None:
        """``repeats`` when any comparison learnt its noise from the repeats, else ``differences``;
        None without a comparison."""
        sources = {c.test.noise_source for c in self.comparisons if c.test is not None}
        return NOISE_FROM_REPEATS if NOISE_FROM_REPEATS in sources else next(iter(sources), None)

    def overall(self, arm: str) -> ArmComparison | None:
        return next((c for c in self.comparisons if c.arm == arm and c.target is None), None)


def _series(results: Iterable[SampleResult]) -> list[list[float]]:
    """Outcome series (one per case/target, time order) of one arm's results."""
    return [[value for _key, value in items] for items in _outcomes_by_series(results).values()]


def _trials(results: Iterable[SampleResult]) -> dict[Key, tuple[float, list[float]]]:
    """Per sample: (timestamp, its evaluated trials' outcomes in the order the results come: trial order)."""
    found: dict[Key, tuple[float, list[float]]] = {}
    for r in results:
        if r.evaluated:
            found.setdefault(r.key, (r.timestamp_s, []))[1].append(1.0 if r.status is Status.PASSED else 0.0)
    return found


def _outcomes(results: Iterable[SampleResult]) -> dict[Key, tuple[float, float]]:
    """Per sample: (timestamp, pass fraction over its evaluated trials)."""
    return {key: (time, sum(values) / len(values)) for key, (time, values) in _trials(results).items()}


def _outcomes_by_series(results: Iterable[SampleResult]) -> dict[tuple[str, str], list[tuple[Any, float]]]:
    series: dict[tuple[str, str], list[tuple[Any, float]]] = {}
    for (case, target, index), (time, value) in _outcomes(results).items():
        series.setdefault((case, target), []).append(((time, index), value))
    return {key: sorted(items) for key, items in sorted(series.items())}


def paired_trials(control: Iterable[SampleResult], arm: Iterable[SampleResult],
                  target: str | None = None) -> list[list[TrialPair]]:
    """``(control trials, arm trials)`` outcomes of the samples both evaluated, one series per
    (case, target) in time order; each side's trials in trial order."""
    mine = _trials(arm)
    series: dict[tuple[str, str], list[tuple[tuple[float, int], TrialPair]]] = {}
    for key, (time, values) in _trials(control).items():
        if key in mine and (target is None or key[1] == target):
            series.setdefault(key[:2], []).append(((time, key[2]), (values, mine[key][1])))
    return [[pair for _order, pair in sorted(items, key=lambda item: item[0])]
            for _key, items in sorted(series.items())]


def _means(trials: Sequence[Sequence[TrialPair]]) -> list[list[Pair]]:
    return [[(sum(c) / len(c), sum(a) / len(a)) for c, a in samples] for samples in trials]


def paired_series(control: Iterable[SampleResult], arm: Iterable[SampleResult],
                  target: str | None = None) -> list[list[Pair]]:
    """``(control, arm)`` outcome pairs of the samples both evaluated, one series per (case, target)."""
    return _means(paired_trials(control, arm, target))


def paired_input(control: Iterable[SampleResult], arm: Iterable[SampleResult],
                 target: str | None = None) -> tuple[list[list[Pair]], TrialNoise | None]:
    """What a paired test of ``arm`` against ``control`` takes: :func:`paired_series` and, when a
    sample has two or more trials in either arm, the noise the repeats show (None: learn it from
    the differences)."""
    trials = paired_trials(control, arm, target)
    repeated = any(len(side) >= 2 for samples in trials for pair in samples for side in pair)
    return _means(trials), trial_noise(trials) if repeated else None


def flips(control: Sequence[SampleResult], arm: Sequence[SampleResult], target: str | None = None) -> list[Flip]:
    """Samples of one trial that passed in one arm and failed or errored in the other, in time order."""
    theirs = {r.key: r for r in arm if r.evaluated}
    found = []
    for r in control:
        other = theirs.get(r.key)
        if not r.evaluated or other is None or (target is not None and r.target != target):
            continue
        if (r.status is Status.PASSED) != (other.status is Status.PASSED):
            found.append(Flip(r.case, r.target, r.timestamp_s, r.status, other.status))
    return sorted(found, key=lambda f: (f.case, f.target, f.timestamp_s))


def compare_arms(trials: Sequence[Sequence[SampleResult]], names: Sequence[str], control: str,
                 specs: Mapping[str, Mapping[str, Any]] | None = None, *, alpha: float = 0.05,
                 confidence: float = 0.95, streams: Sequence[StreamResult] = ()) -> ArmsReport:
    """The arms report of a run: ``trials`` are each trial's results (every arm's, tagged), ``streams``
    every trial's stream results."""
    by_arm: dict[str, list[SampleResult]] = {n: [] for n in names}
    per_trial: dict[str, list[list[SampleResult]]] = {n: [[] for _ in trials] for n in names}
    for number, results in enumerate(trials):
        for r in results:
            if r.arm in by_arm:
                by_arm[r.arm].append(r)
                per_trial[r.arm][number].append(r)
    summaries = {n: _named(n, by_arm[n], confidence) for n in names}
    targets = sorted({r.target for rs in by_arm.values() for r in rs})
    by_target = {n: {t: _named(n, [r for r in by_arm[n] if r.target == t], confidence)
                     for t in targets if any(r.target == t for r in by_arm[n])} for n in names}
    comparisons: list[ArmComparison] = []
    others = [n for n in names if n != control]
    for scope in [None, *targets]:
        tests = {n: _test(paired_input(by_arm[control], by_arm[n], scope), alpha, confidence) for n in others}
        present = [n for n in others if tests[n] is not None]
        adjusted = dict(zip(present, holm_across([t for n in present if (t := tests[n]) is not None])))
        for n in others:
            found = []
            for number in range(len(trials)):
                found += [Flip(f.case, f.target, f.timestamp_s, f.control_status, f.arm_status, number + 1)
                          for f in flips(per_trial[control][number], per_trial[n][number], scope)]
            comparisons.append(ArmComparison(control, n, scope, adjusted.get(n), tuple(found)))
    return ArmsReport(tuple(names), control, dict(specs or {}), summaries, by_target, tuple(comparisons),
                      tuple(pareto({n: s for n, s in summaries.items() if not is_condition((specs or {}).get(n))})),
                      len(trials), streams=tuple(compare_arm_streams(streams, names, control)))


def _test(found: tuple[list[list[Pair]], TrialNoise | None], alpha: float, confidence: float) -> PairedTest | None:
    series, noise = found
    return paired_difference_test(series, alpha, confidence, noise)


def is_condition(spec: Mapping[str, Any] | None) -> bool:
    """An arm that perturbs its frames: a condition for robustness, never a Pareto candidate."""
    return bool(spec and spec.get("perturb"))


def _named(name: str, results: Sequence[SampleResult], confidence: float) -> ArmSummary:
    return ArmSummary(name, Counts.of(results), pass_rate_interval(_series(results), confidence))


def pareto(summaries: Mapping[str, ArmSummary]) -> list[str]:
    """Arms on the Pareto front of pass rate, p95 latency and (when any arm reports one) cost."""
    with_cost = any(s.counts.cost is not None for s in summaries.values())
    points: dict[str, list[float]] = {}
    for name, s in summaries.items():
        if s.pass_rate is None:
            continue  # nothing evaluated: not a candidate
        values = [s.pass_rate, s.p95 if s.p95 is not None else float("inf")]
        if with_cost:
            values.append(s.counts.cost or 0.0)
        points[name] = values
    directions = [HIGHER, LOWER, LOWER] if with_cost else [HIGHER, LOWER]
    return pareto_front(points, directions)
