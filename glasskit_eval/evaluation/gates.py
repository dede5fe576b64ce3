"""Quality gates: every :class:`~glasskit_eval.results.Gate` is made here (pure); reports only render them.

What lives here: the trial's gates with their thresholds precedence (below), the run's gates
(flaky samples, p95 latency, cost), stream gates (recall, false alarms, detection latency; which
targets and cases get them is ``streamgates``'), the baseline gates (``--fail-on-regression``,
``--fail-on-latency-regression``: the CI verdict on a :class:`~glasskit_eval.reports.baseline.BaselineDiff`),
the arms' robustness gate and an arm's copy of any gate (``<arm>/<gate>``).

Precedence (upstream manual, "Threshold precedence"): ``--min-pass-rate`` and
``--max-failures`` override the eval-level keys of config.yaml and switch off
every case-level gate; ``--min-target-pass-rate`` replaces config.yaml's
``per_target`` gates; eval-level per-target gates are skipped for targets with
no selected results, but one naming a target no selected case declares fails
(``undeclared``), as upstream. ``adapter_errors`` is always present.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, TypeVar

from ..arms.compare import paired_input
from ..cases.model import StreamGates, Thresholds
from ..reports.baseline import BaselineDiff, latency_change_text, paired_test_text
from ..reports.early_stop import decision_line
from ..results import EarlyStop, Gate, SampleResult, Status, StreamMetrics, TrialResult, stability
from ..statistics.paired import NOISE_FROM_REPEATS, p_text, paired_regression_test
from ..summary import Counts
from ..support.timevalues import format_duration

#: What a gate with a maximum measures: seconds as a float, or an exact stream figure.
Measure = TypeVar("Measure", float, Fraction)


@dataclass(frozen=True)
class GateOptions:
    """The gates the command line sets; each one given wins over its config.yaml key."""

    min_pass_rate: float | None = None
    min_target_pass_rate: float | None = None
    max_failures: int | None = None
    max_flaky_samples: int | None = None
    max_p95_latency_s: float | None = None
    max_cost: float | None = None
    #: ``--min-recall``, ``--max-false-alarms-per-min``, ``--max-detection-latency-p95``: every stream target.
    streams: StreamGates = field(default_factory=StreamGates)

    def eval_gates(self, thresholds: Thresholds) -> list[tuple[str, float | None, int | None]]:
        """The eval-wide gates as (name, minimum pass rate, maximum failures), one limit set in each.

        Each limit is the option where given, else config.yaml's.
        """
        min_rate = self.min_pass_rate if self.min_pass_rate is not None else thresholds.min_pass_rate
        max_failures = self.max_failures if self.max_failures is not None else thresholds.max_failures
        return ([("eval_min_pass_rate", min_rate, None)] if min_rate is not None else []) + (
            [("eval_max_failures", None, max_failures)] if max_failures is not None else [])


@dataclass(frozen=True)
class CaseThresholds:
    case: str
    thresholds: Thresholds | None


def _pct(value: float | Fraction) -> str:
    return f"{float(value) * 100:.1f}%"


def _rate_gate(name: str, results: Sequence[SampleResult], minimum: float) -> Gate:
    counts = Counts.of(results)
    # Upstream reports a pass rate of 0.0 when nothing was evaluated, so a pass-rate
    # gate over only ignored samples fails unless its minimum is 0.
    rate = counts.pass_rate or 0.0
    # Compare counts, not floats, so 50% of 6 against a 0.5 gate is a pass.
    passed = counts.passed >= minimum * counts.evaluated - 1e-9 if counts.evaluated else minimum <= 0
    return Gate(name, passed, f"{_pct(rate)} pass rate (gate: >= {_pct(minimum)})")


def _failures_gate(name: str, results: Sequence[SampleResult], maximum: int, prefix: str = "") -> Gate:
    failures = Counts.of(results).failed
    return Gate(name, failures <= maximum, f"{prefix}{failures} failures (gate: <= {maximum})")


def evaluate_gates(results: Sequence[SampleResult], *, options: GateOptions,
                   eval_thresholds: Thresholds | None, cases: Sequence[CaseThresholds],
                   undeclared: Mapping[str, str] | None = None) -> list[Gate]:
    """The gates of one trial, in upstream's order.

    ``undeclared`` maps the eval-level ``per_target`` targets that no selected case
    declares (without a case or target filter) to the message of their failing gate.

    ``results`` are all results of the trial, ignored ones included: a target
    counts as present for YAML ``per_target`` gates when it has any selected
    result, but ``--min-target-pass-rate`` only gates targets with evaluated ones
    (both as upstream does). Ignored results never count towards a rate.
    """
    evaluated = [r for r in results if r.evaluated]
    errors = sum(1 for r in evaluated if r.status is Status.ERROR)
    gates = [Gate("adapter_errors", errors == 0,
                  "no adapter/comparison errors" if errors == 0 else f"{errors} adapter/comparison errors")]

    eval_t = eval_thresholds or Thresholds()
    for name, minimum, maximum in options.eval_gates(eval_t):
        if minimum is not None:
            gates.append(_rate_gate(name, evaluated, minimum))
        elif maximum is not None:
            gates.append(_failures_gate(name, evaluated, maximum))

    if options.min_target_pass_rate is not None:
        for target in sorted({r.target for r in evaluated}):
            subset = [r for r in evaluated if r.target == target]
            gates.append(_rate_gate(f"all_targets_{target}_min_pass_rate", subset, options.min_target_pass_rate))
    else:
        present = {r.target for r in results}
        for target, minimum in (eval_t.per_target or {}).items():
            if target in present:
                subset = [r for r in evaluated if r.target == target]
                gates.append(_rate_gate(f"eval_{target}_min_pass_rate", subset, minimum))
            elif undeclared and target in undeclared:
                gates.append(Gate(f"eval_{target}_min_pass_rate", False, undeclared[target]))

    if options.min_pass_rate is None and options.max_failures is None:
        for entry in cases:
            t = entry.thresholds
            if t is None:
                continue
            in_case = [r for r in evaluated if r.case == entry.case]
            if t.min_pass_rate is not None:
                gates.append(_rate_gate(f"{entry.case}_min_pass_rate", in_case, t.min_pass_rate))
            if t.max_failures is not None:
                gates.append(_failures_gate(f"{entry.case}_max_failures", in_case, t.max_failures,
                                            prefix=f"{entry.case}: "))
            present_in_case = {r.target for r in results if r.case == entry.case}
            for target, minimum in (t.per_target or {}).items():
                if target in present_in_case:
                    subset = [r for r in in_case if r.target == target]
                    gates.append(_rate_gate(f"{entry.case}_{target}_min_pass_rate", subset, minimum))
    return gates


def flaky_gate(flaky_samples: int, maximum: int) -> Gate:
    return Gate("max_flaky_samples", flaky_samples <= maximum,
                f"{flaky_samples} flaky samples (gate: <= {maximum})")


def _at_most(name: str, value: Measure | None, limit: Measure, unmeasured: str,
             measured: Callable[[Measure, bool], str]) -> Gate:
    """A gate on a measure a run may lack: it passes without one (``unmeasured`` says why)."""
    if value is None:
        return Gate(name, True, unmeasured)
    passed = value <= limit
    return Gate(name, passed, measured(value, passed))


def latency_gate(p95: float | None, maximum: float) -> Gate:
    """``--max-p95-latency``: the run's p95 evaluation duration (nearest rank)."""
    return _at_most("max_p95_latency", p95, maximum, f"no evaluation durations (gate: p95 <= {format_duration(maximum)})",
                    lambda seconds, passed: f"p95 latency {format_duration(seconds)} {'<=' if passed else '>'} "
                                            f"{format_duration(maximum)}")


