"""Paired regression test of pass rates: baseline against candidate on the same samples.

Input is one series per (case, target) in time order of ``(baseline, candidate)`` outcome pairs
(1 passed, 0 failed or error, or pass fractions with ``--repeat``). Per pair ``d = candidate -
baseline``; ``drops`` is the sum of ``max(0, -d)`` (pass -> fail, McNemar's b) and ``gains`` the
sum of ``max(0, d)`` (fail -> pass, c).

The test (one-sided: did the pass rate drop?)
    r is the pooled lag-1 autocorrelation of the differences (:mod:`.effective`, clamped to
    [0, 0.99]). Both discordant counts are scaled by ``(1 - r) / (1 + r)``, and the p-value is the
    one-sided McNemar mid-p on the scaled counts: with ``X ~ Binomial(b' + c', 1/2)``,
    ``p = (P(X >= b') + P(X >= b' + 1)) / 2`` through the continuous binomial tail of
    :mod:`.binomial`. For r <= 0 this is exactly the one-sided McNemar mid-p. With pass
    fractions (``--repeat``) the null variance of a difference is ``d * d``, below ``|d|``, so the
    counts are further scaled by ``(b + c) / sum(d * d)`` (1 for 0/1 outcomes).

    Why this is calibrated: under "no change" the sum of the differences has variance ``(b + c)``
    times the AR(1) variance inflation ``(1 + r) / (1 - r)``; McNemar on counts shrunk by the same
    factor has exactly that null variance in the original units. Scaling by the differences' r
    (not the outcomes') is what matters: differences of two independent reruns of a flaky model
    keep the runs' correlation, whereas a drop that hits samples independently does not. (A plain
    block sign-flip test with blocks of (1 + r) / (1 - r) samples is known to over-flag.)

    Measured (2,000 simulated comparisons each, 4 series of 100 pairs, alpha 0.05): A/A reruns of
    a flaky model (90% pass, each result repeating the previous one with probability 0.8) flag
    3.6%; a 10-point drop is flagged in 99% of runs when both runs' results are independent from
    sample to sample, and in 100% when the candidate fails the baseline's own passing samples
    independently. The assumption is one geometric (AR(1)) decay of correlation in the
    differences. A mixture breaks it: against a flaky baseline, a candidate whose results are
    independent from sample to sample at the same 90% makes differences whose lag-1 r (about 0.4)
    understates their long-run correlation, and 18.8% of such no-change comparisons are flagged.
    Estimating more lags did not fix this on series of 100 (12.8%) and made the intervals worse.
    On a flaky rerun plus a 10-point drop the run-to-run noise alone is about 6 points (the
    eval's minimum detectable drop there is about 17 points), so no calibrated test finds that
    drop 80% of the time; this one does in 67%.

The interval for ``delta = candidate rate - baseline rate``
    Newcombe's hybrid score interval for paired proportions (method 10, 1998): the Wilson
    intervals of the two rates, combined with the correlation phi of the pairs, with the effective
    number of pairs ``n_eff = n (1 - r) / (1 + r)`` (r of the differences) in place of n for both
    Wilson intervals; phi is the Pearson correlation of baseline and candidate outcomes.

Where the noise is learnt (``noise_source``)
    ``differences`` (no repeats): r is taken from the between-version differences, as above. This
    is the conservative default: a real drop confined to one stretch of video makes the
    differences autocorrelated too, so r rises, n_eff falls and the drop can hide itself (a
    deterministic 30/30 -> 20/30 with ten consecutive failures estimates r at the 0.99 clamp).
    ``repeats`` (either run has ``--repeat`` >= 2): r is taken from within-version variation
    only, each sample's trial outcomes minus that sample's mean over its trials, one residual
    series per trial in time order within (case, target) (:func:`trial_residuals`). A change
    between the versions moves the sample means, not the residuals, so it cannot inflate its own
    noise; an adapter whose trials always agree has no noise (r = 0) and a consistent stretch of
    pass -> fail is tested at its face value. This assumes the run-to-run noise has the same
    correlation in time as the trial-to-trial noise (trials of a run are independent repeats).
    The arms' comparisons (:mod:`.sidebyside`, two-sided) and the robustness gate learn theirs by
    the same rule, control and arm in place of baseline and candidate; :func:`count_scale` is the
    one scaling every one of these tests applies.

Families
    :func:`regression_family` tests each target and all targets together and applies Holm's
    step-down adjustment across that family, so the chance of any false alarm stays at alpha.
    With one target the target and the whole run are the same hypothesis: it is tested once
    (``family_tests`` 1, ``p_value`` equal to ``p_value_raw``), not adjusted against itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .binomial import upper_mid_p
from .effective import corrected_autocorrelation, effective_factor
from .intervals import check_confidence, finite, wilson_bounds

#: ``method`` of the regression test and of the arms' comparisons.
ONE_SIDED = "one-sided McNemar mid-p, counts scaled by (1 - r) / (1 + r)"
TWO_SIDED = "two-sided McNemar mid-p, counts scaled by (1 - r) / (1 + r)"
ONE_SIDED_REPEATS = "one-sided McNemar mid-p, counts scaled to the null variance the repeats estimate"
TWO_SIDED_REPEATS = "two-sided McNemar mid-p, counts scaled to the null variance the repeats estimate"
#: ``noise_source``: where r came from.
NOISE_FROM_DIFFERENCES = "differences"
NOISE_FROM_REPEATS = "repeats"

#: ``(baseline, candidate)`` outcomes of one sample.
Pair = tuple[float, float]
#: One series per (case, target), pairs in time order.
PairedSeries = Sequence[Sequence[Pair]]


@dataclass(frozen=True, slots=True)
class PairedTest:
    """One paired regression test (JSON ``significance``)."""

    #: Candidate pass rate minus baseline pass rate.
    delta_pass_rate: float
    low: float
    high: float
    #: Confidence level of [low, high], a fraction.
    level: float
    #: Holm-adjusted within its family (the raw p-value when tested alone).
    p_value: float
    p_value_raw: float
    #: ``p_value <= alpha``.
    significant: bool
    alpha: float
    #: n_eff of the differences.
    effective_pairs: float
    pairs: int
    #: Sum of pass -> fail (McNemar's b) and of fail -> pass (c), before scaling.
    drops: float
    gains: float
    #: Clamped pooled lag-1 autocorrelation of the differences.
    autocorrelation: float
    baseline_pass_rate: float
    candidate_pass_rate: float
    #: :data:`NOISE_FROM_DIFFERENCES` or :data:`NOISE_FROM_REPEATS`.
    noise_source: str = NOISE_FROM_DIFFERENCES
    #: How many tests the Holm family held (1: tested alone).
    family_tests: int = 1
    method: str = ONE_SIDED
    #: The factor both discordant counts were scaled by before the mid-p (:func:`count_scale`), so a
    #: two-sided test weighs the other tail exactly as this one.
    scale: float = 1.0

    @property
    def flip_rate(self) -> float:
        """Share of pairs whose outcome changed: ``(b + c) / n``."""
        return (self.drops + self.gains) / self.pairs

    def to_json(self) -> dict[str, object]:
        """``{"delta_pass_rate", "ci": {"low", "high"}, "p_value", "p_value_raw", "significant",
        "effective_pairs", "autocorrelation", "noise_source", "family_tests", "method"}`` with
        finite floats."""
        return {"delta_pass_rate": finite(self.delta_pass_rate),
                "ci": {"low": finite(self.low), "high": finite(self.high)},
                "p_value": finite(self.p_value), "p_value_raw": finite(self.p_value_raw),
                "significant": self.significant, "effective_pairs": finite(self.effective_pairs),
                "autocorrelation": finite(self.autocorrelation), "noise_source": self.noise_source,
                "family_tests": self.family_tests, "method": self.method}


def mcnemar_drop_p_value(drops: float, gains: float, autocorrelation: float = 0.0,
                         squares: float | None = None) -> float:
    """One-sided mid-p that the pass rate dropped, counts scaled by ``(1 - r) / (1 + r)``.

    With r <= 0 this is the exact one-sided McNemar mid-p ``P(X > b) + P(X = b) / 2`` for
    ``X ~ Binomial(b + c, 1/2)``; with no discordant pairs it is 0.5. ``squares``, the sum of
    the squared differences, matters for pass fractions (``--repeat``): the null variance of the
    summed differences is that sum, not ``b + c``, so the counts are scaled by ``(b + c) /
    squares`` as well (1 for 0/1 outcomes, where ``d * d == |d|``).
    """
    if drops < 0.0 or gains < 0.0:
        raise ValueError(f"discordant counts must be >= 0, got {drops!r}, {gains!r}")
    factor = count_scale(drops, gains, drops + gains if squares is None else squares, autocorrelation)
    return scaled_mid_p(drops * factor, gains * factor)


def count_scale(drops: float, gains: float, squares: float, autocorrelation: float,
                noise: TrialNoise | None = None) -> float:
    """The factor every paired test (one- or two-sided) scales both discordant counts by.

    ``squares`` is the sum of the squared differences. From the differences (``noise`` None):
    ``(1 - r) / (1 + r)`` times ``(b + c) / squares``. From the repeats: ``(b + c) / max(V (1 + r)
    / (1 - r), squares)`` with V the repeats' null variance, never beyond the weight of
    independent differences. Without any difference the counts are zero and the factor is moot.
    """
    factor = effective_factor(autocorrelation)
    if squares <= 0.0:
        return factor
    if noise is None:
        return factor * (drops + gains) / squares
    return (drops + gains) / max(noise.variance / factor, squares)


def scaled_mid_p(drops: float, gains: float) -> float:
    """One-sided mid-p of already scaled counts: ``X ~ Binomial(b + c, 1/2)``, ``P(X >= b)`` mid-p."""
    return min(1.0, max(0.0, upper_mid_p(drops, drops + gains, 0.5)))


def _correlation(pairs: Sequence[Pair]) -> float:
    n = len(pairs)
    mean_x = sum(x for x, _ in pairs) / n
    mean_y = sum(y for _, y in pairs) / n
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in pairs)
    sxx = sum((x - mean_x) ** 2 for x, _ in pairs)
    syy = sum((y - mean_y) ** 2 for _, y in pairs)
    if sxx <= 0.0 or syy <= 0.0:
        return 0.0
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def paired_difference_interval(pairs: Sequence[Pair], effective_pairs: float,
                               confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval for ``mean(candidate) - mean(baseline)`` at n_eff pairs."""
    if not pairs:
        raise ValueError("paired_difference_interval needs at least one pair")
    n = len(pairs)
    p1 = min(1.0, max(0.0, sum(b for b, _ in pairs) / n))
    p2 = min(1.0, max(0.0, sum(c for _, c in pairs) / n))
    l1, u1 = wilson_bounds(p1, effective_pairs, confidence)
    l2, u2 = wilson_bounds(p2, effective_pairs, confidence)
    phi = _correlation(pairs)
    delta = p2 - p1
    below = (p2 - l2) ** 2 - 2.0 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2
    above = (u2 - p2) ** 2 - 2.0 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2
    low = delta - math.sqrt(max(0.0, below))
    high = delta + math.sqrt(max(0.0, above))
    return max(-1.0, min(delta, low)), min(1.0, max(delta, high))


