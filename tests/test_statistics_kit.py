"""Simulated outcome series the statistics tests share (deterministic given a random.Random), and
checks that the simulation is the model the tests say it is."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest


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
