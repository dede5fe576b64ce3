"""The betting confidence sequence for sampling without replacement (glasskit_eval.statistics.anytime):
the published formula recomputed from scratch in the test, exact bounds a brute force confirms, and
simulations with fixed seeds of coverage over time and of wrong decisions when failures come in runs."""

from __future__ import annotations

import math
import random

import pytest
from earlystopkit import burst_outcomes

from glasskit_eval.statistics import anytime
from glasskit_eval.statistics.anytime import gate_alpha, observe, start


def blocks_of(outcomes: list[int], size: int) -> list[list[int]]:
    return [outcomes[i:i + size] for i in range(0, len(outcomes), size)]


def reference_bounds(units: list[list[int]], planned: int, alpha: float) -> list[tuple[int, int]]:
    """The published construction computed directly: for every candidate total, both capital
    products from the first unit on, the hedged average against 1/alpha, the running
    intersection and the totals the data make impossible. No state carried between steps."""
    scale = max(len(u) for u in units)
    count = len(units)
    out: list[tuple[int, int]] = []
    excluded: set[int] = set()
    for t in range(1, count + 1):
        xs = [sum(u) / scale for u in units[:t]]
        seen = sum(len(u) for u in units[:t])
        passes = sum(sum(u) for u in units[:t])
        for total in range(planned + 1):
            if total in excluded:
                continue
            if not passes <= total <= passes + planned - seen:
                excluded.add(total)
                continue
            k_plus = k_minus = 1.0
            for i in range(1, t + 1):
                before = sum(sum(u) for u in units[:i - 1])
                mu = (total - before) / (scale * (count - i + 1))
                mean = (0.5 + sum(xs[:i - 1])) / i
                var = (0.25 + sum((xs[j] - (0.5 + sum(xs[:j])) / (j + 1)) ** 2 for j in range(i - 1))) / i
                d = mean - mu
                up = min(d / (var + d * d), anytime.TRUNCATION / mu) if d > 0 and mu > 0 else 0.0
                down = min(-d / (var + d * d), anytime.TRUNCATION / (1 - mu)) if d < 0 and mu < 1 else 0.0
                k_plus *= 1 + up * (xs[i - 1] - mu)
                k_minus *= 1 - down * (xs[i - 1] - mu)
            if (k_plus + k_minus) / 2 >= 1 / alpha:
                excluded.add(total)
        alive = [p for p in range(planned + 1) if p not in excluded]
        out.append((alive[0], alive[-1]))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bounds_equal_the_published_formula_computed_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    outcomes = burst_outcomes(rng, 60, [0.7, 0.9, 0.95][seed - 1], run=4)
    units = blocks_of(outcomes, 4)
    units[-1] = units[-1][:2]  # a short last block: scale stays 4
    planned = sum(len(u) for u in units)
    rng.shuffle(units)
    state = start(planned, len(units), 4, 0.1)
    for unit, (low, high) in zip(units, reference_bounds(units, planned, 0.1), strict=True):
        state = observe(state, sum(unit), len(unit))
        assert (state.low_total, state.high_total) == (low, high)


def test_every_unit_seen_gives_the_exact_rate() -> None:
    units = blocks_of([1, 0, 1, 1, 1, 0, 1, 1, 1, 1], 3)
    state = start(10, len(units), 3, 0.05)
    assert (state.low, state.high) == (0.0, 1.0) and state.verdict(0.5) is None
    for unit in units:
        state = observe(state, sum(unit), len(unit))
    assert state.low_total == state.high_total == 8
    assert state.verdict(0.8) == "pass" and state.verdict(0.81) == "fail"


def test_impossible_totals_are_excluded_without_betting() -> None:
    # 6 of 10 samples seen, all failed: at most 4 can pass.
    state = start(10, 5, 2, 1e-9)
    for _ in range(3):
        state = observe(state, 0, 2)
    assert state.high_total <= 4 and state.verdict(0.5) == "fail"


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        start(11, 5, 2, 0.05)
    with pytest.raises(ValueError):
        start(10, 5, 2, 0.0)
    state = start(4, 2, 2, 0.05)
    with pytest.raises(ValueError):
        observe(state, 3, 2)
    with pytest.raises(ValueError):
        observe(state, 1, 3)
    assert gate_alpha(0.05, 4) == pytest.approx(0.0125)
    with pytest.raises(ValueError):
        gate_alpha(1.0, 1)


def test_coverage_over_time_on_correlated_populations() -> None:
    """The true rate stays inside the bound at every step in at least 1 - alpha of the runs,
    though failures come in runs and the units are blocks of neighbours."""
    misses = 0
    runs = 120
    for seed in range(runs):
        rng = random.Random(seed)
        outcomes = burst_outcomes(rng, 300, rng.choice([0.6, 0.8, 0.9, 0.97]), run=20)
        units = blocks_of(outcomes, 5)
        rng.shuffle(units)
        total = sum(outcomes)
        state = start(300, len(units), 5, 0.1)
        for unit in units:
            state = observe(state, sum(unit), len(unit))
            if not state.low_total <= total <= state.high_total:
                misses += 1
                break
    assert misses <= 0.1 * runs


