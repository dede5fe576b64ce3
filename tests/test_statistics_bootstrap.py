"""Median latency change and its block bootstrap (glasskit_eval.statistics.bootstrap)."""

from __future__ import annotations

import json
import random
import statistics

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