def trial_residuals(samples: Sequence[Sequence[float]]) -> list[list[float]]:
    """Within-version noise of one (case, target): one residual series per trial, in time order.

    ``samples`` are the samples in time order, each its trial outcomes in trial order. A trial's
    residual is its outcome minus the sample's mean over its trials; samples with fewer than two
    trials carry no within-version information and are left out.
    """
    series: list[list[float]] = []
    for trials in samples:
        if len(trials) < 2:
            continue
        mean = sum(trials) / len(trials)
        for number, value in enumerate(trials):
            while len(series) <= number:
                series.append([])
            series[number].append(value - mean)
    return series


@dataclass(frozen=True, slots=True)
class TrialNoise:
    """What the repeats say about the noise of a set of paired series (:func:`trial_noise`)."""

    #: Within-version residual series (:func:`trial_residuals` of both versions): r comes from them.
    residuals: tuple[tuple[float, ...], ...]
    #: Null variance of the summed differences before the correlation's inflation: the sum over
    #: pairs of ``s2 (1 / k_baseline + 1 / k_candidate)``.
    variance: float

    def __add__(self, other: TrialNoise) -> TrialNoise:
        return TrialNoise(self.residuals + other.residuals, self.variance + other.variance)


#: ``(baseline trial outcomes, candidate trial outcomes)`` of one sample.
TrialPair = tuple[Sequence[float], Sequence[float]]


