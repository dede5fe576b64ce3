"""Descriptive figures: the percentiles and the mean every report and the engine use, computed here only.

Two percentile rules, each named for what it serves:

- :func:`percentile` is the **nearest-rank** percentile (the smallest value with at least ``p``
  percent of the values at or below it): latency p50/p90/p95 of samples, calls and stream events.
  It always returns one of the values, so exact values (Fractions of media time) stay exact.
- :func:`interpolated_quantile` is **linear interpolation between order statistics** (numpy's
  default, Hyndman and Fan's type 7): the bootstrap's median and interval bounds, where a value
  between two resampled medians is the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

_Value = TypeVar("_Value")


def percentile(ordered: Sequence[_Value], p: float) -> _Value:
    """Nearest-rank percentile of sorted values (``p`` in 0..100): ``ordered[ceil(p/100 * n) - 1]``,
    the first value for ``p`` 0. Exact values (Fractions) stay exact."""
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def interpolated_quantile(sorted_values: Sequence[float], fraction: float) -> float:
    """Quantile of sorted values at ``fraction`` (0..1) by linear interpolation between order
    statistics (numpy's default, R's type 7)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    position = fraction * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    weight = position - below
    return sorted_values[below] + weight * (sorted_values[above] - sorted_values[below])


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean (``sum / n``, summed in order); None for no values."""
    return sum(values) / len(values) if values else None
