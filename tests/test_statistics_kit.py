"""Simulated outcome series the statistics tests share (deterministic given a random.Random), and
checks that the simulation is the model the tests say it is."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from glasskit_eval.statistics.paired import TrialNoise, trial_noise


def flaky_run(rng: random.Random, n: int, pass_rate: float, repeat: float = 0.8) -> list[float]:
    """A Markov chain of outcomes: first Bernoulli(p); then the previous outcome with probability
    ``repeat``, else a fresh Bernoulli(p). Stationary mean p, lag-k correlation ``repeat ** k``."""
    outcomes: list[float] = []
    current = rng.random() < pass_rate
    for index in range(n):
        if index == 0 or rng.random() >= repeat:
            current = rng.random() < pass_rate
        outcomes.append(1.0 if current else 0.0)
    return outcomes


def independent_run(rng: random.Random, n: int, pass_rate: float) -> list[float]:
    return [1.0 if rng.random() < pass_rate else 0.0 for _ in range(n)]


def test_flaky_run_has_the_stated_mean_and_persistence() -> None:
    rng = random.Random(1)
    outcomes = [value for _ in range(10) for value in flaky_run(rng, 2000, 0.9)]
    assert sum(outcomes) / len(outcomes) == pytest.approx(0.9, abs=0.02)
    run = flaky_run(rng, 20000, 0.9)
    same = sum(a == b for a, b in pairwise(run)) / (len(run) - 1)
    # Copied with probability 0.8, else a fresh draw that agrees with probability 0.9^2 + 0.1^2.
    assert same == pytest.approx(0.8 + 0.2 * 0.82, abs=0.01)


#: The regression design: cases x samples per case, trials a side.
CASES, SAMPLES, TRIALS, STRETCH = 4, 100, 3, 15


def repeated_side(rng: random.Random, stretch: bool = False, trials: int = TRIALS,
                  stretch_cases: int = CASES) -> list[list[list[float]]]:
    """One version's outcomes: per case, per sample (time order), its trials' outcomes (trial order).

    Each trial is its own flaky Markov chain (90% pass, repeat probability 0.8), independent of the
    other trials; with ``stretch`` one contiguous run of :data:`STRETCH` samples per case, at a
    random place, fails in every trial (in the first ``stretch_cases`` cases only, if fewer).
    """
    cases = []
    for number in range(CASES):
        chains = [flaky_run(rng, SAMPLES, 0.9) for _ in range(trials)]
        start = rng.randrange(SAMPLES - STRETCH + 1) if stretch and number < stretch_cases else SAMPLES
        cases.append([[0.0 if start <= i < start + STRETCH else chain[i] for chain in chains]
                      for i in range(SAMPLES)])
    return cases


def repeated_pair(rng: random.Random, stretch: bool = False, trials: int = TRIALS,
                  stretch_cases: int = CASES) -> tuple[list[list[tuple[float, float]]], TrialNoise]:
    """(paired pass-fraction series, the noise its repeats show) of a baseline and a candidate drawn
    by :func:`repeated_side`; the candidate carries the stretch if asked."""
    base, cand = repeated_side(rng, trials=trials), repeated_side(rng, stretch, trials, stretch_cases)
    series = [[(sum(b) / len(b), sum(c) / len(c)) for b, c in zip(bs, cs)] for bs, cs in zip(base, cand)]
    return series, trial_noise([list(zip(bs, cs)) for bs, cs in zip(base, cand)])