def cost_gate(cost: float | None, maximum: float) -> Gate:
    """``--max-cost``: the run's summed reported ``cost`` (every trial, resumed results included)."""
    if cost is None:
        return Gate("max_cost", True, f"the adapter reported no cost (gate: <= {maximum:g})")
    passed = cost <= maximum
    return Gate("max_cost", passed, f"cost {cost:.6g} {'<=' if passed else '>'} {maximum:g}")


def run_gates(trials: Sequence[TrialResult], options: GateOptions, thresholds: Thresholds | None) -> list[Gate]:
    """The gates over the whole run (every trial): flaky samples, p95 latency and cost.

    For latency and cost the command line wins over config.yaml.
    """
    gates = []
    if options.max_flaky_samples is not None:
        flaky = sum(1 for s in stability(trials) if s.flaky)
        gates.append(flaky_gate(flaky, options.max_flaky_samples))
    eval_t = thresholds or Thresholds()
    max_p95 = options.max_p95_latency_s if options.max_p95_latency_s is not None else eval_t.max_p95_latency_s
    max_cost = options.max_cost if options.max_cost is not None else eval_t.max_cost
    if max_p95 is None and max_cost is None:
        return gates
    counts = Counts.of(r for t in trials for r in t.results)
    if max_p95 is not None:
        latency = counts.latency
        gates.append(latency_gate(latency.p95 if latency is not None else None, max_p95))
    if max_cost is not None:
        gates.append(cost_gate(counts.cost, max_cost))
    return gates


