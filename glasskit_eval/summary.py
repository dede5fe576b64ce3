"""One summary of a run, computed once from its results and rendered by every reporter.

:class:`RunResult` is what a run produced (trials, run-level gates, duration); :class:`RunSummary`
is every number a reporter shows about it: counts overall, per trial, per target and per case,
trial pass rates, stability and success. The console, JSON, JUnit, annotations, HTML and
merged-shard reporters read these fields and never count results themselves.

A stream's figures are made here too (:func:`stream_metrics`), and pooled over several streams
(:func:`pooled_streams`) by the one rule the stream gates and the arms' stream comparison share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from .results import (
    ErrorKind,
    EventOutcome,
    Gate,
    SampleResult,
    Stability,
    Status,
    StreamMetrics,
    StreamResult,
    TimingMode,
    TrialResult,
    stability,
)
from .statistics.descriptive import percentile
from .statistics.intervals import PassRateInterval, pass_rate_interval
from .statistics.power import minimum_detectable_drop

#: The confidence level of every interval, and the false-alarm rate of every test, unless the
#: command line says otherwise (``--confidence``, ``--alpha``).
DEFAULT_CONFIDENCE = 0.95
DEFAULT_ALPHA = 0.05
#: The power the smallest detectable drop is quoted at.
POWER = 0.8


@dataclass(frozen=True, slots=True)
class Counts:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    ignored: int = 0
    #: Sum of evaluation durations (seconds) of the evaluated results that have one.
    duration_total: float = 0.0
    #: Results whose adapter call was attempted more than once (``--retries``).
    retried: int = 0
    #: Error results whose last call ran past ``--timeout``.
    timeouts: int = 0
    #: Summed usage (name -> number), names sorted.
    usage: tuple[tuple[str, float], ...] = ()
    #: Evaluation durations of the evaluated results that have one, sorted (latency percentiles).
    durations: tuple[float, ...] = ()
    #: Whole-call durations of batch results (one per sample of each call), sorted.
    call_durations: tuple[float, ...] = ()
    #: ``run --early-stop``: samples left without a call once every gate was decided.
    not_evaluated: int = 0

    @classmethod
    def of(cls, results: Iterable[SampleResult]) -> Counts:
        passed = failed = errors = ignored = retried = timeouts = not_evaluated = 0
        duration = 0.0
        usage: dict[str, float] = {}
        durations: list[float] = []
        calls: list[float] = []
        for r in results:
            if r.call_duration_seconds is not None:
                calls.append(r.call_duration_seconds)
            if r.attempts is not None and r.attempts > 1:
                retried += 1
            if r.error_kind is ErrorKind.TIMEOUT and r.status is Status.ERROR:
                timeouts += 1
            if r.usage:
                for key, value in r.usage.items():
                    usage[key] = usage.get(key, 0) + value
            if r.evaluation_duration_seconds is not None and r.status is not Status.IGNORED:
                durations.append(r.evaluation_duration_seconds)
            status = r.status
            if status is Status.PASSED:
                passed += 1
            elif status is Status.FAILED:
                failed += 1
            elif status is Status.ERROR:
                errors += 1
            elif status is Status.NOT_EVALUATED:
                not_evaluated += 1
            else:
                ignored += 1
            if r.evaluation_duration_seconds:
                duration += r.evaluation_duration_seconds
        return cls(passed, failed, errors, ignored, duration, retried, timeouts, tuple(sorted(usage.items())),
                   tuple(sorted(durations)), tuple(sorted(calls)), not_evaluated)

    @property
    def latency(self) -> Latency | None:
        """Of evaluation durations (batch calls: each sample's amortized share)."""
        return Latency.of(self.durations)

    @property
    def call_latency(self) -> Latency | None:
        """Of whole batch calls (weighted by their samples); None without batch calls."""
        return Latency.of(self.call_durations)

    @property
    def cost(self) -> float | None:
        return dict(self.usage).get("cost")

    @property
    def evaluated(self) -> int:
        return self.passed + self.failed + self.errors

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.evaluated if self.evaluated else None

    @property
    def average_latency(self) -> float | None:
        return self.duration_total / self.evaluated if self.evaluated else None


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of evaluation durations (nearest rank: p95 is a duration some sample really took)."""

    p50: float
    p90: float
    p95: float
    max: float
    count: int

    @classmethod
    def of(cls, ordered: tuple[float, ...]) -> Latency | None:
        if not ordered:
            return None
        return cls(percentile(ordered, 50), percentile(ordered, 90), percentile(ordered, 95), ordered[-1],
                   len(ordered))

    def to_json(self) -> dict[str, float | int]:
        return {"count": self.count, "max_s": self.max, "p50_s": self.p50, "p90_s": self.p90, "p95_s": self.p95}


@dataclass(frozen=True, slots=True)
class CaseHeader:
    """What a live display says of a case before its results come (no plan or video object)."""

    name: str
    #: Samples this trial evaluates in the case (a resume shows only what is left).
    samples: int
    #: The video's file name, or how a cloud video is described.
    video: str
    #: The case's targets in declaration order, as (id, label).
    targets: tuple[tuple[str, str | None], ...]
    #: Stream targets this trial feeds in the case (after its samples).
    streams: int = 0


@dataclass(frozen=True, slots=True)
class RunResult:
    """What one run (or a resumed one) produced."""

    eval_dir: str
    #: Selected case names, in run order.
    cases: tuple[str, ...]
    repeat: int
    trials: tuple[TrialResult, ...]
    #: Run-level gates (flaky samples, p95 latency, cost, the baseline), evaluated after every trial.
    gates: tuple[Gate, ...]
    duration_seconds: float


@dataclass(frozen=True, slots=True)
class TrialSummary:
    trial: TrialResult
    counts: Counts
    pass_rate_ci: PassRateInterval | None = None

    @property
    def throughput(self) -> float | None:
        duration = self.trial.duration_seconds
        return self.counts.evaluated / duration if duration > 0 else None


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One target (or one case) across the run."""

    name: str
    #: ``Label (id)`` for targets that have a label, else the id (cases: the name).
    display: str
    counts: Counts
    #: Pass rate of each trial that evaluated something in this group.
    trial_rates: tuple[float, ...]
    stability: tuple[Stability, ...]
    pass_rate_ci: PassRateInterval | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """A failed or errored attempt, with its one-based trial."""

    trial: int
    result: SampleResult


#: The gate every trial has; the others check correctness and exist only when configured.
ADAPTER_ERRORS_GATE = "adapter_errors"


@dataclass(frozen=True, slots=True)
class RunSummary:
    run: RunResult
    total: Counts
    trials: tuple[TrialSummary, ...]
    stability: tuple[Stability, ...]
    #: Each trial's pass rate; 0.0 for a trial that evaluated nothing (as upstream reports it).
    trial_rates: tuple[float, ...]
    #: Targets sorted by display name, case-insensitively.
    targets: tuple[GroupSummary, ...]
    #: Cases in run order.
    cases: tuple[GroupSummary, ...]
    #: Every failed or errored attempt, in run order (trial, case, declaration).
    failures: tuple[Failure, ...] = ()
    #: The run's pass rate with its interval: one outcome per sample (its pass fraction across
    #: trials), neighbouring samples' correlation counted (see ``statistics``).
    pass_rate_ci: PassRateInterval | None = None
    confidence: float = DEFAULT_CONFIDENCE
    alpha: float = DEFAULT_ALPHA
    #: The smallest pass-rate drop a rerun compared with this one would show as significant with
    #: 80% power at ``alpha``; None when the eval is too small to see any.
    minimum_detectable_drop: float | None = None
    #: In a run with arms: the arm whose figures these are (the control); arms are never pooled.
    arm: str | None = None

    @classmethod
    def of(cls, run: RunResult, *, confidence: float = DEFAULT_CONFIDENCE,
           alpha: float = DEFAULT_ALPHA, control: str | None = None) -> RunSummary:
        """The run's figures; with arms, the ``control`` arm's alone (the others are in the arms
        report), while ``run`` and ``failures`` keep every arm's results."""
        whole = run
        if control is not None:
            run = replace(run, trials=tuple(replace(t, results=tuple(r for r in t.results if r.arm == control))
                                            for t in run.trials))
        trials = tuple(TrialSummary(t, Counts.of(t.results), pass_rate_interval(outcome_series([t]), confidence))
                       for t in run.trials)
        stable = stability(run.trials)
        everything = [r for t in run.trials for r in t.results]
        displays: dict[str, str] = {}
        for r in everything:
            displays.setdefault(r.target, target_display(r))
        targets = tuple(_group(name, displays[name], run.trials, stable, _target_of, confidence)
                        for name in sorted(displays, key=lambda t: displays[t].lower()))
        cases = tuple(_group(name, name, run.trials, stable, _case_of, confidence) for name in run.cases)
        interval = pass_rate_interval(outcome_series(run.trials), confidence)
        detectable = None
        if interval is not None:
            detectable = minimum_detectable_drop(interval.effective_samples, interval.rate, alpha=alpha, power=POWER)
        trials = tuple(replace(mine, trial=t) for mine, t in zip(trials, whole.trials))
        return cls(run=whole, total=Counts.of(everything), trials=trials, stability=stable,
                   trial_rates=tuple(t.counts.pass_rate or 0.0 for t in trials),
                   targets=targets, cases=cases,
                   failures=tuple(Failure(t.trial, r) for t in whole.trials for r in t.results
                                  if r.status in (Status.FAILED, Status.ERROR)),
                   pass_rate_ci=interval, confidence=confidence, alpha=alpha, minimum_detectable_drop=detectable,
                   arm=control)

    @property
    def success(self) -> bool:
        return all(t.success for t in self.run.trials) and all(g.passed for g in self.run.gates)

    @property
    def first(self) -> Counts:
        """The first trial's counts: per-sample figures (every trial selects the same samples)."""
        return self.trials[0].counts if self.trials else self.total

    @property
    def timing_mode(self) -> TimingMode | None:
        return self.run.trials[0].timing_mode if self.run.trials else None

    @property
    def resumable_adapter_errors(self) -> int:
        return sum(1 for t in self.run.trials for r in t.results if r.resumable_error)

    def failed_gates(self) -> list[tuple[str, Gate]]:
        """(scope, gate) for every failed gate: ``Trial N`` or ``Stability``."""
        out = [(f"Trial {t.trial}", g) for t in self.run.trials for g in t.gates if not g.passed]
        out += [(run_gate_scope(g), g) for g in self.run.gates if not g.passed]
        return out

    @property
    def correctness_gated(self) -> bool:
        """Whether any gate judges correctness (pass rates, failures, flakiness), not only errors."""
        return any(g.name != ADAPTER_ERRORS_GATE for t in self.run.trials for g in t.gates) or bool(self.run.gates)

    def stability_counts(self) -> StabilityCounts:
        return StabilityCounts.of(self.stability)


@dataclass(frozen=True, slots=True)
class StabilityCounts:
    consistently_passed: int
    consistently_failed: int
    flaky: int
    #: Samples with an error in at least one trial.
    with_errors: int

    @classmethod
    def of(cls, items: Iterable[Stability]) -> StabilityCounts:
        cp = cf = flaky = errors = 0
        for s in items:
            cp += s.consistently_passed
            cf += s.consistently_failed
            flaky += s.flaky
            errors += s.has_errors
        return cls(cp, cf, flaky, errors)


def stream_metrics(outcomes: Sequence[EventOutcome], repeats: int, false_alarms: int,
                   quiet_s: Fraction) -> StreamMetrics:
    """The figures of one stream (or of several pooled: their outcomes and counts together)."""
    detected = sum(1 for o in outcomes if o.detected)
    latencies = tuple(sorted(o.latency for o in outcomes if o.latency is not None))
    total = detected + false_alarms
    return StreamMetrics(
        events=len(outcomes), detected=detected, repeats=repeats, false_alarms=false_alarms, quiet_s=quiet_s,
        recall=Fraction(detected, len(outcomes)) if outcomes else None,
        precision=Fraction(detected, total) if total else None,
        false_alarms_per_min=false_alarms / (quiet_s / 60) if quiet_s else None,
        latency_p50=percentile(latencies, 50) if latencies else None,
        latency_p95=percentile(latencies, 95) if latencies else None,
        latency_max=latencies[-1] if latencies else None,
        latencies=latencies)


def pooled_streams(streams: Iterable[StreamResult]) -> StreamMetrics:
    """Several streams' figures as one (a target's over its cases, an arm's over its trials):
    events, emissions and quiet time added up."""
    given = list(streams)
    return stream_metrics([o for s in given for o in s.events], sum(s.metrics.repeats for s in given),
                          sum(s.metrics.false_alarms for s in given), sum((s.metrics.quiet_s for s in given), Fraction(0)))


def run_gate_scope(gate: Gate) -> str:
    """How tables name a run-level gate's scope: stability across trials, or the run as a whole."""
    return "Stability" if gate.name == "max_flaky_samples" else "Run"


def target_display(result: SampleResult) -> str:
    return f"{result.target_label} ({result.target})" if result.target_label else result.target


def _target_of(result: SampleResult) -> str:
    return result.target


def _case_of(result: SampleResult) -> str:
    return result.case


def outcome_series(trials: Sequence[TrialResult],
                   keep: Callable[[SampleResult], bool] = lambda _r: True) -> list[list[float]]:
    """The outcomes the statistics work on: one series per (case, target), in time order.

    A sample's outcome is 1 (passed) or 0 (failed or error); over several trials, the fraction of
    its evaluated trials that passed. Ignored samples are not outcomes.
    """
    samples: dict[tuple[str, str, str, int], list[float]] = {}
    for trial in trials:
        for r in trial.results:
            if r.evaluated and keep(r):
                # Each arm's outcomes are a series of their own (arms: side by side, not repeats).
                entry = samples.setdefault((r.arm or "", *r.key), [r.timestamp_s, 0, 0])
                entry[1] += r.status is Status.PASSED
                entry[2] += 1
    series: dict[tuple[str, str, str], list[tuple[float, int, float]]] = {}
    for (arm, case, target, index), (time, passes, evaluated) in samples.items():
        series.setdefault((arm, case, target), []).append((time, index, passes / evaluated))
    return [[value for _time, _index, value in sorted(items)] for _key, items in sorted(series.items())]


def _group(name: str, display: str, trials: tuple[TrialResult, ...], stable: tuple[Stability, ...],
           key: Callable[[SampleResult], str], confidence: float) -> GroupSummary:
    rates = []
    mine: list[SampleResult] = []
    for t in trials:
        in_trial = [r for r in t.results if key(r) == name]
        mine.extend(in_trial)
        rate = Counts.of(in_trial).pass_rate
        if rate is not None:
            rates.append(rate)
    return GroupSummary(name, display, Counts.of(mine), tuple(rates),
                        tuple(s for s in stable if key(s.first) == name),
                        pass_rate_interval(outcome_series(trials, lambda r: key(r) == name), confidence))
