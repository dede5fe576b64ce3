"""Wilson score intervals for pass rates, with the effective sample size in place of n.

``wilson_bounds(rate, n, confidence)`` is the textbook Wilson score interval for an observed
proportion ``rate`` out of ``n`` trials, n real and positive; :func:`pass_rate_interval` feeds it
the pooled pass rate of the outcome series and their effective sample size
(:mod:`.effective`), so runs of passes and failures from neighbouring frames widen the interval
as they should.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from .effective import effective_sample

#: ``method`` of the intervals :func:`pass_rate_interval` makes.
WILSON_EFFECTIVE = "wilson-effective-n"


def finite(value: float) -> float:
    """``value`` as a float, or ValueError if it is NaN or infinite (JSON has neither)."""
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"not a finite number: {value!r}")
    return result


def check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 exclusive, got {confidence!r}")


def two_sided_z(confidence: float) -> float:
    """The standard normal quantile at ``(1 + confidence) / 2`` (1.96 for 0.95)."""
    check_confidence(confidence)
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_bounds(rate: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval (low, high) for a proportion ``rate`` observed over ``n > 0`` trials.

    ``n`` may be non-integer (an effective sample size). Bounds are clipped to [0, 1]; the low
    bound is exactly 0 at ``rate == 0`` and the high bound exactly 1 at ``rate == 1``.
    """
    if not n > 0.0 or not math.isfinite(n):
        raise ValueError(f"wilson_bounds needs a positive, finite n, got {n!r}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate!r}")
    z = two_sided_z(confidence)
    z2n = z * z / n
    denominator = 1.0 + z2n
    centre = (rate + z2n / 2.0) / denominator
    half = z / denominator * math.sqrt(rate * (1.0 - rate) / n + z2n / (4.0 * n))
    low = 0.0 if rate == 0.0 else max(0.0, centre - half)
    high = 1.0 if rate == 1.0 else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True, slots=True)
class PassRateInterval:
    """A pass rate with its Wilson interval at the effective sample size (JSON ``pass_rate_ci``)."""

    rate: float
    low: float
    high: float
    #: Confidence level as a fraction (0.95).
    level: float
    method: str
    #: n_eff used in place of n.
    effective_samples: float
    samples: int
    #: Clamped pooled lag-1 autocorrelation of the outcomes.
    autocorrelation: float

    def to_json(self) -> dict[str, object]:
        """``{"low", "high", "level", "method", "effective_samples"}``, finite floats."""
        return {"low": finite(self.low), "high": finite(self.high), "level": finite(self.level),
                "method": self.method, "effective_samples": finite(self.effective_samples)}


def pass_rate_interval(series: Sequence[Sequence[float]],
                       confidence: float = 0.95) -> PassRateInterval | None:
    """Pooled pass rate of outcome series (values in [0, 1]) and its Wilson interval at n_eff.

    None when there are no outcomes at all (no rate, no interval).
    """
    check_confidence(confidence)
    effective = effective_sample(series)
    if effective.samples == 0:
        return None
    total = 0.0
    for values in series:
        for value in values:
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"outcomes must be in [0, 1], got {value!r}")
            total += value
    rate = min(1.0, max(0.0, total / effective.samples))
    low, high = wilson_bounds(rate, effective.effective_samples, confidence)
    return PassRateInterval(rate=rate, low=low, high=high, level=confidence, method=WILSON_EFFECTIVE,
                            effective_samples=effective.effective_samples,
                            samples=effective.samples, autocorrelation=effective.autocorrelation)