@pytest.mark.parametrize(("rate", "block"), [(0.895, 5), (0.905, 5), (0.895, 50), (0.905, 50)])
def test_few_wrong_decisions_near_the_gate_with_failures_in_runs(rate: float, block: int) -> None:
    """Near a 0.90 gate, under random block order: at most one wrong early decision in 8 runs
    (benchmarks/bench_early_stop.py runs 16 seeds on 2,400 samples)."""
    wrong = 0
    for seed in range(8):
        rng = random.Random(1000 + seed)
        outcomes = burst_outcomes(rng, 1200, rate, run=20)
        truth = "pass" if sum(outcomes) >= 0.9 * 1200 - 1e-9 else "fail"
        units = blocks_of(outcomes, block)
        rng.shuffle(units)
        state = start(1200, len(units), block, 0.05)
        for unit in units:
            state = observe(state, sum(unit), len(unit))
            decided = state.verdict(0.9)
            if decided is not None:
                wrong += decided != truth
                break
    assert wrong <= 1


def test_decides_early_far_from_the_gate() -> None:
    """0.97 and 0.80 against 0.90 in 0.5 s blocks of 5: well under a quarter of the samples."""
    for rate, expected in ((0.97, "pass"), (0.80, "fail")):
        used = []
        for seed in range(5):
            rng = random.Random(seed)
            units = blocks_of([1 if rng.random() < rate else 0 for _ in range(2400)], 5)
            rng.shuffle(units)
            state = start(2400, len(units), 5, 0.05)
            for unit in units:
                state = observe(state, sum(unit), len(unit))
                if state.verdict(0.9) is not None:
                    break
            assert state.verdict(0.9) == expected
            used.append(state.seen_samples)
        assert sorted(used)[2] <= 0.25 * 2400
    assert not math.isnan(state.low)


@pytest.mark.parametrize("passes", [0, 2, 4, 5, 7])
def test_exact_miss_rate_over_every_order_of_a_small_population(passes: int) -> None:
    """Every one of the 7! orders of a 7-sample population, each equally likely: the share in which
    the true total ever leaves the bound is at most alpha (exact, no sampling)."""
    import itertools

    population = [1] * passes + [0] * (7 - passes)
    misses = orders = 0
    for order in set(itertools.permutations(population)):
        orders += 1
        state = start(7, 7, 1, 0.1)
        for value in order:
            state = observe(state, value, 1)
            if not state.low_total <= passes <= state.high_total:
                misses += 1
                break
    assert misses <= 0.1 * orders


def test_a_fully_known_population_is_decided_exactly() -> None:
    """Every sample read from the cache: nothing left to draw, and the bound is the exact rate."""
    state = start(0, 0, 0, 0.05, known=100, known_passes=93)
    assert (state.low, state.high, state.population) == (0.93, 0.93, 100)
    assert (state.verdict(0.93), state.verdict(0.9), state.verdict(0.931)) == ("pass", "pass", "fail")
    with pytest.raises(ValueError):
        start(10, 2, 5, 0.05, known=3, known_passes=4)


def test_known_samples_shift_the_bound_by_their_passes_and_nothing_else() -> None:
    """The independent check: the remaining samples' sequence run on its own (no known samples) gives the
    same candidate totals, and the combined bound is (known passes + those totals) / the whole."""
    rng = random.Random(11)
    outcomes = burst_outcomes(rng, 300, 0.9, run=10)
    units = blocks_of(outcomes, 5)
    known_units, rest = units[:24], units[24:]
    rng.shuffle(rest)
    known_passes = sum(map(sum, known_units))
    planned = sum(map(len, rest))
    combined = start(planned, len(rest), 5, 0.05, known=120, known_passes=known_passes)
    alone = start(planned, len(rest), 5, 0.05)
    for unit in rest:
        combined, alone = observe(combined, sum(unit), len(unit)), observe(alone, sum(unit), len(unit))
        assert (combined.low_total, combined.high_total) == (alone.low_total, alone.high_total)
        assert combined.low == pytest.approx((known_passes + alone.low_total) / 300)
        assert combined.high == pytest.approx((known_passes + alone.high_total) / 300)
        minimum = (known_passes + (alone.low_total + alone.high_total) / 2) / 300
        low, high = (known_passes + alone.low_total) / 300, (known_passes + alone.high_total) / 300
        assert combined.verdict(minimum) == ("pass" if low >= minimum - 1e-9 else "fail" if high < minimum - 1e-9
                                             else None)
    assert combined.low == combined.high == sum(outcomes) / 300


def test_partly_known_populations_keep_the_truth_inside_the_bound() -> None:
    """Known blocks aside, the rest drawn in random order: the whole population's rate stays inside the
    bound at every step in at least 1 - alpha of the runs (and the bound holds the known part exactly)."""
    misses = 0
    runs = 120
    for seed in range(runs):
        rng = random.Random(seed)
        outcomes = burst_outcomes(rng, 300, rng.choice([0.6, 0.8, 0.9, 0.97]), run=20)
        units = blocks_of(outcomes, 5)
        known = set(rng.sample(range(len(units)), rng.randrange(1, len(units))))
        rest = [u for i, u in enumerate(units) if i not in known]
        rng.shuffle(rest)
        truth = sum(outcomes) / 300
        state = start(sum(map(len, rest)), len(rest), 5, 0.1, known=5 * len(known),
                      known_passes=sum(sum(units[i]) for i in known))
        for unit in rest:
            state = observe(state, sum(unit), len(unit))
            if not state.low - 1e-12 <= truth <= state.high + 1e-12:
                misses += 1
                break
    assert misses <= 0.1 * runs
