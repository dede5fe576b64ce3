"""Anytime-valid bounds on the pass rate of a finite set of samples drawn in random order.

The population is fixed and finite: the ``planned`` samples of a gate, grouped into ``units``
(blocks of consecutive samples) that are evaluated in a uniformly random order, without
replacement. After each unit the bound covers the pass rate of the *whole* population, with
probability at least ``1 - alpha`` simultaneously over every unit, so a caller may stop whenever
it likes (at a data-dependent time) and the bound still holds. Nothing is assumed about the
samples themselves: neighbouring frames may pass and fail together; the randomness is the
order's alone.

Method: the betting confidence sequence for sampling without replacement of Waudby-Smith and
Ramdas ("Confidence sequences for sampling without replacement", NeurIPS 2020, section 3;
"Estimating means of bounded random variables by betting", JRSS-B 2023, hedged capital). A unit
scores ``x = passes / scale`` in [0, 1] (``scale``: the largest unit's size). For every
candidate population total ``P`` of passes (an integer, so the bound is exact on the grid of
possible pass rates) the mean of the units not yet drawn is
``mu_t(P) = (P - S_{t-1}) / (scale * (units - t + 1))``, and two gamblers bet on the next unit:
``K+_t = prod (1 + l+_i (x_i - mu_i))`` and ``K-_t = prod (1 - l-_i (x_i - mu_i))`` with
predictable bets (aGRAPA: ``(mu_hat - mu) / (var_hat + (mu_hat - mu)^2)``, truncated at
``TRUNCATION / mu`` and ``TRUNCATION / (1 - mu)``). Under the true ``P`` the average
``(K+ + K-) / 2`` is a nonnegative martingale starting at 1, so by Ville's inequality it reaches
``1 / alpha`` with probability at most ``alpha``: the candidates whose capital ever did are
excluded for good (the running intersection), and so are totals the passes seen make impossible
(fewer than the passes seen, or more than they plus every sample not yet seen).

Samples whose results are known before the order starts (read from the observation cache) are
constants, not draws: ``start(..., known=, known_passes=)`` takes them aside, the sequence covers
the remaining samples (``planned``, in ``units`` visited in a uniformly random order), and every
bound is on the whole population: ``(known_passes + T) / (known + planned)`` for each total ``T``
of the remaining samples still possible. With every sample known the bound is the exact rate.

Several gates share one ``alpha`` by a Bonferroni split (:func:`gate_alpha`): each gate's
sequence runs at ``alpha / gates``, so the chance that any gate's bound misses is at most
``alpha``.

Pure: :func:`start` makes a :class:`RateSequence`, :func:`observe` returns the next one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: How far a bet may go towards ruin: at most this share of the capital on one unit.
TRUNCATION = 0.75

#: Slack of the pass-rate comparison, as the gates compare counts (50% of 6 passes a 0.5 gate).
_EPS = 1e-9

#: Marks a candidate total excluded for good.
_OUT = math.inf


@dataclass(frozen=True, slots=True)
class RateSequence:
    """The state of one gate's confidence sequence after ``seen_units`` units."""

    #: Samples drawn in random order (the known ones aside).
    planned: int
    units: int
    scale: int
    alpha: float
    seen_units: int
    seen_samples: int
    passes: int
    #: Sums over the units seen of ``x`` and of ``(x - mu_hat)^2`` (the predictable estimates).
    sum_x: float
    sum_sq: float
    #: Smallest candidate total still in the sequence; ``capital`` covers ``low_total ..``.
    low_total: int
    #: Per candidate total from ``low_total``: (log K+, log K-), ``(inf, inf)`` once excluded.
    capital: tuple[tuple[float, float], ...]
    #: Samples whose results were known before the first unit, and how many of them passed.
    known: int = 0
    known_passes: int = 0

    @property
    def high_total(self) -> int:
        return self.low_total + len(self.capital) - 1

    @property
    def population(self) -> int:
        return self.known + self.planned

    @property
    def low(self) -> float:
        """The lower bound on the whole population's pass rate (known samples included)."""
        return (self.known_passes + self.low_total) / self.population if self.population else 0.0

    @property
    def high(self) -> float:
        return (self.known_passes + self.high_total) / self.population if self.population else 1.0

    def verdict(self, minimum: float) -> str | None:
        """``pass`` when every total still possible meets ``minimum``, ``fail`` when none does."""
        need = minimum * self.population - _EPS
        if self.known_passes + self.low_total >= need:
            return "pass"
        if self.known_passes + self.high_total < need:
            return "fail"
        return None


