"""Paired regression test, Holm and the difference interval (glasskit_eval.statistics.paired)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from test_statistics_kit import flaky_run, independent_run, repeated_pair

from glasskit_eval.statistics.paired import (
    PairedTest,
    holm,
    mcnemar_drop_p_value,
    paired_regression_test,
    regression_family,
    trial_noise,
    trial_residuals,
)
from glasskit_eval.statistics.power import minimum_detectable_drop


def exact_mid_p(b: int, c: int) -> float:
    return float(stats.binom.sf(b, b + c, 0.5) + 0.5 * stats.binom.pmf(b, b + c, 0.5))


def series_with(drops: int, gains: int, same: int) -> list[list[tuple[float, float]]]:
    """Independent-looking pairs: discordant pairs spread out between concordant ones."""
    pairs = [(1.0, 0.0)] * drops + [(0.0, 1.0)] * gains + [(1.0, 1.0)] * same
    random.Random(drops * 1000 + gains).shuffle(pairs)
    return [pairs]


def test_unscaled_p_value_is_the_exact_one_sided_mcnemar_mid_p() -> None:
    for b in range(0, 40):
        for c in range(0, 40):
            assert mcnemar_drop_p_value(b, c) == pytest.approx(exact_mid_p(b, c), abs=1e-12)
            assert mcnemar_drop_p_value(b, c, autocorrelation=-0.4) == pytest.approx(exact_mid_p(b, c), abs=1e-12)
    assert mcnemar_drop_p_value(0, 0) == 0.5


def test_scaling_shrinks_both_counts_by_the_factor() -> None:
    # r = 1/3: factor 0.5, so 20 drops against 8 gains weigh as 10 against 4.
    assert mcnemar_drop_p_value(20, 8, 1 / 3) == pytest.approx(exact_mid_p(10, 4), abs=1e-12)
    assert mcnemar_drop_p_value(20, 8, 1 / 3) > mcnemar_drop_p_value(20, 8)


def test_a_test_without_autocorrelation_is_plain_mcnemar() -> None:
    test = paired_regression_test([[(1.0, 0.0), (1.0, 1.0), (0.0, 1.0), (1.0, 1.0), (1.0, 0.0), (0.0, 0.0),
                                    (1.0, 0.0), (1.0, 1.0)]])
    assert test is not None
    assert (test.drops, test.gains, test.pairs) == (3, 1, 8)
    assert test.autocorrelation == 0.0 and test.effective_pairs == 8
    assert test.p_value_raw == test.p_value == pytest.approx(exact_mid_p(3, 1), abs=1e-12)
    assert test.delta_pass_rate == pytest.approx(-2 / 8)
    assert test.baseline_pass_rate == pytest.approx(6 / 8) and test.candidate_pass_rate == pytest.approx(4 / 8)
    assert test.flip_rate == pytest.approx(4 / 8)
    assert test.low < test.delta_pass_rate < test.high


def test_clear_drop_is_significant_and_json_has_the_report_keys() -> None:
    test = paired_regression_test(series_with(30, 2, 168))
    assert test is not None and test.significant and test.p_value < 1e-4
    data = test.to_json()
    assert set(data) == {"delta_pass_rate", "ci", "p_value", "p_value_raw", "significant", "effective_pairs",
                         "autocorrelation", "noise_source", "family_tests", "method"}
    assert set(data["ci"]) == {"low", "high"}  # type: ignore[arg-type]
    json.dumps(data, allow_nan=False)
    assert test.high < 0
    assert paired_regression_test([[], []]) is None
    with pytest.raises(ValueError):
        paired_regression_test([[(1.0, 2.0)]])


def test_holm_matches_statsmodels() -> None:
    rng = np.random.default_rng(4)
    for size in (1, 2, 3, 5, 9):
        for _ in range(4):  # multipletests takes ~60 ms a call
            p_values = rng.uniform(0, 0.3, size).tolist()
            if size > 2:
                p_values[1] = p_values[0]  # ties
            expected = multipletests(p_values, method="holm")[1]
            assert holm(p_values) == pytest.approx(expected.tolist(), abs=1e-15)
    assert holm([]) == []


def test_family_adjusts_overall_and_per_target_together() -> None:
    by_target = {"light": series_with(12, 2, 86), "door": series_with(3, 3, 94), "empty": [[]]}
    family = regression_family(by_target, alpha=0.05)
    assert family.overall is not None and set(family.per_target) == {"light", "door"}
    tests: list[PairedTest] = [family.overall, family.per_target["light"], family.per_target["door"]]
    raw = [t.p_value_raw for t in tests]
    assert [t.p_value for t in tests] == pytest.approx(multipletests(raw, method="holm")[1].tolist())
    assert all(t.significant == (t.p_value <= 0.05) for t in tests)
    alone = paired_regression_test(by_target["light"])
    assert alone is not None and alone.p_value_raw == family.per_target["light"].p_value_raw
    assert family.overall.pairs == 200 and family.any_significant
    assert regression_family({}).overall is None


def flaky_pairs(rng: random.Random, candidate_rate: float = 0.9) -> list[list[tuple[float, float]]]:
    """The issue's flaky design: 4 cases x 100 samples, 90% pass, results repeat with probability 0.8."""
    return [list(zip(flaky_run(rng, 100, 0.9), flaky_run(rng, 100, candidate_rate))) for _ in range(4)]


