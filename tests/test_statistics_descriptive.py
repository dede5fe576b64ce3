"""Percentiles and the mean (glasskit_eval.statistics.descriptive), each against an independent rule."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest

from glasskit_eval.statistics.descriptive import interpolated_quantile, mean, percentile


def test_interpolated_quantile_matches_numpy() -> None:
    values = sorted(random.Random(3).random() for _ in range(37))
    for fraction in (0.0, 0.025, 0.5, 0.975, 1.0):
        assert interpolated_quantile(values, fraction) == pytest.approx(float(np.percentile(values, fraction * 100)))
    with pytest.raises(ValueError):
        interpolated_quantile([], 0.5)


def test_percentile_is_numpy_inverted_cdf_and_keeps_exact_values() -> None:
    # Nearest rank is numpy's "inverted_cdf" method (Hyndman and Fan's type 1).
    rng = random.Random(11)
    for n in (1, 2, 5, 20, 37):
        values = sorted(rng.randrange(1000) for _ in range(n))
        for p in (0, 1, 25, 50, 90, 95, 99, 100):
            want = values[0] if p == 0 else int(np.percentile(values, p, method="inverted_cdf"))
            assert percentile(values, p) == want, (n, p)
    times = (Fraction(1, 3), Fraction(2, 3), Fraction(1))
    assert percentile(times, 50) is times[1]


def test_mean_of_nothing_is_none() -> None:
    assert mean(()) is None
    values = [random.Random(5).random() for _ in range(10)]
    assert mean(values) == pytest.approx(float(np.mean(values)))
    assert math.isclose(mean((0.25, 0.5)) or 0, 0.375)