def gate_alpha(alpha: float, gates: int) -> float:
    """Each gate's share of ``alpha`` (Bonferroni): the bounds of ``gates`` gates all hold with
    probability at least ``1 - alpha``."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 exclusive, got {alpha!r}")
    return alpha / max(gates, 1)


def start(planned: int, units: int, scale: int, alpha: float, *, known: int = 0,
          known_passes: int = 0) -> RateSequence:
    """A sequence over ``planned`` samples in ``units`` units of at most ``scale`` samples each, beside
    ``known`` samples whose ``known_passes`` passes are already counted."""
    if planned < 0 or units < 0 or scale < 0:
        raise ValueError("planned, units and scale must be nonnegative")
    if not 0 <= known_passes <= known:
        raise ValueError(f"{known_passes} known passes do not fit {known} known samples")
    if planned > units * scale:
        raise ValueError(f"{planned} samples do not fit in {units} units of at most {scale}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 exclusive, got {alpha!r}")
    return RateSequence(planned, units, scale, alpha, 0, 0, 0, 0.0, 0.0, 0,
                        tuple((0.0, 0.0) for _ in range(planned + 1)), known, known_passes)


def observe(state: RateSequence, passes: int, size: int) -> RateSequence:
    """The sequence after one more unit of ``size`` samples of which ``passes`` passed."""
    if not 0 <= passes <= size <= state.scale:
        raise ValueError(f"a unit of {size} samples with {passes} passes does not fit scale {state.scale}")
    if state.seen_units >= state.units or state.seen_samples + size > state.planned:
        raise ValueError("more units observed than the population has")
    x = passes / state.scale if state.scale else 0.0
    t = state.seen_units + 1
    mu_hat = (0.5 + state.sum_x) / t
    var_hat = (0.25 + state.sum_sq) / t
    remaining_units = state.units - t + 1
    threshold = math.log(1.0 / state.alpha)
    seen_samples = state.seen_samples + size
    new_passes = state.passes + passes
    # Totals the passes seen now make impossible.
    lowest = new_passes
    highest = new_passes + state.planned - seen_samples
    updated: list[tuple[float, float]] = []
    for offset, (log_plus, log_minus) in enumerate(state.capital):
        total = state.low_total + offset
        if log_plus == _OUT or not lowest <= total <= highest:
            updated.append((_OUT, _OUT))
            continue
        mu = (total - state.passes) / (state.scale * remaining_units)
        log_plus += _log_growth(x - mu, _bet(mu_hat - mu, var_hat, TRUNCATION / mu if mu > 0 else 0.0))
        log_minus += _log_growth(mu - x, _bet(mu - mu_hat, var_hat, TRUNCATION / (1 - mu) if mu < 1 else 0.0))
        hedged = max(log_plus, log_minus) + math.log1p(math.exp(-abs(log_plus - log_minus))) - math.log(2.0)
        updated.append((_OUT, _OUT) if hedged >= threshold else (log_plus, log_minus))
    first = next((i for i, c in enumerate(updated) if c[0] != _OUT), None)
    if first is None:
        # Every total excluded: cannot happen under the sequence's own guarantee unless a bound
        # of probability alpha was crossed; keep the totals the data still allow.
        kept = (lowest, highest)
        capital: tuple[tuple[float, float], ...] = tuple((0.0, 0.0) for _ in range(kept[1] - kept[0] + 1))
        low_total = kept[0]
    else:
        last = max(i for i, c in enumerate(updated) if c[0] != _OUT)
        capital = tuple(updated[first:last + 1])
        low_total = state.low_total + first
    return RateSequence(state.planned, state.units, state.scale, state.alpha, t, seen_samples, new_passes,
                        state.sum_x + x, state.sum_sq + (x - mu_hat) ** 2, low_total, capital, state.known,
                        state.known_passes)


def _bet(edge: float, var_hat: float, cap: float) -> float:
    """aGRAPA's bet on an ``edge`` of the running mean over the null, in [0, cap]."""
    if edge <= 0.0 or cap <= 0.0:
        return 0.0
    return min(edge / (var_hat + edge * edge), cap)


def _log_growth(excess: float, bet: float) -> float:
    return math.log1p(bet * excess) if bet else 0.0