def test_aa_comparisons_of_a_flaky_model_rarely_flag_a_regression() -> None:
    rng = random.Random(2024)
    flagged = covered = 0
    for _ in range(200):
        test = paired_regression_test(flaky_pairs(rng))
        assert test is not None
        flagged += test.significant
        covered += test.low <= 0.0 <= test.high
    assert flagged <= 16  # at most 8% of 200
    assert covered >= 180  # the 95% difference interval covers no change


def test_an_independent_ten_point_drop_is_flagged() -> None:
    # 90% against 80%, each sample's result independent of its neighbours, 4 cases x 100 samples.
    rng = random.Random(77)
    flagged = covered = 0
    for _ in range(200):
        pairs = [list(zip(independent_run(rng, 100, 0.9), independent_run(rng, 100, 0.8))) for _ in range(4)]
        test = paired_regression_test(pairs)
        assert test is not None
        flagged += test.significant
        covered += test.low <= -0.1 <= test.high
    assert flagged >= 160
    assert covered >= 180


def test_a_drop_hitting_samples_of_the_baseline_outcomes_is_flagged() -> None:
    # The candidate fails each of the baseline's passing samples independently with probability 1/9.
    rng = random.Random(78)
    flagged = 0
    for _ in range(200):
        pairs = []
        for _ in range(4):
            base = flaky_run(rng, 100, 0.9)
            pairs.append([(b, b * (rng.random() >= 1 / 9)) for b in base])
        test = paired_regression_test(pairs)
        assert test is not None
        flagged += test.significant
    assert flagged >= 160


def test_flaky_rerun_drop_is_below_what_the_eval_can_see() -> None:
    # A 10-point drop on top of an independent flaky rerun: the run-to-run noise alone has a
    # standard deviation of about 6 points on this design, so no test that keeps A/A false alarms
    # at 5% finds it 80% of the time; the minimum detectable drop says so.
    rng = random.Random(79)
    flagged = 0
    drops = []
    for _ in range(100):
        pairs = []
        for _ in range(4):
            cand = [c * (rng.random() >= 1 / 9) for c in flaky_run(rng, 100, 0.9)]
            pairs.append(list(zip(flaky_run(rng, 100, 0.9), cand)))
        test = paired_regression_test(pairs)
        assert test is not None
        flagged += test.significant
        aa = paired_regression_test(flaky_pairs(rng))
        assert aa is not None
        drop = minimum_detectable_drop(aa.effective_pairs, aa.baseline_pass_rate, aa.flip_rate)
        drops.append(1.0 if drop is None else drop)
    assert flagged < 80
    assert sorted(drops)[50] > 0.1


def spread_pairs(drops: int, gains: int, same: int) -> list[tuple[float, float]]:
    """Discordant pairs each between concordant ones: no autocorrelation in the differences."""
    flips = [(1.0, 0.0)] * drops + [(0.0, 1.0)] * gains
    pairs: list[tuple[float, float]] = []
    for flip in flips:
        pairs += [flip, (1.0, 1.0), (1.0, 1.0)]
    return pairs + [(1.0, 1.0)] * max(0, same - 2 * len(flips))


def test_one_target_is_tested_once_not_against_itself() -> None:
    for (b, c), expected in {(5, 0): 0.015625, (6, 1): 0.03515625}.items():
        family = regression_family({"light": [spread_pairs(b, c, 40)]})
        assert family.overall is not None
        assert family.overall.autocorrelation == 0.0
        assert family.overall.p_value == family.overall.p_value_raw == pytest.approx(expected, abs=1e-12)
        assert family.overall.p_value == pytest.approx(exact_mid_p(b, c), abs=1e-12)
        assert family.overall.family_tests == 1 and family.per_target["light"] is family.overall
        assert family.any_significant
        data = family.overall.to_json()
        assert data["family_tests"] == 1 and data["method"].startswith("one-sided")
        assert data["noise_source"] == "differences"


