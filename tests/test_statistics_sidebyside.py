"""Arms against a control: the two-sided paired test, Holm across arms, the Pareto front.

scipy's binomial distribution and statsmodels' Holm adjustment are the independent oracles.
"""

from __future__ import annotations

import pytest
from scipy.stats import binom
from statsmodels.stats.multitest import multipletests

from glasskit_eval.statistics.paired import paired_regression_test
from glasskit_eval.statistics.sidebyside import (
    HIGHER,
    LOWER,
    holm_across,
    paired_difference_test,
    pareto_front,
)


def _mid_p_upper(b: int, n: int) -> float:
    """P(X > b) + P(X = b) / 2 for X ~ Binomial(n, 1/2)."""
    return float(binom.sf(b, n, 0.5) + binom.pmf(b, n, 0.5) / 2)


def _series(drops: int, gains: int, same: int) -> list[list[tuple[float, float]]]:
    """Each discordant pair alone in its series, so no lag-1 correlation can be measured (r = 0)."""
    series: list[list[tuple[float, float]]] = [[(1.0, 0.0)] for _ in range(drops)]
    series += [[(0.0, 1.0)] for _ in range(gains)]
    series.append([(1.0, 1.0)] * same)
    return series


@pytest.mark.parametrize(("drops", "gains"), [(1, 6), (6, 1), (3, 3), (0, 5), (2, 9)])
def test_two_sided_p_is_twice_the_smaller_mid_p_tail(drops: int, gains: int) -> None:
    series = _series(drops, gains, 10)
    test = paired_difference_test(series)
    assert test is not None
    assert test.autocorrelation == 0.0
    n = drops + gains
    expected = min(1.0, 2 * min(_mid_p_upper(drops, n), _mid_p_upper(gains, n)))
    assert test.p_value == pytest.approx(expected, abs=1e-12)
    assert test.p_value_raw == test.p_value
    pairs = n + 10
    assert test.delta_pass_rate == pytest.approx((gains - drops) / pairs)
    # The interval is the one-sided test's (Newcombe's), only the p-value changes.
    one_sided = paired_regression_test(series)
    assert one_sided is not None and (test.low, test.high) == (one_sided.low, one_sided.high)


def test_no_pairs_is_no_test_and_no_change_is_p_one() -> None:
    assert paired_difference_test([[]]) is None
    test = paired_difference_test([[(1.0, 1.0), (0.0, 0.0)]])
    assert test is not None and test.p_value == 1.0 and not test.significant


def test_holm_across_arms_matches_statsmodels() -> None:
    tests = [t for t in (paired_difference_test(_series(d, g, 10)) for d, g in [(0, 8), (1, 6), (3, 3)])
             if t is not None]
    adjusted = holm_across(tests)
    expected = multipletests([t.p_value_raw for t in tests], alpha=0.05, method="holm")[1]
    assert [t.p_value for t in adjusted] == pytest.approx(list(expected))
    assert [t.p_value_raw for t in adjusted] == [t.p_value_raw for t in tests]
    assert [t.significant for t in adjusted] == [p <= 0.05 for p in expected]
    assert holm_across([]) == []


def test_pareto_front_by_hand() -> None:
    points = {"control": [0.90, 0.200, 1.0], "cheap": [0.85, 0.150, 0.2], "big": [0.95, 0.900, 5.0],
              "worse": [0.85, 0.250, 1.5], "twin": [0.90, 0.200, 1.0]}
    # worse is beaten by control on every objective; the rest each win somewhere; twins both stay.
    assert pareto_front(points, [HIGHER, LOWER, LOWER]) == ["control", "cheap", "big", "twin"]
    assert pareto_front({"a": [0.9, 0.1], "b": [0.9, 0.2]}, [HIGHER, LOWER]) == ["a"]
    with pytest.raises(ValueError):
        pareto_front({"a": [0.9]}, [HIGHER, LOWER])


# --- calibration by simulation (fixed seeds) ------------------------------------------------


def test_aa_arms_of_a_flaky_model_rarely_differ_significantly_either_way() -> None:
    # Both arms the same model: 4 cases x 100 samples, 90% pass, results repeating with probability 0.8.
    import random

    from test_statistics_kit import flaky_run

    rng = random.Random(4242)
    flagged = covered = 0
    for _ in range(200):
        pairs = [list(zip(flaky_run(rng, 100, 0.9), flaky_run(rng, 100, 0.9))) for _ in range(4)]
        test = paired_difference_test(pairs)
        assert test is not None
        flagged += test.significant
        covered += test.low <= 0.0 <= test.high
    assert flagged <= 16  # at most 8% of 200 at alpha 0.05, two-sided
    assert covered >= 180


@pytest.mark.parametrize("arm_rate", [0.8, 0.99])
def test_a_ten_point_difference_is_found_in_either_direction(arm_rate: float) -> None:
    import random

    from test_statistics_kit import independent_run

    rng = random.Random(int(arm_rate * 100))
    flagged = 0
    for _ in range(200):
        pairs = [list(zip(independent_run(rng, 100, 0.9), independent_run(rng, 100, arm_rate))) for _ in range(4)]
        test = paired_difference_test(pairs)
        assert test is not None
        flagged += test.significant and (test.delta_pass_rate < 0) == (arm_rate < 0.9)
    assert flagged >= 160  # power of at least 80%


def test_with_repeats_both_tails_use_the_one_sided_tests_scaling() -> None:
    # Independent check with scipy's incomplete beta: both tails at b' = b * s, c' = c * s with
    # s = (b + c) / max(V (1 + r) / (1 - r), sum d^2), the scaling of the one-sided test.
    import random

    from scipy.special import betainc
    from test_statistics_kit import repeated_pair

    series, noise = repeated_pair(random.Random(8), stretch=True)
    test = paired_difference_test(series, noise=noise)
    one_sided = paired_regression_test(series, noise=noise)
    assert test is not None and one_sided is not None
    assert test.noise_source == "repeats" and test.method.startswith("two-sided") and "repeats" in test.method
    r = test.autocorrelation
    pairs = [pair for values in series for pair in values]
    b = sum(max(0.0, x - y) for x, y in pairs)
    c = sum(max(0.0, y - x) for x, y in pairs)
    scale = (b + c) / max(noise.variance * (1 + r) / (1 - r), sum((y - x) ** 2 for x, y in pairs))
    n = (b + c) * scale

    def mid_p(k: float) -> float:
        def tail(at: float) -> float:
            return 1.0 if at <= 0 else (0.0 if n - at + 1 <= 0 else float(betainc(at, n - at + 1, 0.5)))
        return 0.5 * (tail(k) + tail(k + 1))

    assert test.scale == pytest.approx(scale, rel=1e-12)
    assert one_sided.p_value == pytest.approx(mid_p(b * scale), rel=1e-9)
    assert test.p_value == pytest.approx(min(1.0, 2 * min(mid_p(b * scale), mid_p(c * scale))), rel=1e-9)
    assert (test.low, test.high) == (one_sided.low, one_sided.high)