# --- streams -------------------------------------------------------------------------------


def recall_gate(name: str, metrics: StreamMetrics, minimum: float) -> Gate:
    if metrics.recall is None:
        return Gate(name, True, f"no events (gate: recall >= {_pct(minimum)})")
    # Exact: detected >= minimum * events, so 9 of 10 passes a 0.9 gate.
    passed = metrics.detected >= Fraction(minimum) * metrics.events - Fraction(1, 10**9)
    return Gate(name, passed, f"recall {_pct(metrics.recall)} ({metrics.detected}/{metrics.events} events) "
                f"(gate: >= {_pct(minimum)})")


def false_alarm_gate(name: str, metrics: StreamMetrics, maximum: float) -> Gate:
    return _at_most(name, metrics.false_alarms_per_min, Fraction(maximum),
                    f"no quiet time (gate: <= {maximum:g} false alarms per minute)",
                    lambda rate, _passed: f"{float(rate):.3g} false alarms per minute ({metrics.false_alarms} in "
                                          f"{float(metrics.quiet_s):g}s of quiet time) (gate: <= {maximum:g})")


def latency_p95_gate(name: str, metrics: StreamMetrics, maximum: float) -> Gate:
    return _at_most(name, metrics.latency_p95, Fraction(maximum),
                    f"no detections (gate: p95 detection latency <= {maximum:g}s)",
                    lambda p95, passed: f"p95 detection latency {float(p95):.3f}s {'<=' if passed else '>'} "
                                        f"{maximum:g}s")


def stream_errors_gate(errors: int) -> Gate:
    """Present only when streams stopped on an adapter error: it always fails."""
    return Gate("stream_errors", False, f"{errors} streams stopped on an adapter error")


# --- against a baseline --------------------------------------------------------------------


def baseline_gate(found: BaselineDiff, mode: str = "any") -> Gate:
    """``--fail-on-regression``: any pass->fail or new error, or (``significant``) a real drop."""
    if mode == "significant":
        family = found.significance
        overall = family.overall if family is not None else None
        passed = family is None or not family.any_significant
        message = (f"{found.verdict}: {paired_test_text(overall)}" if overall is not None
                   else "no matched samples to test")
        return Gate("baseline_significant_regression", passed, message)
    n_fail, n_error = found.count("pass_to_fail"), found.count("new_error")
    missed = f", {found.streams.regressions} detected->missed events" if found.streams is not None else ""
    message = ("no regressions against the baseline" if not found.regressions
               else f"{n_fail} pass->fail, {n_error} new errors{missed} against the baseline")
    return Gate("baseline_regressions", found.regressions == 0, message)


def baseline_latency_gate(found: BaselineDiff, seconds: float) -> Gate:
    """``--fail-on-latency-regression S``: the median latency change is surely above S seconds."""
    change = found.latency
    if change is None:
        return Gate("baseline_latency_regression", True, "no paired latencies to compare")
    return Gate("baseline_latency_regression", not change.exceeds(seconds),
                f"{latency_change_text(change)}; gate: interval's low end <= {format_duration(seconds)}")


# --- arms ----------------------------------------------------------------------------------


def arm_gate_name(arm: str, gate: str) -> str:
    """``<arm>/<gate>``: how a run with arms names an arm's gate (and its early-stop decision)."""
    return f"{arm}/{gate}"


def arm_gates(arm: str, gates: Iterable[Gate]) -> list[Gate]:
    """``gates`` as an arm's: each named ``<arm>/<gate>``."""
    return [Gate(arm_gate_name(arm, g.name), g.passed, g.message) for g in gates]


def robustness_gate(results: Sequence[SampleResult], control: str, arm: str, max_drop: float,
                    alpha: float = 0.05) -> Gate:
    """``<arm>/max_robustness_drop``: fails when the arm's pass rate is more than ``max_drop`` below
    the control's on the same samples and the drop is significant (one-sided paired test at ``alpha``).

    ``results``: every trial's, in trial order. With repeats the test learns its noise from each
    sample's trials (``arms.compare.paired_input``): a perturbation that breaks one stretch of
    video is weighed against the adapter's own noise, not against itself.
    """
    name = arm_gate_name(arm, "max_robustness_drop")
    mine = [r for r in results if r.arm == arm]
    theirs = [r for r in results if r.arm == control]
    series, noise = paired_input(theirs, mine)
    test = paired_regression_test(series, alpha, noise=noise)
    if test is None:
        return Gate(name, True, f"no samples both {control} and {arm} evaluated (gate: drop <= {max_drop:.1%})")
    drop = -test.delta_pass_rate
    failed = drop > max_drop + 1e-12 and test.significant
    change = f"{drop:.1%} below" if drop > 0 else f"{-drop:.1%} above" if drop < 0 else "no change from"
    repeats = ", noise from the repeats" if test.noise_source == NOISE_FROM_REPEATS else ""
    return Gate(name, not failed, f"pass rate {change} {control} (one-sided {p_text(test.p_value)}{repeats}; "
                f"gate: no significant drop beyond {max_drop:.1%})")


