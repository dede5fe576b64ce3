"""Comparison with a previous run's JSON report (ours or the upstream tool's; pure but for loading).

Samples are matched by (case, target, timestamp); sample indexes are not used, because adding a
block earlier in a target renumbers the samples after it. With ``--repeat`` a sample's status
is the worst of its trials (error, then failed, then passed; ignored only if every trial was), so a
flaky sample counts as failing on either side. Regressions are pass->fail and new errors. A sample
whose ``expect`` changed is ``relabelled``: a change of the eval, not of the model, so it is never
a regression. A trial that did not evaluate a sample (``not_evaluated``: ``run --early-stop``
decided without it) says nothing of it: a sample no trial of a run evaluated is one that run does
not have (``added``/``removed``, left out of the paired test, never a regression).

Beside the list of changes, the matched samples are tested for a real drop of the pass rate
(``statistics.paired``: each sample's outcome is its pass fraction over its trials, relabelled
samples left out), per target and overall with Holm across them, and their paired latencies give
the median latency change with a block-bootstrap interval (``statistics.bootstrap``). When
either run has repeats, the test learns its noise from each sample's trials (within-version
residuals), never from the between-version differences; without repeats, an inconclusive verdict
names the longest stretch of consecutive pass->fail samples and the ``--repeat`` that would let
the test see a drop of that size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..results import SampleResult, Status, StreamResult
from ..statistics.bootstrap import LatencyChange, median_latency_change
from ..statistics.paired import (
    NOISE_FROM_DIFFERENCES,
    PairedTest,
    RegressionFamily,
    p_text,
    regression_family,
    trial_noise,
)
from ..statistics.power import minimum_detectable_drop
from ..summary import DEFAULT_ALPHA, DEFAULT_CONFIDENCE, POWER
from .calls import points
from .streambaseline import StreamDiff, format_stream_diff, stream_diff
from .stretch import Matched, Stretch, longest_stretch
from .tables import compact, table, time_label

#: Change kinds, in the order tables list them.
KINDS = ("pass_to_fail", "new_error", "relabelled", "fail_to_pass", "error_fixed", "status_changed",
         "observed_changed", "added", "removed")
#: How ``--fail-on-regression`` gates: on any pass->fail or new error, or on a significant drop.
REGRESSION_MODES = ("any", "significant")
REGRESSIONS = ("pass_to_fail", "new_error")

MatchKey = tuple[str, str, float]
_RANK = {"ignored": 0, "passed": 1, "failed": 2, "error": 3}
NOT_EVALUATED = Status.NOT_EVALUATED.value


@dataclass(frozen=True, slots=True)
class Outcome:
    """One sample's outcome on one side: worst status across trials, first observed value."""

    case: str
    target: str
    timestamp_s: float
    status: str
    observed_value: Any
    reason: str
    expected: Any = None
    #: Share of its evaluated trials that passed; None when no trial evaluated it.
    passes: float | None = None
    #: Mean evaluation duration of its evaluated trials (seconds), where reported.
    latency: float | None = None
    #: Each evaluated trial's outcome (1 passed, 0 not), in trial order.
    trials: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    case: str
    target: str
    timestamp_s: float
    before: Outcome | None
    after: Outcome | None

    def to_json(self) -> dict[str, Any]:
        relabelled = {"baseline_expected": None if self.before is None else self.before.expected,
                      "expected": None if self.after is None else self.after.expected} if self.kind == "relabelled" else {}
        return {
            **relabelled,
            "baseline_observed": None if self.before is None else self.before.observed_value,
            "baseline_status": None if self.before is None else self.before.status,
            "case": self.case,
            "kind": self.kind,
            "observed": None if self.after is None else self.after.observed_value,
            "status": None if self.after is None else self.after.status,
            "target": self.target,
            "timestamp_s": self.timestamp_s,
        }


