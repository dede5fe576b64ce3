"""Arms compared from tagged results: summaries, paired comparisons, flips, Pareto, the robustness gate,
and the console table rendered from them."""

from __future__ import annotations

import io

import pytest

from glasskit_eval.arms.compare import compare_arms, paired_series
from glasskit_eval.evaluation.gates import robustness_gate
from glasskit_eval.reports.arms_table import MAX_WIDTH, print_arms
from glasskit_eval.results import SampleResult, Status
from glasskit_eval.statistics.intervals import pass_rate_interval
from glasskit_eval.statistics.paired import holm
from glasskit_eval.statistics.sidebyside import paired_difference_test


def result(arm: str, target: str, index: int, passed: bool | None, *, seconds: float = 0.1,
           cost: float | None = None) -> SampleResult:
    status = Status.IGNORED if passed is None else Status.PASSED if passed else Status.FAILED
    return SampleResult(case="clip", target=target, target_label=None, sample_index=index,
                        timestamp_s=index / 10, source="at", status=status, expected=True, field="ok",
                        compare_mode=None, reason="", evaluation_duration_seconds=seconds,
                        usage={"cost": cost} if cost is not None else None, arm=arm)


#: Per arm, per target: the sample indexes that fail (10 samples per target, 0-9).
FAILING = {"control": {"a": {1, 2}, "b": {5}},
           "cheap": {"a": {1, 2, 3}, "b": {5, 6, 7}},
           "good": {"a": {2}, "b": set()}}


def run_results() -> list[SampleResult]:
    out = []
    for arm, targets in FAILING.items():
        for target, failing in targets.items():
            for i in range(10):
                seconds = {"control": 0.2, "cheap": 0.1, "good": 0.5}[arm]
                cost = {"control": 0.01, "cheap": 0.001, "good": None}[arm]
                out.append(result(arm, target, i, i not in failing, seconds=seconds, cost=cost))
    out.append(result("control", "a", 10, None))  # ignored: no outcome anywhere
    return out


def outcomes(arm: str, target: str) -> list[float]:
    return [0.0 if i in FAILING[arm][target] else 1.0 for i in range(10)]


def test_per_arm_summaries_by_hand() -> None:
    report = compare_arms([run_results()], ["control", "cheap", "good"], "control")
    control = report.summaries["control"]
    assert (control.counts.passed, control.counts.failed, control.counts.ignored) == (17, 3, 1)
    assert control.pass_rate == pytest.approx(17 / 20)
    assert control.interval == pass_rate_interval([outcomes("control", "a"), outcomes("control", "b")])
    assert report.summaries["cheap"].pass_rate == pytest.approx(14 / 20)
    assert report.summaries["good"].pass_rate == pytest.approx(19 / 20)
    assert report.by_target["cheap"]["b"].pass_rate == pytest.approx(7 / 10)
    assert control.counts.cost == pytest.approx(0.2)
    assert report.summaries["cheap"].p95 == pytest.approx(0.1)
    data = report.arms_json()["good"]
    assert data["summary"]["passed"] == 19 and data["summary"]["cost"] is None
    assert set(data["by_target"]) == {"a", "b"} and data["spec"] == {}


