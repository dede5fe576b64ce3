"""Pooled lag-1 autocorrelation and effective sample size (glasskit_eval.statistics.effective)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from test_statistics_kit import flaky_run

from glasskit_eval.statistics.effective import (
    EffectiveSample,
    block_length,
    corrected_autocorrelation,
    effective_factor,
    effective_sample,
    lag1_autocorrelation,
)


def pooled_lag1_numpy(series: list[list[float]]) -> float:
    """Independent implementation: centre each series, add lag-1 products and squares."""
    products = squares = 0.0
    for values in series:
        if not values:
            continue
        centred = np.asarray(values, dtype=float) - np.mean(values)
        if not np.any(centred):
            continue
        products += float(np.dot(centred[:-1], centred[1:]))
        squares += float(np.dot(centred, centred))
    return products / squares if squares else 0.0


def test_hand_computed_example() -> None:
    # [1, 1, 0, 0]: centred +-0.5, products 0.25 - 0.25 + 0.25 = 0.25, squares 1.0.
    assert lag1_autocorrelation([[1, 1, 0, 0]]) == pytest.approx(0.25)
    # A series without variation adds nothing; an alternating one is negatively correlated.
    assert lag1_autocorrelation([[1, 1, 0, 0], [1, 1, 1]]) == pytest.approx(0.25)
    assert lag1_autocorrelation([[1, 0, 1, 0]]) == pytest.approx(-0.75)
    assert lag1_autocorrelation([[1, 1, 1], [0, 0], []]) == 0.0
    assert lag1_autocorrelation([]) == 0.0


def test_pooling_matches_an_independent_implementation() -> None:
    rng = random.Random(3)
    for _ in range(50):
        series = [[rng.choice([0.0, 1.0, 0.5, 1 / 3]) for _ in range(rng.randrange(0, 30))]
                  for _ in range(rng.randrange(1, 6))]
        assert lag1_autocorrelation(series) == pytest.approx(pooled_lag1_numpy(series), abs=1e-12)


def test_effective_sample_clamps_and_scales() -> None:
    # Negative correlation earns no extra samples.
    assert effective_sample([[1, 0, 1, 0]]) == EffectiveSample(samples=4, autocorrelation=0.0, effective_samples=4.0)
    result = effective_sample([[1, 1, 0, 0], [1, 1, 1]])
    assert result.samples == 7
    assert result.autocorrelation == pytest.approx(0.25)
    assert result.effective_samples == pytest.approx(7 * 0.75 / 1.25)
    assert result.factor == pytest.approx(0.6)
    assert effective_factor(1.0) == pytest.approx(0.01 / 1.99)
    assert effective_factor(-0.5) == 1.0
    assert effective_sample([]).effective_samples == 0.0
    assert [block_length(r) for r in (-0.3, 0.0, 0.3, 0.5, 0.8, 1.0)] == [1, 1, 2, 3, 9, 199]


def test_markov_outcomes_give_their_lag1_correlation() -> None:
    # The flaky-model chain has lag-1 correlation 0.8 whatever its pass rate.
    rng = random.Random(5)
    for pass_rate in (0.5, 0.9):
        series = [flaky_run(rng, 5000, pass_rate) for _ in range(4)]
        assert lag1_autocorrelation(series) == pytest.approx(0.8, abs=0.02)
    independent = [[float(rng.random() < 0.7) for _ in range(5000)] for _ in range(4)]
    assert lag1_autocorrelation(independent) == pytest.approx(0.0, abs=0.02)


@pytest.mark.parametrize("phi", [-0.5, 0.0, 0.4, 0.9])
def test_gaussian_ar1_series_give_phi(phi: float) -> None:
    rng = np.random.default_rng(17)
    series = []
    for _ in range(3):
        noise = rng.normal(size=8000)
        values = np.empty_like(noise)
        values[0] = noise[0] / np.sqrt(1 - phi * phi)
        for i in range(1, len(values)):
            values[i] = phi * values[i - 1] + noise[i]
        series.append((values + 3.0).tolist())
    assert lag1_autocorrelation(series) == pytest.approx(phi, abs=0.02)
    expected = min(0.99, max(0.0, phi))
    assert effective_sample(series).effective_samples == pytest.approx(
        24000 * (1 - expected) / (1 + expected), rel=0.1, abs=100)


def test_repeat_fractions_are_outcomes() -> None:
    series = [[2 / 3, 2 / 3, 1 / 3, 0.0, 1.0, 1.0]]
    assert lag1_autocorrelation(series) == pytest.approx(pooled_lag1_numpy(series), abs=1e-12)


def test_small_series_bias_correction() -> None:
    from glasskit_eval.statistics.effective import corrected_autocorrelation

    # Mean length of the varying series 12 (the constant one does not count): (12 r + 1) / 9.
    varying = [[1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1], [0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0]]
    raw = lag1_autocorrelation([*varying, [1] * 30])
    assert corrected_autocorrelation([*varying, [1] * 30]) == pytest.approx((12 * raw + 1) / 9)
    # Short series are left as measured; the result is clamped.
    assert corrected_autocorrelation([[1, 1, 0, 0]]) == pytest.approx(0.25)
    assert corrected_autocorrelation([[1, 0] * 10]) == 0.0
    assert corrected_autocorrelation([[1] * 20 + [0] * 20]) == 0.99


def test_corrected_r_is_unbiased_enough_on_short_flaky_series() -> None:
    rng = random.Random(8)
    from glasskit_eval.statistics.effective import corrected_autocorrelation

    raws, corrected = [], []
    for _ in range(300):
        series = [flaky_run(rng, 100, 0.7) for _ in range(4)]
        raws.append(lag1_autocorrelation(series))
        corrected.append(corrected_autocorrelation(series))
    assert sum(raws) / 300 < 0.78  # the measured estimate is biased low...
    assert sum(corrected) / 300 == pytest.approx(0.8, abs=0.015)  # ...the corrected one is not


@pytest.mark.parametrize("value", [0.1, 1e308, 1e9 / 3])
def test_a_constant_series_whose_float_mean_is_off_counts_as_constant(value: float) -> None:
    # sum([0.1] * 3) / 3 is not 0.1: the rounded centred values must not make the series "vary".
    assert corrected_autocorrelation([[value] * 3]) == 0.0
    assert corrected_autocorrelation([[value] * 3, [0.0, 1.0, 0.0, 1.0]]) == corrected_autocorrelation(
        [[0.0, 1.0, 0.0, 1.0]])