@dataclass(frozen=True, slots=True)
class BaselineDiff:
    path: str
    changes: tuple[Change, ...]
    #: Samples matched on both sides.
    matched: int
    #: The paired test of a pass-rate drop (None without matched evaluated samples).
    significance: RegressionFamily | None = None
    latency: LatencyChange | None = None
    #: The smallest drop the matched samples would show with 80% power at ``alpha``.
    detectable: float | None = None
    alpha: float = DEFAULT_ALPHA
    #: Stream events and false alarms (None when neither side has streams).
    streams: StreamDiff | None = None
    #: Without repeats: the longest stretch of consecutive pass->fail (None when there is none).
    stretch: Stretch | None = None

    @property
    def verdict(self) -> str | None:
        """``significant drop``, ``no significant drop`` or ``inconclusive: ...``; None without a test."""
        overall = self.significance.overall if self.significance is not None else None
        if overall is None:
            return None
        if self.significance is not None and self.significance.any_significant:
            return "significant drop"
        if overall.delta_pass_rate < 0 and (self.detectable is None or -overall.delta_pass_rate < self.detectable):
            seen = f"drops under {points(self.detectable)}" if self.detectable is not None else "any drop"
            return f"inconclusive: this eval cannot see {seen}"
        return "no significant drop"

    @property
    def why_inconclusive(self) -> Stretch | None:
        """The stretch to name when the verdict is inconclusive and the noise came from the differences."""
        overall = self.significance.overall if self.significance is not None else None
        verdict = self.verdict
        if (overall is None or verdict is None or not verdict.startswith("inconclusive")
                or overall.noise_source != NOISE_FROM_DIFFERENCES):
            return None
        return self.stretch

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    def counts(self) -> dict[str, int]:
        return {kind: self.count(kind) for kind in KINDS}

    @property
    def regressions(self) -> int:
        """Pass->fail samples, new errors and detected->missed events."""
        events = self.streams.regressions if self.streams is not None else 0
        return sum(1 for c in self.changes if c.kind in REGRESSIONS) + events

    def to_json(self) -> dict[str, Any]:
        family = self.significance
        data = {"changes": [c.to_json() for c in self.changes], "counts": self.counts(),
                "matched_samples": self.matched, "path": self.path, "regressions": self.regressions,
                "significance": self._test_json(family.overall if family is not None else None),
                "by_target": {t: {"significance": self._test_json(test)}
                              for t, test in sorted((family.per_target if family is not None else {}).items())},
                "latency": self.latency.to_json() if self.latency is not None else None}
        if self.streams is not None:
            data["streams"] = self.streams.to_json()
        return data

    def _test_json(self, test: PairedTest | None) -> dict[str, Any] | None:
        if test is None:
            return None
        extra: dict[str, Any] = {"alpha": self.alpha, "level": test.level}
        if self.significance is not None and test is self.significance.overall:
            extra |= {"verdict": self.verdict,
                      "minimum_detectable_drop": {"drop": self.detectable, "alpha": self.alpha, "power": POWER}}
            why = self.why_inconclusive
            if why is not None:
                extra["inconclusive_stretch"] = why.to_json()
        return test.to_json() | extra

    def properties(self) -> list[tuple[str, str]]:
        out = [("baseline.path", self.path), ("baseline.matched_samples", str(self.matched)),
               ("baseline.regressions", str(self.regressions))]
        out += [(f"baseline.{kind}", str(n)) for kind, n in self.counts().items()]
        overall = self.significance.overall if self.significance is not None else None
        if overall is not None:
            out += [("baseline.significance.verdict", str(self.verdict)),
                    ("baseline.significance.delta_pass_rate", f"{overall.delta_pass_rate:.6g}"),
                    ("baseline.significance.ci", f"{overall.low:.6g} {overall.high:.6g}"),
                    ("baseline.significance.p_value", f"{overall.p_value:.6g}"),
                    ("baseline.significance.effective_pairs", f"{overall.effective_pairs:.6g}")]
        if self.latency is not None:
            out.append(("baseline.latency.median_change_s", f"{self.latency.median:.6g}"))
        if self.streams is not None:
            out += [(f"baseline.streams.{kind}", str(n)) for kind, n in self.streams.counts().items()]
        return out


def match_key(case: str, target: str, timestamp_s: float) -> MatchKey:
    # Rounded like declared duplicate times (9 decimals), so 0.30000000000000004 matches 0.3.
    return (case, target, round(timestamp_s, 9))