def _squares(trials: Sequence[float]) -> tuple[float, int]:
    if len(trials) < 2:
        return 0.0, 0
    mean = sum(trials) / len(trials)
    return sum((v - mean) ** 2 for v in trials), len(trials) - 1


def trial_noise(series: Sequence[Sequence[TrialPair]]) -> TrialNoise:
    """The noise of paired series learnt from the repeats, never from the differences.

    ``series``: one per (case, target) in time order, each sample's trial outcomes on both sides.
    A sample's per-trial variance ``s2`` pools both versions' squared residuals about their own
    means (under "no change" the versions are the same model), over their degrees of freedom;
    a sample without repeats on either side takes the variance pooled over all samples.
    """
    residuals: list[tuple[float, ...]] = []
    for samples in series:
        for side in (0, 1):
            residuals += [tuple(r) for r in trial_residuals([pair[side] for pair in samples])]
    per_sample: list[tuple[float, int, int, int]] = []
    total_squares, total_df = 0.0, 0
    for samples in series:
        for base, cand in samples:
            sb, db = _squares(base)
            sc, dc = _squares(cand)
            per_sample.append((sb + sc, db + dc, len(base), len(cand)))
            total_squares += sb + sc
            total_df += db + dc
    pooled = total_squares / total_df if total_df else 0.0
    variance = sum((squares / df if df else pooled) * (1.0 / kb + 1.0 / kc)
                   for squares, df, kb, kc in per_sample if kb and kc)
    return TrialNoise(tuple(residuals), variance)


