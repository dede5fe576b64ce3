"""How big a pass-rate drop an eval can see: the minimum detectable drop at a given power.

For the one-sided paired test of :mod:`.paired` at level alpha, the normal approximation to
McNemar's test (Connor, 1987) says a drop ``delta`` is detected with probability ``power`` when

    sqrt(n_eff) * delta >= z(1 - alpha) * sqrt(f) + z(power) * sqrt(f - delta^2)

with ``n_eff`` the effective number of pairs (n (1 - r) / (1 + r), r of the differences), ``f``
the flip rate (share of discordant pairs, (b + c) / n) and z the standard normal quantiles. The
left side minus the right side increases with delta, so the smallest such delta is found by
bisection on ``(0, min(f, p)]`` (a drop can be no larger than the baseline pass rate p, nor than
the share of pairs that flip; power >= 0.5 keeps the difference monotone). When no flip rate has been observed (no baseline yet, or no
discordant pairs) ``f = 2 p (1 - p)`` is used: the flip rate of two independent runs at pass
rate p. The flip rate is the one under the alternative; an observed rate from a comparison
without a real drop slightly understates it, and so the drop a little.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from .effective import effective_factor

_BISECTIONS = 100


def independent_flip_rate(pass_rate: float) -> float:
    """``2 p (1 - p)``: the share of samples on which two independent runs at rate p disagree."""
    return 2.0 * pass_rate * (1.0 - pass_rate)


def minimum_detectable_drop(effective_pairs: float, pass_rate: float, flip_rate: float | None = None,
                            alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest pass-rate drop (a fraction) the one-sided paired test detects with ``power``.

    ``effective_pairs`` is n_eff of the differences, ``pass_rate`` the baseline pass rate and
    ``flip_rate`` the share of discordant pairs (None or 0: ``2 p (1 - p)``). None when no drop
    up to ``min(flip_rate, pass_rate)`` reaches the power (the eval is too small to see any).
    """
    if not 0.0 < alpha < 1.0 or not 0.5 <= power < 1.0:
        raise ValueError(f"alpha must be in (0, 1) and power in [0.5, 1), got {alpha!r}, {power!r}")
    if not 0.0 <= pass_rate <= 1.0:
        raise ValueError(f"pass_rate must be in [0, 1], got {pass_rate!r}")
    if flip_rate is not None and not 0.0 <= flip_rate <= 1.0:
        raise ValueError(f"flip_rate must be in [0, 1], got {flip_rate!r}")
    if effective_pairs < 0.0 or not math.isfinite(effective_pairs):
        raise ValueError(f"effective_pairs must be finite and >= 0, got {effective_pairs!r}")
    f = flip_rate if flip_rate else independent_flip_rate(pass_rate)
    # A drop of delta flips at least delta of the samples, whatever flipped before; and no run
    # can drop by more than its pass rate.
    largest = pass_rate
    if effective_pairs == 0.0 or largest <= 0.0:
        return None
    z_alpha = NormalDist().inv_cdf(1.0 - alpha)
    z_power = NormalDist().inv_cdf(power)
    root_n = math.sqrt(effective_pairs)

    def margin(delta: float) -> float:
        flips = max(f, delta)
        return root_n * delta - z_alpha * math.sqrt(flips) - z_power * math.sqrt(max(0.0, flips - delta * delta))

    if margin(largest) < 0.0:
        return None
    low, high = 0.0, largest
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2.0
        if margin(middle) >= 0.0:
            high = middle
        else:
            low = middle
    return high


#: The largest ``--repeat`` :func:`repeats_to_detect` suggests.
MOST_REPEATS = 50


def repeats_to_detect(drop: float, pairs: int, noise_flip_rate: float, autocorrelation: float,
                      alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Smallest ``--repeat`` N >= 2 at which a consistent drop of ``drop`` is detected with ``power``.

    With repeats the test learns its noise within each version and a drop that every trial shows
    keeps its size, while the noise averages over N independent trials a side: the summed
    differences of ``pairs`` pairs have null variance ``pairs * f / N * (1 + r) / (1 - r)``, with
    ``f`` (``noise_flip_rate``) the share of pairs flipping for other reasons and r their lag-1
    autocorrelation. The normal approximation then detects the drop when ``pairs * drop >= (z(1 -
    alpha) + z(power)) * sqrt(that variance)``, so ``N = (z(1 - alpha) + z(power))^2 f (1 + r) /
    ((1 - r) pairs drop^2)``, rounded up, at least 2. None above :data:`MOST_REPEATS`.
    """
    if not 0.0 < drop <= 1.0 or pairs < 1:
        raise ValueError(f"drop must be in (0, 1] and pairs >= 1, got {drop!r}, {pairs!r}")
    if not 0.0 < alpha < 1.0 or not 0.5 <= power < 1.0:
        raise ValueError(f"alpha must be in (0, 1) and power in [0.5, 1), got {alpha!r}, {power!r}")
    z = NormalDist().inv_cdf(1.0 - alpha) + NormalDist().inv_cdf(power)
    inflation = 1.0 / effective_factor(autocorrelation)
    needed = z * z * max(0.0, noise_flip_rate) * inflation / (pairs * drop * drop)
    repeats = max(2, math.ceil(needed - 1e-9))
    return repeats if repeats <= MOST_REPEATS else None