def outcomes(results: Iterable[Mapping[str, Any]]) -> dict[MatchKey, Outcome]:
    """Each sample's outcome from result objects (JSON form) of every trial, in first-seen order."""
    out: dict[MatchKey, Outcome] = {}
    # Per sample: [evaluated trials, passed trials, summed durations, trials with a duration].
    tally: dict[MatchKey, list[float]] = {}
    trials: dict[MatchKey, list[float]] = {}
    for r in results:
        status = str(r["status"])
        if status == NOT_EVALUATED:
            continue
        key = match_key(r["case"], r["target"], float(r["timestamp_s"]))
        counts = tally.setdefault(key, [0, 0, 0.0, 0])
        if status != "ignored":
            counts[0] += 1
            counts[1] += status == "passed"
            trials.setdefault(key, []).append(1.0 if status == "passed" else 0.0)
            duration = r.get("evaluation_duration_seconds")
            if isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration >= 0:
                counts[2] += duration
                counts[3] += 1
        seen = out.get(key)
        if seen is None:
            out[key] = Outcome(r["case"], r["target"], float(r["timestamp_s"]), status,
                               r.get("observed_value"), str(r.get("reason") or ""), r.get("expected"))
        elif _RANK.get(status, 0) > _RANK.get(seen.status, 0):
            out[key] = replace(seen, status=status, reason=str(r.get("reason") or ""))
    return {key: replace(o, passes=tally[key][1] / tally[key][0] if tally[key][0] else None,
                         latency=tally[key][2] / tally[key][3] if tally[key][3] else None,
                         trials=tuple(trials.get(key, ())))
            for key, o in out.items()}


def result_outcomes(results: Iterable[SampleResult]) -> dict[MatchKey, Outcome]:
    return outcomes(r.to_json() for r in results)


def report_results(report: object, where: str) -> list[Mapping[str, Any]]:
    """Every result object of a report; UsageError naming the file if it is not a run report."""
    trials = report.get("trials") if isinstance(report, Mapping) else None
    if not isinstance(trials, list):
        raise UsageError(f"{where} is not a run report (no `trials` list); pass a file written by "
                         "`run --output-json`")
    results: list[Mapping[str, Any]] = []
    for t, trial in enumerate(trials):
        items = trial.get("results") if isinstance(trial, Mapping) else None
        if not isinstance(items, list):
            raise UsageError(f"{where}: trials[{t}] has no `results` list")
        for i, r in enumerate(items):
            ok = (isinstance(r, Mapping) and isinstance(r.get("case"), str) and isinstance(r.get("target"), str)
                  and isinstance(r.get("status"), str) and isinstance(r.get("timestamp_s"), (int, float))
                  and not isinstance(r.get("timestamp_s"), bool))
            if not ok:
                raise UsageError(f"{where}: trials[{t}].results[{i}] lacks case, target, timestamp_s "
                                 "or status")
            results.append(r)
    return results