def paired_regression_test(series: PairedSeries, alpha: float = 0.05, confidence: float = 0.95,
                           noise: TrialNoise | None = None) -> PairedTest | None:
    """Test one set of paired series for a pass-rate drop; None when there are no pairs.

    ``noise`` (from the repeats, :func:`trial_noise`): r is the residuals' autocorrelation
    (``noise_source`` ``repeats``) instead of the differences', and the counts are scaled to the
    null variance it estimates, ``V (1 + r) / (1 - r)``: by ``(b + c) / (V (1 + r) / (1 - r))``,
    but never beyond ``(b + c) / sum(d * d)``, the weight the differences would have if they were
    independent (so an adapter without noise is tested by plain McNemar on its counts).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 exclusive, got {alpha!r}")
    check_confidence(confidence)
    pairs = [pair for values in series for pair in values]
    if not pairs:
        return None
    for base, cand in pairs:
        if not (0.0 <= base <= 1.0 and 0.0 <= cand <= 1.0):
            raise ValueError(f"outcomes must be in [0, 1], got {(base, cand)!r}")
    if noise is not None:
        r = corrected_autocorrelation(noise.residuals)
        source = NOISE_FROM_REPEATS
    else:
        r = corrected_autocorrelation([[cand - base for base, cand in values] for values in series])
        source = NOISE_FROM_DIFFERENCES
    drops = sum(max(0.0, base - cand) for base, cand in pairs)
    gains = sum(max(0.0, cand - base) for base, cand in pairs)
    n = len(pairs)
    effective_pairs = n * effective_factor(r)
    squares = sum((cand - base) ** 2 for base, cand in pairs)
    scale = count_scale(drops, gains, squares, r, noise)
    p_value = scaled_mid_p(drops * scale, gains * scale)
    low, high = paired_difference_interval(pairs, effective_pairs, confidence)
    baseline_rate = sum(base for base, _ in pairs) / n
    candidate_rate = sum(cand for _, cand in pairs) / n
    return PairedTest(delta_pass_rate=(gains - drops) / n, low=low, high=high, level=confidence,
                      p_value=p_value, p_value_raw=p_value, significant=p_value <= alpha,
                      alpha=alpha, effective_pairs=effective_pairs, pairs=n, drops=drops,
                      gains=gains, autocorrelation=r, baseline_pass_rate=baseline_rate,
                      candidate_pass_rate=candidate_rate, noise_source=source,
                      method=ONE_SIDED if noise is None else ONE_SIDED_REPEATS, scale=scale)


def p_text(p: float) -> str:
    """``p = 0.0156`` for reports; the ends as bounds, so a one-sided count never shows ``p = 1``."""
    if p > 0.999:
        return "p > 0.999"
    if p < 0.0001:
        return "p < 0.0001"
    return f"p = {p:.3g}"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order: monotone in rank, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def holm_adjust(tests: Sequence[PairedTest]) -> list[PairedTest]:
    """The tests with ``p_value`` Holm-adjusted across them and ``significant`` recomputed."""
    adjusted = holm([test.p_value_raw for test in tests])
    return [replace(test, p_value=p, significant=p <= test.alpha, family_tests=len(tests))
            for test, p in zip(tests, adjusted)]


@dataclass(frozen=True, slots=True)
class RegressionFamily:
    """The overall test and one test per target, Holm-adjusted together."""

    overall: PairedTest | None
    per_target: Mapping[str, PairedTest]

    @property
    def any_significant(self) -> bool:
        tests = [*self.per_target.values(), *([self.overall] if self.overall else [])]
        return any(test.significant for test in tests)


def regression_family(by_target: Mapping[str, PairedSeries], alpha: float = 0.05,
                      confidence: float = 0.95,
                      noise: Mapping[str, TrialNoise] | None = None) -> RegressionFamily:
    """Per-target tests and the overall test (all targets' series together), Holm across them.

    Targets without pairs get no test; the overall test is None when no target has pairs. With
    one target the overall test is that target's, tested once. ``noise``: each target's
    within-version residual series (see :func:`paired_regression_test`), None without repeats.
    """
    per_target: dict[str, PairedTest] = {}
    for target, series in by_target.items():
        test = paired_regression_test(series, alpha, confidence,
                                      None if noise is None else noise.get(target, TrialNoise((), 0.0)))
        if test is not None:
            per_target[target] = test
    everything = None if noise is None else sum(noise.values(), TrialNoise((), 0.0))
    overall = paired_regression_test([values for series in by_target.values() for values in series],
                                     alpha, confidence, everything)
    if overall is None:
        return RegressionFamily(overall=None, per_target={})
    if len(per_target) == 1:
        return RegressionFamily(overall=overall, per_target={target: overall for target in per_target})
    adjusted = holm_adjust([overall, *per_target.values()])
    return RegressionFamily(overall=adjusted[0], per_target=dict(zip(per_target, adjusted[1:])))
