"""One summary per run (glasskit_eval.summary), the numbers every reporter renders."""

from __future__ import annotations

import dataclasses

import pytest

from glasskit_eval.reports.json_report import build_report
from glasskit_eval.results import Gate, SampleResult, Status, TimingMode, TrialResult
from glasskit_eval.summary import Counts, RunResult, RunSummary

pytestmark = pytest.mark.frames


def result(case: str, target: str, status: Status, index: int, label: str | None = None,
           duration: float = 0.5) -> SampleResult:
    return SampleResult(case=case, target=target, target_label=label, sample_index=index, timestamp_s=0.5 * index,
                        source="at", status=status, expected=True, field=None, compare_mode=None, reason="",
                        evaluation_duration_seconds=None if status is Status.IGNORED else duration)


P, F, E, IGN = Status.PASSED, Status.FAILED, Status.ERROR, Status.IGNORED


def trial(n: int, statuses: list[Status], gates: tuple[Gate, ...] = ()) -> TrialResult:
    results = tuple(result("a" if i < 2 else "b", "lamp" if i % 2 else "door", s, i, "Door" if i % 2 == 0 else None)
                    for i, s in enumerate(statuses))
    return TrialResult(n, results, gates, 2.0, TimingMode.INDIVIDUAL)


def test_counts() -> None:
    c = Counts.of([result("a", "t", s, i) for i, s in enumerate([P, P, F, E, IGN])])
    assert (c.passed, c.failed, c.errors, c.ignored, c.evaluated) == (2, 1, 1, 1, 4)
    assert c.pass_rate == 0.5 and c.average_latency == 0.5
    assert Counts.of([]).pass_rate is None


def test_summary_of_two_trials() -> None:
    run = RunResult("/e", ("a", "b"), 2, (trial(1, [P, P, F, IGN]), trial(2, [P, F, F, IGN])),
                    (Gate("max_flaky_samples", False, "1 flaky"),), 4.0)
    s = RunSummary.of(run)
    assert s.total.evaluated == 6 and s.first.evaluated == 3
    assert s.trial_rates == (2 / 3, 1 / 3)
    assert [g.display for g in s.targets] == ["Door (door)", "lamp"]
    door = s.targets[0]
    assert door.counts.passed == 2 and door.trial_rates == (0.5, 0.5)
    assert s.targets[1].trial_rates == (1.0, 0.0)
    assert [c.name for c in s.cases] == ["a", "b"] and s.cases[1].counts.ignored == 2
    counts = s.stability_counts()
    assert (counts.consistently_passed, counts.consistently_failed, counts.flaky) == (1, 1, 1)
    assert not s.success and [(scope, g.name) for scope, g in s.failed_gates()] == [("Stability", "max_flaky_samples")]


def test_a_run_that_evaluated_nothing_reports_zero_rates_and_no_timing_mode() -> None:
    empty = dataclasses.replace(trial(1, [IGN, IGN]), timing_mode=None)
    report = build_report(RunSummary.of(RunResult("/e", ("a",), 1, (empty,), (), 1.0)))
    summary = report["summary"]
    assert summary["attempt_pass_rate"] == 0.0
    assert (summary["minimum_trial_pass_rate"], summary["mean_trial_pass_rate"],
            summary["maximum_trial_pass_rate"]) == (0.0, 0.0, 0.0)
    assert summary["evaluation_timing_mode"] is None
    assert report["trials"][0]["summary"]["pass_rate"] == 0.0
    assert report["trials"][0]["summary"]["evaluation_timing_mode"] is None


def test_latency_percentiles_are_nearest_rank() -> None:
    from glasskit_eval.statistics.descriptive import percentile
    from glasskit_eval.summary import Latency

    ordered = tuple(float(i) for i in range(1, 21))
    assert percentile(ordered, 50) == 10 and percentile(ordered, 95) == 19 and percentile(ordered, 90) == 18
    latency = Latency.of(ordered)
    assert latency is not None and latency.max == 20 and latency.count == 20
    assert Latency.of(()) is None
    assert percentile((3.0,), 95) == 3.0
