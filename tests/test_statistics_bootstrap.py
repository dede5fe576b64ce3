"""Median latency change and its block bootstrap (glasskit_eval.statistics.bootstrap)."""

from __future__ import annotations

import json
import random
import statistics

import numpy as np
import pytest

from glasskit_eval.statistics.bootstrap import median_latency_change


def latency_pairs(rng: random.Random, shift: float, n: int = 60, phi: float = 0.6) -> list[list[tuple[float, float]]]:
    """Baseline latencies around 0.2 s; candidate = baseline + shift + AR(1) noise."""
    series = []
    for _ in range(3):
        noise = 0.0
        pairs = []
        for _ in range(n):
            noise = phi * noise + rng.gauss(0.0, 0.01)
            base = 0.2 + rng.gauss(0.0, 0.005)
            pairs.append((base, base + shift + noise))
        series.append(pairs)
    return series


def test_median_and_reproducibility() -> None:
    series = latency_pairs(random.Random(1), 0.05)
    change = median_latency_change(series, resamples=300, seed=9)
    assert change is not None
    assert change.median == statistics.median([c - b for s in series for b, c in s])
    assert change == median_latency_change(series, resamples=300, seed=9)
    assert change != median_latency_change(series, resamples=300, seed=10)
    assert change.low <= change.median <= change.high
    assert change.block_length == max(1, round((1 + change.autocorrelation) / (1 - change.autocorrelation)))
    assert change.block_length > 1 and change.pairs == 180
    assert change.exceeds(0.03) and not change.exceeds(0.07)
    data = change.to_json()
    assert set(data) == {"median", "ci", "method", "block_length", "pairs"}
    json.dumps(data, allow_nan=False)


def test_stationary_scheme_and_edges() -> None:
    series = latency_pairs(random.Random(2), 0.0)
    change = median_latency_change(series, resamples=200, seed=1, scheme="stationary")
    assert change is not None and change.method == "block-bootstrap-stationary"
    assert change.low <= 0.0 <= change.high
    assert median_latency_change([[], []]) is None
    single = median_latency_change([[(0.1, 0.3)]], resamples=5)
    assert single is not None and single.median == single.low == single.high == pytest.approx(0.2)
    with pytest.raises(ValueError):
        median_latency_change([[(0.1, float("nan"))]])
    with pytest.raises(ValueError):
        median_latency_change(series, resamples=0)


def test_interval_covers_the_true_shift() -> None:
    rng = random.Random(5)
    covered = 0
    for _ in range(40):
        change = median_latency_change(latency_pairs(rng, 0.03), confidence=0.9, resamples=200, seed=rng.randrange(1000))
        assert change is not None
        covered += change.low <= 0.03 <= change.high
    assert covered >= 32


def test_up_to_the_cap_every_pair_is_resampled_as_before() -> None:
    series = latency_pairs(random.Random(6), 0.02)
    plain = median_latency_change(series, resamples=200, seed=3)
    assert plain == median_latency_change(series, resamples=200, seed=3, max_values=180)
    assert plain is not None and plain.method == "block-bootstrap-circular"


def test_a_subsampled_interval_matches_scipys_bootstrap_of_every_pair() -> None:
    from scipy import stats

    rng = random.Random(7)
    pairs = [(0.2, 0.2 + 0.01 + rng.expovariate(50.0)) for _ in range(20_000)]
    change = median_latency_change([pairs], resamples=2000, seed=1, max_values=2_000)
    assert change is not None and change.method == "block-bootstrap-circular-subsampled"
    assert change.block_length == 1  # independent differences: scipy's i.i.d. bootstrap is the reference
    differences = np.array([c - b for b, c in pairs])
    reference = stats.bootstrap((differences,), np.median, n_resamples=2000, batch=100, method="percentile",
                                confidence_level=0.95, random_state=np.random.default_rng(2)).confidence_interval
    width = reference.high - reference.low
    assert change.low == pytest.approx(reference.low, abs=0.15 * width)
    assert change.high == pytest.approx(reference.high, abs=0.15 * width)
    # And the published large-sample width of a median's interval: 2 z / (2 f(m) sqrt(n)), f the
    # exponential density at its median (rate 50: f = 25).
    assert change.high - change.low == pytest.approx(2 * 1.96 / (2 * 25 * np.sqrt(20_000)), rel=0.15)


def test_a_subsampled_interval_is_the_plain_one_on_correlated_series() -> None:
    # Regressions confined to stretches: AR(1) differences, blocks longer than one. The subsampled
    # interval must cover the true shift as often as the plain one and be about as wide.
    rng = random.Random(8)
    covered = {"plain": 0, "subsampled": 0}
    ratios = []
    for _ in range(30):
        series = latency_pairs(rng, 0.03, n=2_000)
        seed = rng.randrange(1000)
        plain = median_latency_change(series, confidence=0.9, resamples=200, seed=seed)
        sub = median_latency_change(series, confidence=0.9, resamples=200, seed=seed, max_values=1_500)
        assert plain is not None and sub is not None and sub.method.endswith("-subsampled") and sub.block_length > 1
        covered["plain"] += plain.low <= 0.03 <= plain.high
        covered["subsampled"] += sub.low <= 0.03 <= sub.high
        ratios.append((sub.high - sub.low) / (plain.high - plain.low))
    assert abs(covered["subsampled"] - covered["plain"]) <= 3, covered
    assert 0.85 <= statistics.mean(ratios) <= 1.15, statistics.mean(ratios)


def test_a_million_pairs_draw_a_bounded_sample_per_resample(monkeypatch: pytest.MonkeyPatch) -> None:
    # The work, not the clock: each resample draws about MAX_RESAMPLE_VALUES values
    # however many pairs there are (drawing all 10^6 each time took hours).
    from glasskit_eval.statistics import bootstrap

    drawn = [0]
    real = bootstrap._resample_series

    def counting(values, length, scheme, rng, out, count=None):  # type: ignore[no-untyped-def]
        before = len(out)
        real(values, length, scheme, rng, out, count)
        drawn[0] += len(out) - before

    monkeypatch.setattr(bootstrap, "_resample_series", counting)
    rng = random.Random(9)
    series = [[(0.1, 0.1 + rng.random() * 0.01) for _ in range(10_000)] for _ in range(100)]
    change = median_latency_change(series, resamples=200, seed=1)
    assert change is not None and change.pairs == 10**6 and change.low <= change.median <= change.high
    assert change.method.endswith("-subsampled")
    assert drawn[0] <= 200 * bootstrap.MAX_RESAMPLE_VALUES * 1.01, drawn[0]