def control_results(report: Mapping[str, Any], results: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A report with arms compared as its control arm alone: arms are side by side, never pooled
    (nor mistaken for repeats); a plain report's results as they are."""
    if all(r.get("arm") is None for r in results):
        return results
    summary = report.get("summary")
    control = summary.get("arm") if isinstance(summary, Mapping) else None
    comparisons = report.get("arm_comparisons")
    if not isinstance(control, str) and isinstance(comparisons, list) and comparisons \
            and isinstance(comparisons[0], Mapping):
        control = comparisons[0].get("control")
    if not isinstance(control, str):
        control = "control"
    return [r for r in results if r.get("arm") == control]


def load_report(path: Path, label: str | None = None) -> dict[str, Any]:
    """A run report read through the one strict loader (:func:`.loading.load_report_file`)."""
    from .loading import load_report_file

    return load_report_file(path, label)


def diff(before: Mapping[MatchKey, Outcome], after: Mapping[MatchKey, Outcome], path: str, *,
         alpha: float = DEFAULT_ALPHA, confidence: float = DEFAULT_CONFIDENCE) -> BaselineDiff:
    changes: list[Change] = []
    matched = 0
    for key, now in after.items():
        old = before.get(key)
        if old is None:
            changes.append(Change("added", *key, None, now))
            continue
        matched += 1
        kind = _kind(old, now)
        if kind is not None:
            changes.append(Change(kind, *key, old, now))
    changes += [Change("removed", *key, old, None) for key, old in before.items() if key not in after]
    order = {kind: i for i, kind in enumerate(KINDS)}
    changes.sort(key=lambda c: order[c.kind])  # stable: run order within a kind
    family = _significance(before, after, alpha, confidence)
    detectable = None
    stretch = None
    if family is not None and family.overall is not None:
        overall = family.overall
        detectable = minimum_detectable_drop(overall.effective_pairs, overall.baseline_pass_rate,
                                             overall.flip_rate or None, alpha=alpha, power=POWER)
        stretch = longest_stretch(_matched(before, after), overall, alpha, POWER)
    return BaselineDiff(path, tuple(changes), matched, family, _latency(before, after, confidence), detectable,
                        alpha, stretch=stretch)


def _paired(before: Mapping[MatchKey, Outcome], after: Mapping[MatchKey, Outcome],
            value: Callable[[Outcome], float | None],
            keep: Callable[[Outcome, Outcome], bool]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Matched samples' (baseline, candidate) values: by target, then by case, in time order."""
    found: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    for key, now in after.items():
        old = before.get(key)
        if old is None or not keep(old, now):
            continue
        a, b = value(old), value(now)
        if a is not None and b is not None:
            found.setdefault(now.target, {}).setdefault(now.case, []).append((now.timestamp_s, a, b))
    return {target: {case: [(a, b) for _t, a, b in sorted(items)] for case, items in sorted(cases.items())}
            for target, cases in sorted(found.items())}


def _matched(before: Mapping[MatchKey, Outcome], after: Mapping[MatchKey, Outcome]) -> Matched[Outcome]:
    """The tested samples' (baseline, candidate) outcomes: by target, then by case, in time order."""
    found: dict[str, dict[str, list[tuple[float, Outcome, Outcome]]]] = {}
    for key, now in after.items():
        old = before.get(key)
        if old is None or old.expected != now.expected or old.passes is None or now.passes is None:
            continue
        found.setdefault(now.target, {}).setdefault(now.case, []).append((now.timestamp_s, old, now))
    return {target: {case: [(old, now) for _t, old, now in sorted(items, key=lambda item: item[0])]
                     for case, items in sorted(cases.items())}
            for target, cases in sorted(found.items())}


def _significance(before: Mapping[MatchKey, Outcome], after: Mapping[MatchKey, Outcome], alpha: float,
                  confidence: float) -> RegressionFamily | None:
    matched = _matched(before, after)
    if not matched:
        return None
    series = {t: [[(old.passes or 0.0, now.passes or 0.0) for old, now in items] for items in cases.values()]
              for t, cases in matched.items()}
    repeated = any(len(o.trials) >= 2 for cases in matched.values() for items in cases.values()
                   for pair in items for o in pair)
    noise = None
    if repeated:
        noise = {t: trial_noise([[(old.trials, now.trials) for old, now in items] for items in cases.values()])
                 for t, cases in matched.items()}
    return regression_family(series, alpha, confidence, noise)


def _latency(before: Mapping[MatchKey, Outcome], after: Mapping[MatchKey, Outcome],
             confidence: float) -> LatencyChange | None:
    pairs = _paired(before, after, lambda o: o.latency, lambda _old, _now: True)
    return median_latency_change([series for cases in pairs.values() for series in cases.values()], confidence)


def _kind(old: Outcome, now: Outcome) -> str | None:
    if old.expected != now.expected and "ignored" not in (old.status, now.status):
        return "relabelled"
    if old.status != now.status:
        if now.status == "error":
            return "new_error"
        if old.status == "error":
            return "error_fixed"
        if (old.status, now.status) == ("passed", "failed"):
            return "pass_to_fail"
        if (old.status, now.status) == ("failed", "passed"):
            return "fail_to_pass"
        return "status_changed"
    if old.status in ("passed", "failed") and old.observed_value != now.observed_value:
        return "observed_changed"
    return None


def report_streams(report: Mapping[str, Any]) -> list[StreamResult]:
    """A loaded report's streams (checked by the loader already)."""
    from .streamload import stream_from_json

    return [stream_from_json(item) for item in report.get("streams") or []]


def compare_reports(baseline: Path, current: Path, *, alpha: float = DEFAULT_ALPHA,
                    confidence: float = DEFAULT_CONFIDENCE) -> BaselineDiff:
    old, new = load_report(baseline), load_report(current)
    before = outcomes(control_results(old, report_results(old, str(baseline))))
    after = outcomes(control_results(new, report_results(new, str(current))))
    found = diff(before, after, str(baseline), alpha=alpha, confidence=confidence)
    return replace(found, streams=stream_diff(report_streams(old), report_streams(new)))


def diff_against(path: Path, results: Iterable[SampleResult], *, label: str | None = None,
                 alpha: float = DEFAULT_ALPHA, confidence: float = DEFAULT_CONFIDENCE,
                 streams: Iterable[StreamResult] = ()) -> BaselineDiff:
    """Compare a run's results and streams with the report at ``path`` (named ``label`` in the outputs)."""
    old = load_report(path, f"--baseline {path}")
    before = outcomes(report_results(old, str(path)))
    found = diff(before, result_outcomes(results), label or str(path), alpha=alpha, confidence=confidence)
    return replace(found, streams=stream_diff(report_streams(old), streams))


def _status(outcome: Outcome | None) -> str:
    return "-" if outcome is None else outcome.status


def _observed(outcome: Outcome | None) -> str:
    return "-" if outcome is None or outcome.status == "ignored" else compact(outcome.observed_value)


def change_rows(d: BaselineDiff) -> list[list[str]]:
    return [[c.kind, c.case, c.target, f"{time_label(c.timestamp_s)}s", _status(c.before), _status(c.after),
             _observed(c.before), _observed(c.after)] for c in d.changes]


CHANGE_HEADERS = ["Change", "Case", "Target", "Time", "Before", "After", "Observed before", "Observed after"]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:+.1f}ms" if abs(seconds) < 10 else f"{seconds:+.2f}s"


def latency_change_text(change: LatencyChange) -> str:
    return (f"median latency change {_ms(change.median)} ({change.level * 100:g}% CI {_ms(change.low)} to "
            f"{_ms(change.high)}; {change.pairs} pairs)")


def paired_test_text(test: PairedTest | None) -> str:
    if test is None:
        return "no matched samples"
    family = f", Holm over {test.family_tests} tests" if test.family_tests > 1 else ""
    return (f"{test.baseline_pass_rate * 100:.1f}% -> {test.candidate_pass_rate * 100:.1f}% "
            f"({test.delta_pass_rate * 100:+.1f} points, {test.level * 100:g}% CI {test.low * 100:+.1f} to "
            f"{test.high * 100:+.1f}; {p_text(test.p_value)} one-sided{family}; "
            f"{test.effective_pairs:.0f} effective of {test.pairs} pairs, noise from the {test.noise_source})")


def significance_lines(d: BaselineDiff) -> list[str]:
    """The verdict on the pass rate, per target when there are several, and the latency change."""
    family = d.significance
    if family is None or family.overall is None:
        return []
    lines = [f"Pass rate {paired_test_text(family.overall)}: {d.verdict}"]
    why = d.why_inconclusive
    if why is not None:
        lines.append(f"  {why.text()}")
    if len(family.per_target) > 1:
        for target, test in sorted(family.per_target.items()):
            word = "significant drop" if test.significant else "not significant"
            lines.append(f"  target {target}: {paired_test_text(test)}: {word}")
    if d.latency is not None:
        lines.append(f"Latency: {latency_change_text(d.latency)}")
    return lines


def format_diff(d: BaselineDiff) -> str:
    """Console text: a counts line, the verdict, and the change table (or a line saying nothing changed)."""
    counts = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in d.counts().items() if n)
    head = f"Baseline {d.path}: {d.matched} samples matched" + (f"; {counts}" if counts else "; no changes")
    head = "\n".join([head, *significance_lines(d)])
    streams = "" if d.streams is None else "\n\n" + format_stream_diff(d.streams)
    if not d.changes:
        return head + streams
    return head + "\n\n" + table("Changes against the baseline", CHANGE_HEADERS, change_rows(d),
                                 [False, False, False, True, False, False, False, False]) + streams
