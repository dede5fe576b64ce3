"""Lag-1 autocorrelation of outcome series and the effective sample size it implies.

Outcomes come as series, one per (case, target) in time order: 1 passed, 0 failed or error, or,
with ``--repeat``, a sample's pass fraction across trials. Neighbouring samples of a video tend to
pass or fail together, so n outcomes carry less information than n independent ones. Under an
AR(1) model with lag-1 correlation r the variance of a mean is inflated by (1 + r) / (1 - r), so
the eval is worth ``n_eff = n * (1 - r) / (1 + r)`` independent samples.

r is pooled over series: each series is centred on its own mean, and the sums of lag-1 products
and of squares are added over series before dividing; a series without variation adds to neither.
The estimate is clamped to [0, 0.99]: negative correlation never earns extra samples, and the
factor stays positive.

Before clamping, r is corrected for the known small-sample bias of a lag-1 autocorrelation taken
about each series' own mean, ``E[r] ~ rho - (1 + 3 rho) / m`` for series of length m (Marriott and
Pope, 1954): ``r = (m r_raw + 1) / (m - 3)`` with m the mean length of the series that vary, when
that is at least 10 (shorter series are left uncorrected). The correction vanishes for long
series. Without it, 4 series of 100 flaky outcomes (true rho 0.8) estimate r at about 0.75-0.77,
n_eff comes out a fifth too large, and the nominal 95% Wilson interval covered a 0.9 pass rate in
only 91.6% of simulated runs; with it, 93.6% (and 95.7-96% at pass rates 0.5 and 0.7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

#: r is clamped to [0, MAX_AUTOCORRELATION] before it is used.
MAX_AUTOCORRELATION = 0.99


@dataclass(frozen=True, slots=True)
class EffectiveSample:
    """How many independent samples a set of series is worth."""

    #: Number of outcomes over all series.
    samples: int
    #: Pooled lag-1 autocorrelation, bias-corrected and clamped to [0, 0.99].
    autocorrelation: float
    #: ``samples * factor``.
    effective_samples: float

    @property
    def factor(self) -> float:
        """``(1 - r) / (1 + r)``: the share of the samples that counts."""
        return effective_factor(self.autocorrelation)


#: Series shorter than this on average are not bias-corrected.
MIN_CORRECTED_LENGTH = 10


def lag1_sums(series: Sequence[Sequence[float]]) -> tuple[float, float, int]:
    """(sum of lag-1 products, sum of squares, number of values) of the centred series that vary,
    added over series."""
    products = 0.0
    squares = 0.0
    count = 0
    for values in series:
        n = len(values)
        # A constant series is skipped by its values, not by its rounded squares: the float mean of
        # [0.1, 0.1, 0.1] is not 0.1, and the series must not count as varying.
        if n == 0 or min(values) == max(values):
            continue
        mean = sum(values) / n
        centred = [v - mean for v in values]
        square_sum = sum(c * c for c in centred)
        if square_sum == 0.0:
            continue
        squares += square_sum
        count += n
        products += sum(a * b for a, b in pairwise(centred))
    return products, squares, count


def lag1_autocorrelation(series: Sequence[Sequence[float]]) -> float:
    """Pooled lag-1 autocorrelation as measured, unclamped (in [-1, 1]); 0.0 when no series varies."""
    products, squares, _ = lag1_sums(series)
    if squares <= 0.0:
        return 0.0
    return max(-1.0, min(1.0, products / squares))


def corrected_autocorrelation(series: Sequence[Sequence[float]]) -> float:
    """Pooled lag-1 autocorrelation with the small-sample bias correction, clamped to [0, 0.99].

    This is the r every other function of the package uses.
    """
    products, squares, count = lag1_sums(series)
    if squares <= 0.0:
        return 0.0
    raw = max(-1.0, min(1.0, products / squares))
    varying = sum(1 for values in series if len(values) > 0 and min(values) != max(values))
    length = count / varying
    if length >= MIN_CORRECTED_LENGTH:
        raw = (length * raw + 1.0) / (length - 3.0)
    return clamp_autocorrelation(raw)


def clamp_autocorrelation(r: float) -> float:
    """r clamped to [0, 0.99]."""
    return min(MAX_AUTOCORRELATION, max(0.0, r))


def effective_factor(r: float) -> float:
    """``(1 - r) / (1 + r)`` with r clamped to [0, 0.99] first (1.0 for r <= 0)."""
    rc = clamp_autocorrelation(r)
    return (1.0 - rc) / (1.0 + rc)


def block_length(r: float) -> int:
    """Samples per independent block, ``max(1, round((1 + r) / (1 - r)))`` with r clamped."""
    return max(1, round(1.0 / effective_factor(r)))


def effective_sample(series: Sequence[Sequence[float]]) -> EffectiveSample:
    """n, corrected and clamped pooled r and ``n_eff = n (1 - r) / (1 + r)`` of outcome series."""
    n = sum(len(values) for values in series)
    r = corrected_autocorrelation(series)
    return EffectiveSample(samples=n, autocorrelation=r, effective_samples=n * effective_factor(r))
