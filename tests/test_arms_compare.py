"""Arms compared from tagged results: summaries, paired comparisons, flips, Pareto, the robustness gate,
and the console table rendered from them."""

from __future__ import annotations

import io

import pytest

from glasskit_eval.arms.compare import compare_arms, paired_input, paired_series, paired_trials
from glasskit_eval.evaluation.gates import robustness_gate
from glasskit_eval.reports.arms_table import MAX_WIDTH, print_arms
from glasskit_eval.results import SampleResult, Status
from glasskit_eval.statistics.intervals import pass_rate_interval
from glasskit_eval.statistics.paired import holm, trial_noise
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
                        "significant", "flips", "method", "family_tests", "noise_source"}
    assert row["method"].startswith("two-sided") and row["family_tests"] == 2
    assert row["noise_source"] == "differences"  # one trial: the documented default
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


# --- with repeats: the noise comes from each sample's trials -----------------------------------


def stretch_trials(trials: int, samples: int = 30, stretch: range = range(10, 20)) -> list[list[SampleResult]]:
    """A deterministic adapter: the control passes everything, ``dim`` fails one contiguous stretch in every trial."""
    return [[result("control", "a", i, True) for i in range(samples)]
            + [result("dim", "a", i, i not in stretch) for i in range(samples)] for _ in range(trials)]


def test_with_repeats_a_deterministic_stretch_is_tested_at_face_value() -> None:
    report = compare_arms(stretch_trials(3), ["control", "dim"], "control")
    overall = report.overall("dim")
    assert overall is not None and overall.test is not None
    test = overall.test
    # No trial ever disagrees: no noise, so the two-sided McNemar mid-p of 10 drops and no gains.
    assert test.noise_source == "repeats" and test.autocorrelation == 0.0 and test.scale == 1.0
    assert test.p_value == pytest.approx(2 * 0.5 ** 10 / 2, abs=1e-12) and test.significant
    assert test.method == "two-sided McNemar mid-p, counts scaled to the null variance the repeats estimate"
    row = report.comparisons_json()[0]
    assert row["noise_source"] == "repeats" and row["method"] == test.method
    assert report.noise_source == "repeats"
    # The same run without repeats learns its noise from the differences, which the stretch inflates.
    alone = compare_arms(stretch_trials(1), ["control", "dim"], "control").overall("dim")
    assert alone is not None and alone.test is not None
    assert alone.test.noise_source == "differences" and alone.test.autocorrelation > 0.9
    assert not alone.test.significant and alone.test.method.startswith("two-sided McNemar mid-p, counts scaled by")


def test_the_comparison_pairs_each_samples_trials_in_trial_order() -> None:
    # A flaky control and arm: per trial, the indexes that fail.
    control_fails = [{0, 1}, {1}, {1, 4}]
    arm_fails = [{1, 2, 3}, {2, 3}, {0, 2, 3}]
    trials = [[result("control", "a", i, i not in c) for i in range(6)]
              + [result("dim", "a", i, i not in a) for i in range(6)] for c, a in zip(control_fails, arm_fails)]
    control = [r for t in trials for r in t if r.arm == "control"]
    dim = [r for t in trials for r in t if r.arm == "dim"]
    by_hand = [[tuple(0.0 if i in c else 1.0 for c in control_fails) for i in range(6)],
               [tuple(0.0 if i in a else 1.0 for a in arm_fails) for i in range(6)]]
    found = paired_trials(control, dim)
    assert [[tuple(c) for c, _a in found[0]], [tuple(a) for _c, a in found[0]]] == by_hand
    series, noise = paired_input(control, dim)
    assert series == paired_series(control, dim) == [[(sum(c) / 3, sum(a) / 3) for c, a in zip(*by_hand)]]
    assert noise == trial_noise(found)
    expected = paired_difference_test(series, noise=noise)
    overall = compare_arms(trials, ["control", "dim"], "control").overall("dim")
    assert expected is not None and overall is not None and overall.test == expected
    assert expected.noise_source == "repeats"
    # A sample evaluated once on both sides adds nothing to learn from: one trial a side is the default.
    assert paired_input(control[:6], dim[:6])[1] is None


def test_robustness_gate_with_repeats_weighs_a_stretch_against_the_adapters_own_noise() -> None:
    every = [r for t in stretch_trials(3) for r in t]
    gate = robustness_gate(every, "control", "dim", 0.2)
    assert not gate.passed
    assert gate.message == ("pass rate 33.3% below control (one-sided p = 0.000488, noise from the repeats; "
                            "gate: no significant drop beyond 20.0%)")
    assert robustness_gate(every, "control", "dim", 0.4).passed  # beyond the limit only
    # One trial: the noise from the differences hides the stretch, and the gate cannot fail.
    single = robustness_gate(stretch_trials(1)[0], "control", "dim", 0.2)
    assert single.passed and "noise from" not in single.message and "33.3% below control" in single.message


def test_console_and_html_say_when_the_noise_came_from_the_repeats() -> None:
    from glasskit_eval.reports.html_arms import arms_table

    for trials, said in ((3, True), (1, False)):
        report = compare_arms(stretch_trials(trials), ["control", "dim"], "control")
        out = io.StringIO()
        print_arms(report, out)
        header = out.getvalue().splitlines()[1]
        assert header == ("Arms (same frames; each compared with control, paired"
                          + (", noise from the repeats" if said else "") + "; * significant):")
        html = arms_table(report)
        assert ("noise learnt from each sample's repeated trials" in html) == said
        assert ("noise learnt from the arm-minus-control differences" in html) == (not said)