def test_several_targets_keep_holm_across_the_family_and_say_its_size() -> None:
    family = regression_family({"light": [spread_pairs(6, 1, 40)], "door": [spread_pairs(1, 1, 40)]})
    assert family.overall is not None
    tests = [family.overall, family.per_target["light"], family.per_target["door"]]
    adjusted = multipletests([t.p_value_raw for t in tests], method="holm")[1]
    assert [t.p_value for t in tests] == pytest.approx(list(adjusted), abs=1e-12)
    assert {t.family_tests for t in tests} == {3}


def test_trial_noise_is_the_within_version_variance_and_residuals() -> None:
    base = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]
    cand = [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [1.0]]
    noise = trial_noise([list(zip(base, cand))])
    # Per sample: both sides' squared residuals over their degrees of freedom (numpy's ddof=1).
    s2 = [(np.var(b, ddof=1) * 2 + np.var(c, ddof=1) * 2) / 4 for b, c in zip(base[:2], cand[:2])]
    pooled = (sum(np.var(b, ddof=1) * 2 for b in base) + sum(np.var(c, ddof=1) * 2 for c in cand[:2])) / 10
    pooled_third = np.var(base[2], ddof=1)  # the candidate's single trial adds no degree of freedom
    expected = s2[0] * (2 / 3) + s2[1] * (2 / 3) + pooled_third * (1 / 3 + 1)
    assert pooled > 0
    assert noise.variance == pytest.approx(expected, abs=1e-12)
    assert trial_residuals(base)[0] == pytest.approx([1 / 3, 0.0, -1 / 3])
    assert len(noise.residuals) == 6  # three trial series a side (the single-trial sample left out)


def test_an_adapter_without_noise_is_plain_mcnemar_on_its_counts() -> None:
    # A deterministic adapter, 30 samples, 3 repeats: one stretch of 10 goes pass -> fail in every trial.
    base = [[1.0] * 3] * 30
    cand = [[1.0] * 3] * 10 + [[0.0] * 3] * 10 + [[1.0] * 3] * 10
    series = [[(sum(b) / 3, sum(c) / 3) for b, c in zip(base, cand)]]
    noise = trial_noise([list(zip(base, cand))])
    assert noise.variance == 0.0
    test = paired_regression_test(series, noise=noise)
    assert test is not None and test.noise_source == "repeats" and test.autocorrelation == 0.0
    assert test.p_value == pytest.approx(exact_mid_p(10, 0), abs=1e-12) and test.significant
    alone = paired_regression_test(series)  # learnt from the differences, the stretch hides itself
    assert alone is not None and not alone.significant and alone.autocorrelation > 0.9


def test_repeats_aa_comparisons_of_run_correlated_noise_rarely_flag() -> None:
    rng = random.Random(40)
    flagged = 0
    for _ in range(100):
        series, noise = repeated_pair(rng)
        test = paired_regression_test(series, noise=noise)
        assert test is not None and test.noise_source == "repeats"
        flagged += test.significant
    assert flagged <= 8


def test_repeats_find_a_contiguous_stretch_the_differences_hide() -> None:
    rng = random.Random(41)
    found = hidden = 0
    for _ in range(100):
        series, noise = repeated_pair(rng, stretch=True)
        test = paired_regression_test(series, noise=noise)
        assert test is not None
        found += test.significant
        alone = paired_regression_test(series)
        assert alone is not None
        hidden += alone.significant
    assert found >= 80
    assert hidden < found


def test_with_repeats_the_counts_are_scaled_to_the_noise_variance() -> None:
    # Independent check with scipy's incomplete beta: the continuous binomial tail at the scaled
    # counts b' = b * s, c' = c * s with s = (b + c) / max(V (1 + r) / (1 - r), sum d^2).
    from scipy.special import betainc

    rng = random.Random(7)
    series, noise = repeated_pair(rng, stretch=True)
    test = paired_regression_test(series, noise=noise)
    assert test is not None
    r = test.autocorrelation
    pairs = [pair for values in series for pair in values]
    b = sum(max(0.0, x - y) for x, y in pairs)
    c = sum(max(0.0, y - x) for x, y in pairs)
    squares = sum((y - x) ** 2 for x, y in pairs)
    scale = (b + c) / max(noise.variance * (1 + r) / (1 - r), squares)
    n, k = (b + c) * scale, b * scale

    def tail(at: float) -> float:
        return 1.0 if at <= 0 else (0.0 if n - at + 1 <= 0 else float(betainc(at, n - at + 1, 0.5)))

    assert test.p_value == pytest.approx(0.5 * (tail(k) + tail(k + 1)), rel=1e-9)
    assert 0.7 < r < 0.9  # the residuals' own correlation, the chains' 0.8


def test_p_text_never_shows_one() -> None:
    from glasskit_eval.statistics.paired import p_text

    assert p_text(0.015625) == "p = 0.0156" and p_text(0.9996) == "p > 0.999"
    assert p_text(0.00001) == "p < 0.0001" and p_text(0.5) == "p = 0.5"
