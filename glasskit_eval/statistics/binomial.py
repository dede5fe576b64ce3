"""Binomial tails for non-integer counts, through the regularized incomplete beta function.

``P(X >= k)`` for ``X ~ Binomial(n, p)`` equals ``I_p(k, n - k + 1)`` at integer k and n. Taking
that as the definition for real ``0 <= k <= n + 1`` extends the tail continuously to the scaled
(non-integer) counts the autocorrelation-adjusted McNemar test uses, and equals the exact binomial
tail at integer counts. ``I_x(a, b)`` is evaluated with the continued fraction of Numerical
Recipes' ``betacf`` (modified Lentz), using the symmetry ``I_x(a, b) = 1 - I_{1-x}(b, a)`` where
the fraction converges slowly. The prefactor ``x^a (1-x)^b / B(a, b)`` is taken in logs from
Stirling's formula with ``math.lgamma`` for the remainder terms, written so that the large terms
cancel analytically (``a log(x (a+b) / a)`` via ``log1p``) instead of in floating point, which
keeps about 1e-14 absolute accuracy for counts in the thousands where ``lgamma(a+b) - lgamma(a)
- lgamma(b)`` loses three digits. Limits: ``I_x(0, b) = 1``, ``I_x(a, 0) = 0`` for 0 < x < 1.
"""

from __future__ import annotations

import math

_MAX_ITERATIONS = 100_000
_EPSILON = 1e-16
_TINY = 1e-300
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _stirling_remainder(z: float) -> float:
    """``lgamma(z) - ((z - 1/2) log z - z + log(2 pi) / 2)`` for z > 0."""
    if z < 10.0:
        return math.lgamma(z) - ((z - 0.5) * math.log(z) - z + _HALF_LOG_2PI)
    w = 1.0 / (z * z)
    return (1.0 / 12.0 - w * (1.0 / 360.0 - w * (1.0 / 1260.0 - w * (1.0 / 1680.0 - w / 1188.0)))) / z


def _log_front(a: float, b: float, x: float) -> float:
    """``log(x^a (1-x)^b / B(a, b))`` for a, b > 0 and 0 < x < 1."""
    total = a + b
    gap = x * b - (1.0 - x) * a  # x (a+b) - a = -((1-x) (a+b) - b)
    return (a * math.log1p(gap / a) + b * math.log1p(-gap / b)
            + 0.5 * math.log(a * b / total) - _HALF_LOG_2PI
            - _stirling_remainder(a) - _stirling_remainder(b) + _stirling_remainder(total))


def _lentz_step(aa: float, c: float, d: float) -> tuple[float, float, float]:
    """One term of the modified Lentz recurrence: the new (c, d) and the factor for h."""
    d = 1.0 + aa * d
    if abs(d) < _TINY:
        d = _TINY
    c = 1.0 + aa / c
    if abs(c) < _TINY:
        c = _TINY
    d = 1.0 / d
    return c, d, d * c


def _continued_fraction(a: float, b: float, x: float) -> float:
    """Numerical Recipes' ``betacf``: the continued fraction of I_x(a, b) (modified Lentz)."""
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < _TINY:
        d = _TINY
    d = 1.0 / d
    h = d
    for m in range(1, _MAX_ITERATIONS + 1):
        m2 = 2 * m
        # The even step, then the odd one.
        c, d, factor = _lentz_step(m * (b - m) * x / ((qam + m2) * (a + m2)), c, d)
        h *= factor
        c, d, delta = _lentz_step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)), c, d)
        h *= delta
        if abs(delta - 1.0) < _EPSILON:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def regularized_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b >= 0 (not both 0)."""
    if a < 0.0 or b < 0.0 or (a == 0.0 and b == 0.0) or math.isnan(x):
        raise ValueError(f"regularized_beta needs a, b >= 0, not both 0, got a={a}, b={b}, x={x}")
    if x <= 0.0:
        return 0.0 if a > 0.0 else 1.0
    if x >= 1.0:
        return 1.0 if b > 0.0 else 0.0
    if a == 0.0:
        return 1.0
    if b == 0.0:
        return 0.0
    front = math.exp(_log_front(a, b, x))
    if x < (a + 1.0) / (a + b + 2.0):
        return min(1.0, front * _continued_fraction(a, b, x) / a)
    return max(0.0, 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b)


def binomial_upper_tail(k: float, n: float, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``, continuous in real k and n (see module doc).

    1 for k <= 0; 0 for k > n (for integer counts) or ``n - k + 1 <= 0``.
    """
    if n < 0.0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"binomial_upper_tail needs n >= 0 and 0 <= p <= 1, got n={n}, p={p}")
    if k <= 0.0:
        return 1.0
    if n - k + 1.0 <= 0.0:
        return 0.0
    if k == math.floor(k) and n == math.floor(n) and k > n:
        return 0.0
    return regularized_beta(k, n - k + 1.0, p)


def binomial_cdf(k: float, n: float, p: float) -> float:
    """``P(X <= k) = 1 - P(X >= k + 1)``."""
    return 1.0 - binomial_upper_tail(k + 1.0, n, p)


def binomial_pmf(k: int, n: int, p: float) -> float:
    """``P(X = k)`` at integer counts, as the difference of two tails."""
    return binomial_upper_tail(k, n, p) - binomial_upper_tail(k + 1, n, p)


def upper_mid_p(k: float, n: float, p: float = 0.5) -> float:
    """One-sided mid-p ``0.5 * (P(X >= k) + P(X >= k + 1))``; at integers ``P(X > k) + P(X = k) / 2``."""
    return 0.5 * (binomial_upper_tail(k, n, p) + binomial_upper_tail(k + 1.0, n, p))
