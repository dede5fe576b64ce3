"""Arms compared with a control on the same samples: a two-sided paired test, Holm across arms, Pareto sets.

``paired_difference_test(series, alpha, confidence, noise)``: the paired test of :mod:`.paired`
(pairs of ``(control, arm)`` outcomes, one series per (case, target) in time order), asking whether
the arm differs from the control in either direction. The p-value is the two-sided mid-p, twice the
smaller of the two one-sided ones (a drop: the mid-p of (b, c); a gain: of (c, b)), capped at 1,
both on the counts scaled as the one-sided test scales them (:func:`~.paired.count_scale`): by the
differences' autocorrelation without repeats (``noise_source`` ``differences``, the conservative
default), or, with ``noise`` (:func:`~.paired.trial_noise` of both arms' trials), to the null
variance the repeats estimate (``noise_source`` ``repeats``), so an arm's drop confined to one
stretch cannot inflate the noise it is judged against. The interval is the same Newcombe interval
of ``arm - control``.

``holm_across(tests)``: Holm's adjustment over one family (every arm against the control, at one
scope: a target, or overall), ``significant`` recomputed.

``pareto_front(points, directions)``: the names no other point matches or beats on every
objective while beating it on at least one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from .paired import (
    NOISE_FROM_DIFFERENCES,
    TWO_SIDED,
    TWO_SIDED_REPEATS,
    PairedSeries,
    PairedTest,
    TrialNoise,
    holm_adjust,
    paired_regression_test,
    scaled_mid_p,
)

#: Objective directions for :func:`pareto_front`.
HIGHER = 1
LOWER = -1


def paired_difference_test(series: PairedSeries, alpha: float = 0.05, confidence: float = 0.95,
                           noise: TrialNoise | None = None) -> PairedTest | None:
    """Two-sided paired test of ``arm - control``; None when there are no pairs. ``noise``: the
    repeats' (with ``--repeat``), else the noise is learnt from the differences."""
    test = paired_regression_test(series, alpha, confidence, noise)
    if test is None:
        return None
    drops, gains = test.drops * test.scale, test.gains * test.scale
    p_value = min(1.0, 2.0 * min(scaled_mid_p(drops, gains), scaled_mid_p(gains, drops)))
    method = TWO_SIDED if test.noise_source == NOISE_FROM_DIFFERENCES else TWO_SIDED_REPEATS
    return replace(test, p_value=p_value, p_value_raw=p_value, significant=p_value <= alpha, method=method)


def holm_across(tests: Sequence[PairedTest]) -> list[PairedTest]:
    """``tests`` (one family) with Holm-adjusted ``p_value`` and ``significant``; ``p_value_raw`` kept."""
    return holm_adjust(tests) if tests else []


def pareto_front(points: Mapping[str, Sequence[float]], directions: Sequence[int]) -> list[str]:
    """Names of the non-dominated points, in ``points``' order.

    ``directions[i]`` is :data:`HIGHER` or :data:`LOWER` (which way objective ``i`` is better). A
    point is dominated when another is at least as good on every objective and better on one;
    points equal on every objective are all kept.
    """
    for name, values in points.items():
        if len(values) != len(directions):
            raise ValueError(f"{name!r} has {len(values)} objectives, expected {len(directions)}")
    scored = {name: [v * d for v, d in zip(values, directions)] for name, values in points.items()}

    def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
        return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))

    return [name for name, mine in scored.items()
            if not any(dominates(other, mine) for o, other in scored.items() if o != name)]