class GatedArms(Protocol):
    """Who a run's arms are and which of them are gated: the run's
    :class:`~glasskit_eval.arms.plan.ArmPlan`, or the arms a shard report carries (``merge-reports``)."""

    @property
    def plain(self) -> bool: ...

    @property
    def names(self) -> tuple[str, ...]: ...

    def gated(self, name: str) -> bool: ...


def per_arm(arms: GatedArms | None, gates_of: Callable[[str | None], Sequence[Gate]]) -> list[Gate]:
    """``gates_of(arm)`` for every gated arm, named ``<arm>/<gate>``; a plain run's gates (``arms``
    plain or None) keep their names."""
    if arms is None or arms.plain:
        return list(gates_of(None))
    out: list[Gate] = []
    for name in arms.names:
        if arms.gated(name):
            out += arm_gates(name, gates_of(name))
    return out


def arm_trials(trials: Sequence[TrialResult], arm: str | None) -> list[TrialResult]:
    """Each trial as ``arm`` alone saw it: its results and streams, without the trial's gates."""
    return [TrialResult(t.trial, tuple(r for r in t.results if r.arm == arm), (), t.duration_seconds, t.timing_mode,
                        streams=tuple(s for s in t.streams if s.arm == arm)) for t in trials]


#: ``--max-blind-pass-rate``'s gate.
BLIND_GATE = "blind_pass_rate"


def blind_gate(trials: Sequence[TrialResult], control: str, blind: Sequence[str], maximum: float) -> Gate:
    """``--max-blind-pass-rate``: fails when a blind arm (frames blanked, averaged or shuffled) still
    passes more than ``maximum`` of the attempts the control passes (same trial and sample).

    An adapter that reads its pixels cannot pass a sample it cannot see, except where the blind
    answer happens to be right; one that ignores them passes all the control passes.
    """
    results = [(t.trial, r) for t in trials for r in t.results]
    passed = {(n, r.key) for n, r in results if r.arm == control and r.status is Status.PASSED}
    if not blind:
        return Gate(BLIND_GATE, True, f"no blind arm (gate: <= {_pct(maximum)} of the control's passes)")
    if not passed:
        return Gate(BLIND_GATE, True, f"{control} passed no sample (gate: <= {_pct(maximum)} of its passes)")
    rates = []
    for arm in blind:
        kept = sum(1 for n, r in results if r.arm == arm and r.status is Status.PASSED and (n, r.key) in passed)
        rates.append((arm, kept, kept / len(passed)))
    worst = max(rate for _arm, _kept, rate in rates)
    text = "; ".join(f"{arm} passes {kept} of the {len(passed)} {control} passes ({_pct(rate)})"
                     for arm, kept, rate in rates)
    return Gate(BLIND_GATE, worst <= maximum + 1e-12,
                f"{text} (gate: <= {_pct(maximum)}; above it the adapter is not looking at the frames)")


def arm_comparison_gates(trials: Sequence[TrialResult], *, control: str, perturbed: Sequence[str],
                         blind: Sequence[str], max_robustness_drop: float | None, alpha: float,
                         max_blind_pass_rate: float | None) -> list[Gate]:
    """The run's gates that weigh arms against the control: the robustness gate of each perturbation
    arm in ``perturbed`` (neither the control nor a blind arm), then the blind gate."""
    gates = []
    if max_robustness_drop is not None:
        every = [r for t in trials for r in t.results]
        gates += [robustness_gate(every, control, arm, max_robustness_drop, alpha)
                  for arm in perturbed if arm != control and arm not in blind]
    if max_blind_pass_rate is not None:
        gates.append(blind_gate(trials, control, blind, max_blind_pass_rate))
    return gates


def decided_gates(gates: Iterable[Gate], record: EarlyStop) -> list[Gate]:
    """``--early-stop``: ``gates`` with each early decision in place of the ordinary gate of the same name."""
    early = {d.name: d for d in record.gates if d.early}
    return [Gate(g.name, early[g.name].verdict == "pass", decision_line(early[g.name], record.alpha))
            if g.name in early else g for g in gates]