def test_paired_comparisons_flips_and_holm_by_hand() -> None:
    report = compare_arms([run_results()], ["control", "cheap", "good"], "control")
    overall = {c.arm: c for c in report.comparisons if c.target is None}
    # cheap: a loses 3, b loses 6 and 7 -> 3 drops, no gains; good: gains 1 (a) and 5 (b).
    assert overall["cheap"].test is not None and overall["good"].test is not None
    assert overall["cheap"].test.delta_pass_rate == pytest.approx(-3 / 20)
    assert overall["good"].test.delta_pass_rate == pytest.approx(2 / 20)
    assert [(f.target, f.timestamp_s, f.control_status, f.arm_status) for f in overall["cheap"].flips] == [
        ("a", 0.3, Status.PASSED, Status.FAILED), ("b", 0.6, Status.PASSED, Status.FAILED),
        ("b", 0.7, Status.PASSED, Status.FAILED)]
    assert [(f.target, f.timestamp_s) for f in overall["good"].flips] == [("a", 0.1), ("b", 0.5)]
    raw = {}
    for arm in ("cheap", "good"):
        series = [list(zip(outcomes("control", t), outcomes(arm, t))) for t in ("a", "b")]
        test = paired_difference_test(series)
        assert test is not None
        raw[arm] = test.p_value_raw
        assert overall[arm].test.p_value_raw == pytest.approx(test.p_value_raw)
    adjusted = holm([raw["cheap"], raw["good"]])
    assert overall["cheap"].test.p_value == pytest.approx(adjusted[0])
    assert overall["good"].test.p_value == pytest.approx(adjusted[1])
    per_target = [(c.arm, c.target) for c in report.comparisons if c.target is not None]
    assert per_target == [("cheap", "a"), ("good", "a"), ("cheap", "b"), ("good", "b")]
    only_b = next(c for c in report.comparisons if c.arm == "cheap" and c.target == "b")
    assert only_b.test is not None and only_b.test.delta_pass_rate == pytest.approx(-2 / 10)
    row = report.comparisons_json()[0]
    assert set(row) == {"control", "arm", "target", "delta_pass_rate", "ci", "p_value", "p_value_raw",
                        "significant", "flips", "method", "family_tests"}
    assert row["method"].startswith("two-sided") and row["family_tests"] == 2
    assert set(row["ci"]) == {"low", "high"}
    assert set(row["flips"][0]) == {"case", "target", "timestamp_s", "control_status", "arm_status"}


def test_pareto_uses_cost_when_an_arm_reports_one() -> None:
    report = compare_arms([run_results()], ["control", "cheap", "good"], "control")
    # cheap: fastest and cheapest; good: best pass rate and free (reports no cost); control is beaten
    # by good on pass rate and cost, but not on latency.
    assert report.pareto == ("control", "cheap", "good")
    without_cost = [r for r in run_results() if r.arm != "good"] + [
        result("good", r.target, r.sample_index, r.status is Status.PASSED, seconds=0.05)
        for r in run_results() if r.arm == "good"]
    assert compare_arms([without_cost], ["control", "cheap", "good"], "control").pareto == ("good",)


def test_repeats_average_outcomes_and_number_flips_by_trial() -> None:
    first = run_results()
    second = [result(r.arm or "", r.target, r.sample_index, True) for r in first if r.evaluated]
    report = compare_arms([first, second], ["control", "cheap"], "control")
    overall = report.overall("cheap")
    assert overall is not None and overall.test is not None
    assert overall.test.delta_pass_rate == pytest.approx(-1.5 / 20)
    assert {f.trial for f in overall.flips} == {1}
    assert report.comparisons_json()[0]["flips"][0]["trial"] == 1


def test_robustness_gate_needs_a_drop_beyond_the_limit_and_significance() -> None:
    control = [result("control", "a", i, True) for i in range(40)]
    dim = [result("dim", "a", i, i % 2 == 0) for i in range(40)]
    gate = robustness_gate(control + dim, "control", "dim", 0.1)
    assert gate.name == "dim/max_robustness_drop" and not gate.passed
    assert "50.0% below control" in gate.message
    assert robustness_gate(control + dim, "control", "dim", 0.6).passed  # drop within the limit
    slight = [result("dim", "a", i, i != 3) for i in range(40)]
    assert robustness_gate(control + slight, "control", "dim", 0.01).passed  # one flip: not significant
    assert paired_series(control, slight)[0][3] == (1.0, 0.0)


def test_console_table_fits_80_columns_with_long_names_and_cost() -> None:
    names = ["control", "a-very-long-arm-name-that-goes-on", "brightness:0.4+noise:8+jpeg:30"]
    results = []
    for n, name in enumerate(names):
        results += [result(name, "a", i, i % (n + 2) != 0, seconds=1.234 + n, cost=123.456) for i in range(20)]
    report = compare_arms([results], names, "control")
    out = io.StringIO()
    print_arms(report, out)
    lines = out.getvalue().splitlines()
    assert MAX_WIDTH == 80 and max(len(line) for line in lines) <= MAX_WIDTH
    assert lines[2].startswith("Arm") and "Cost" in lines[2] and "p95" in lines[2]
    assert lines[3].split()[:2] == ["control", "50.0%"]
    assert any(line.startswith("a-very-lon…") for line in lines)
    assert any(line.startswith("Pareto front (pass rate, p95 latency, cost): ") for line in lines)
