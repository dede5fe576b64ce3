"""Continuous binomial tails (glasskit_eval.statistics.binomial) against scipy."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import special, stats

from glasskit_eval.statistics.binomial import (
    binomial_cdf,
    binomial_pmf,
    binomial_upper_tail,
    regularized_beta,
    upper_mid_p,
)


def test_regularized_beta_matches_scipy_betainc() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        a = rng.choice([rng.uniform(0.01, 2), rng.uniform(2, 200), rng.uniform(200, 3000)])
        b = rng.choice([rng.uniform(0.01, 2), rng.uniform(2, 200), rng.uniform(200, 3000)])
        x = rng.choice([rng.random(), a / (a + b), rng.uniform(0.45, 0.55)])
        assert regularized_beta(a, b, x) == pytest.approx(float(special.betainc(a, b, x)), abs=1e-12)


def test_regularized_beta_edges_and_limits() -> None:
    assert regularized_beta(2.0, 3.0, 0.0) == 0.0
    assert regularized_beta(2.0, 3.0, 1.0) == 1.0
    assert regularized_beta(0.0, 3.0, 0.3) == 1.0
    assert regularized_beta(3.0, 0.0, 0.3) == 0.0
    assert regularized_beta(1e-9, 3.0, 0.3) == pytest.approx(1.0, abs=1e-8)
    assert regularized_beta(3.0, 1e-9, 0.3) == pytest.approx(0.0, abs=1e-8)
    with pytest.raises(ValueError):
        regularized_beta(-1.0, 2.0, 0.5)
    with pytest.raises(ValueError):
        regularized_beta(0.0, 0.0, 0.5)


@pytest.mark.parametrize("p", [0.5, 0.03, 0.3, 0.9, 0.999])
def test_tails_and_pmf_equal_scipy_binom_at_integer_counts(p: float) -> None:
    for n in [*range(0, 41), 97, 250, 1000]:
        ks = np.arange(-1, n + 3)
        tails = [binomial_upper_tail(int(k), n, p) for k in ks]
        cdfs = [binomial_cdf(int(k), n, p) for k in ks]
        pmfs = [binomial_pmf(int(k), n, p) for k in ks[1:-2]]
        np.testing.assert_allclose(tails, stats.binom.sf(ks - 1, n, p), rtol=0, atol=1e-12)
        np.testing.assert_allclose(cdfs, stats.binom.cdf(ks, n, p), rtol=0, atol=1e-12)
        np.testing.assert_allclose(pmfs, stats.binom.pmf(ks[1:-2], n, p), rtol=0, atol=1e-12)


def test_upper_mid_p_is_the_exact_mid_p_at_integers() -> None:
    for n in range(0, 120):
        ks = np.arange(0, n + 1)
        exact = stats.binom.sf(ks, n, 0.5) + 0.5 * stats.binom.pmf(ks, n, 0.5)
        np.testing.assert_allclose([upper_mid_p(int(k), n) for k in ks], exact, rtol=0, atol=1e-12)


def test_tail_is_continuous_and_monotone_between_integers() -> None:
    n = 12.0
    previous = 1.0
    for step in range(0, 13 * 40 + 1):
        k = step / 40
        tail = binomial_upper_tail(k, n, 0.5)
        assert tail <= previous + 1e-15
        previous = tail
    # Non-integer n: a larger n makes reaching k more likely.
    assert binomial_upper_tail(4.0, 7.5, 0.5) > binomial_upper_tail(4.0, 7.0, 0.5)
    assert binomial_upper_tail(4.0, 7.5, 0.5) < binomial_upper_tail(4.0, 8.0, 0.5)
    assert binomial_upper_tail(4.0, 7.5, 0.5) == pytest.approx(float(special.betainc(4.0, 4.5, 0.5)), abs=1e-12)
