"""Median latency change between paired runs, with a block-bootstrap interval.

Input: one series per (case, target) in time order of ``(baseline, candidate)`` latencies in
seconds for the samples both runs evaluated. The differences ``candidate - baseline`` give the
median change (``statistics.median`` over all differences). Its interval resamples blocks of
neighbouring differences so that slow or fast stretches (a warm cache, a busy machine) stay
together: the block length is ``L = max(1, round((1 + r) / (1 - r)))`` with r the clamped pooled
lag-1 autocorrelation of the differences (:mod:`.effective`). Each resample rebuilds every
series to its own length from blocks that start at uniform positions and wrap around its end
(circular moving blocks), or, with ``scheme="stationary"``, from blocks of geometric length with
mean L (Politis and Romano's stationary bootstrap). The interval is the percentile interval of the
resampled medians (linear interpolation between order statistics). Above
:data:`MAX_RESAMPLE_VALUES` pairs each resample draws that many (m-out-of-n, Bickel, Götze and
van Zwet 1997) and the interval is scaled back by ``sqrt(m / n)``, so ``compare`` of two
10^6-sample reports stays in seconds. A ``random.Random(seed)`` drives every draw, so the same
input and seed give the same interval.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .descriptive import interpolated_quantile
from .effective import block_length, corrected_autocorrelation
from .intervals import check_confidence, finite

Scheme = Literal["circular", "stationary"]


@dataclass(frozen=True, slots=True)
class LatencyChange:
    """Median paired latency change (candidate minus baseline, seconds) and its interval."""

    median: float
    low: float
    high: float
    level: float
    #: ``"block-bootstrap-circular"`` or ``"block-bootstrap-stationary"``.
    method: str
    block_length: int
    #: Clamped pooled lag-1 autocorrelation of the differences.
    autocorrelation: float
    pairs: int
    resamples: int
    seed: int

    def exceeds(self, seconds: float) -> bool:
        """True when the interval's low bound is above ``seconds`` (``--fail-on-latency-regression``)."""
        return self.low > seconds

    def to_json(self) -> dict[str, object]:
        """``{"median", "ci": {"low", "high", "level"}, "method", "block_length", "pairs"}``."""
        return {"median": finite(self.median),
                "ci": {"low": finite(self.low), "high": finite(self.high), "level": finite(self.level)},
                "method": self.method, "block_length": self.block_length, "pairs": self.pairs}


#: Values one resample draws: above this many pairs, each resample draws this many (blocks of
#: the same length, from every series in proportion to its length) and the interval is scaled
#: back by ``sqrt(m / n)``. 2,000 resamples of 10,000 take seconds, where 2,000 of 10^6 took hours.
MAX_RESAMPLE_VALUES = 10_000


def _resample_series(values: Sequence[float], length: int, scheme: Scheme,
                     rng: random.Random, out: list[float], count: int | None = None) -> None:
    """Append one block resample of ``values`` (``count`` values, default its length) to ``out``."""
    n = len(values)
    want = n if count is None else count
    if length == 1 and scheme == "circular":
        out.extend(rng.choices(values, k=want))  # blocks of one: the draws, in bulk
        return
    filled = 0
    while filled < want:
        start = rng.randrange(n)
        if scheme == "stationary":
            # Geometric length with mean `length`: P(stop after each value) = 1 / length.
            size = 1
            while rng.random() >= 1.0 / length:
                size += 1
        else:
            size = length
        size = min(size, want - filled, n)
        # The block wraps around the series' end at most once (size <= n).
        end = start + size
        out.extend(values[start:end] if end <= n else [*values[start:], *values[:end - n]])
        filled += size


def median_latency_change(series: Sequence[Sequence[tuple[float, float]]], confidence: float = 0.95,
                          resamples: int = 2000, seed: int = 0, scheme: Scheme = "circular",
                          max_values: int = MAX_RESAMPLE_VALUES) -> LatencyChange | None:
    """Median of paired latency differences and its block-bootstrap percentile interval.

    None when there are no pairs. Latencies must be finite. With more than ``max_values`` pairs
    (n), each resample draws m = ``max_values`` of them (m-out-of-n: each series gives its share,
    rounded at random) and the interval is ``median + sqrt(m / n) * (q - median)`` for the
    resampled medians' percentiles q, which is the plain percentile interval when m = n.
    """
    check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}")
    if scheme not in ("circular", "stationary"):
        raise ValueError(f"scheme must be 'circular' or 'stationary', got {scheme!r}")
    if max_values < 1:
        raise ValueError(f"max_values must be at least 1, got {max_values!r}")
    differences = [[finite(cand) - finite(base) for base, cand in values] for values in series]
    differences = [values for values in differences if values]
    pairs = sum(len(values) for values in differences)
    if pairs == 0:
        return None
    r = corrected_autocorrelation(differences)
    length = block_length(r)
    rng = random.Random(seed)
    share = min(1.0, max_values / pairs)
    medians: list[float] = []
    buffer: list[float] = []
    for _ in range(resamples):
        buffer.clear()
        for values in differences:
            count = None
            if share < 1.0:
                wanted = len(values) * share
                count = math.floor(wanted) + (rng.random() < wanted - math.floor(wanted))
                if count == 0:
                    continue
            _resample_series(values, min(length, len(values)), scheme, rng, buffer, count)
        if buffer:
            medians.append(statistics.median(buffer))
    center = statistics.median([d for values in differences for d in values])
    if not medians:  # every share rounded to nothing (only with max_values far below the series count)
        medians.append(center)
    medians.sort()
    tail = (1.0 - confidence) / 2.0
    scale = math.sqrt(share)

    def bound(fraction: float) -> float:
        q = interpolated_quantile(medians, fraction)
        return q if share == 1.0 else center + scale * (q - center)

    return LatencyChange(median=center, low=bound(tail), high=bound(1.0 - tail), level=confidence,
                         method=f"block-bootstrap-{scheme}" + ("" if share == 1.0 else "-subsampled"),
                         block_length=length, autocorrelation=r, pairs=pairs, resamples=resamples, seed=seed)
