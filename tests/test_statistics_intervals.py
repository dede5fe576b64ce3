"""Wilson intervals at the effective sample size (glasskit_eval.statistics.intervals)."""

from __future__ import annotations

import json
import random

import pytest
from statsmodels.stats.proportion import proportion_confint
from test_statistics_kit import flaky_run

from glasskit_eval.statistics.intervals import pass_rate_interval, wilson_bounds


@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
def test_wilson_bounds_match_statsmodels(confidence: float) -> None:
    for n in (1, 2, 5, 17, 100, 1000):
        for passes in range(0, n + 1, max(1, n // 25)):
            low, high = proportion_confint(passes, n, alpha=1 - confidence, method="wilson")
            assert wilson_bounds(passes / n, n, confidence) == pytest.approx((low, high), abs=1e-12)
    # A non-integer (effective) n: statsmodels takes a real count and nobs too.
    for n_eff in (0.7, 3.3, 44.3, 251.9):
        for rate in (0.0, 0.1, 0.5, 0.9, 1.0):
            low, high = proportion_confint(rate * n_eff, n_eff, alpha=1 - confidence, method="wilson")
            assert wilson_bounds(rate, n_eff, confidence) == pytest.approx((low, high), abs=1e-12)


def test_edges() -> None:
    low, high = wilson_bounds(0.0, 10)
    assert low == 0.0 and 0 < high < 1
    low, high = wilson_bounds(1.0, 10)
    assert high == 1.0 and 0 < low < 1
    with pytest.raises(ValueError):
        wilson_bounds(0.5, 0)
    with pytest.raises(ValueError):
        wilson_bounds(1.5, 10)
    with pytest.raises(ValueError):
        wilson_bounds(0.5, 10, confidence=1.0)
    assert pass_rate_interval([]) is None
    assert pass_rate_interval([[], []]) is None
    with pytest.raises(ValueError):
        pass_rate_interval([[1.0, 2.0]])


def test_pass_rate_interval_uses_the_effective_sample_size() -> None:
    series = [[1, 1, 1, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 1, 1, 1, 1, 1]]
    interval = pass_rate_interval(series, confidence=0.9)
    assert interval is not None
    assert interval.samples == 18 and interval.rate == pytest.approx(13 / 18)
    assert 0 < interval.autocorrelation < 0.99
    n_eff = 18 * (1 - interval.autocorrelation) / (1 + interval.autocorrelation)
    assert interval.effective_samples == pytest.approx(n_eff)
    low, high = proportion_confint(13 / 18 * n_eff, n_eff, alpha=0.1, method="wilson")
    assert (interval.low, interval.high) == pytest.approx((low, high), abs=1e-12)
    # Wider than the interval that pretends the samples are independent.
    plain = wilson_bounds(13 / 18, 18, 0.9)
    assert interval.low < plain[0] and interval.high > plain[1]
    data = interval.to_json()
    assert set(data) == {"low", "high", "level", "method", "effective_samples"}
    assert data["level"] == 0.9 and data["method"] == "wilson-effective-n"
    json.dumps(data, allow_nan=False)


def test_independent_outcomes_give_the_plain_wilson_interval() -> None:
    interval = pass_rate_interval([[1, 0, 1, 0, 1, 0, 1, 1]])  # negative r is clamped to 0
    assert interval is not None and interval.effective_samples == 8
    assert (interval.low, interval.high) == pytest.approx(proportion_confint(5, 8, method="wilson"), abs=1e-12)


@pytest.mark.parametrize("pass_rate", [0.5, 0.7, 0.9])
def test_nominal_95_interval_covers_the_true_rate_on_autocorrelated_series(pass_rate: float) -> None:
    # 1,000 runs of 4 series of 100 flaky outcomes (each repeats the previous with probability 0.8).
    rng = random.Random(20240 + int(pass_rate * 10))
    covered = 0
    for _ in range(1000):
        interval = pass_rate_interval([flaky_run(rng, 100, pass_rate) for _ in range(4)])
        assert interval is not None
        covered += interval.low <= pass_rate <= interval.high
    assert covered >= 920
