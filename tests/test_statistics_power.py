"""Minimum detectable drop (glasskit_eval.statistics.power)."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import pytest

from glasskit_eval.statistics.paired import paired_regression_test
from glasskit_eval.statistics.power import minimum_detectable_drop


def test_the_drop_solves_the_power_equation() -> None:
    z_a, z_b = NormalDist().inv_cdf(0.95), NormalDist().inv_cdf(0.8)
    for n_eff, p, f in ((400, 0.9, 0.18), (44.0, 0.9, 0.18), (1000, 0.7, None), (250, 0.5, 0.3)):
        drop = minimum_detectable_drop(n_eff, p, f)
        assert drop is not None
        flips = f if f else 2 * p * (1 - p)
        assert math.sqrt(n_eff) * drop == pytest.approx(z_a * math.sqrt(flips) + z_b * math.sqrt(flips - drop**2), abs=1e-9)


def test_more_pairs_see_smaller_drops_and_edges() -> None:
    drops = [minimum_detectable_drop(n, 0.9, 0.18) for n in (50, 100, 400, 1600)]
    assert all(d is not None for d in drops)
    assert drops == sorted(drops, reverse=True)  # type: ignore[type-var]
    assert minimum_detectable_drop(400, 0.9) == pytest.approx(minimum_detectable_drop(400, 0.9, 0.18))
    assert minimum_detectable_drop(400, 0.9, 0.0) == pytest.approx(minimum_detectable_drop(400, 0.9, 0.18))
    assert minimum_detectable_drop(2, 0.9, 0.18) is None
    assert minimum_detectable_drop(0, 0.9, 0.18) is None
    # Runs that always pass flip nothing between them, but a drop flips at least what it drops:
    # an eval that always passes still sees a large enough drop.
    always = minimum_detectable_drop(100, 1.0)
    assert always is not None and 0.02 < always < 0.1
    assert minimum_detectable_drop(100, 0.0, 0.3) is None  # nothing to drop
    strict, usual = minimum_detectable_drop(400, 0.9, 0.18, alpha=0.01), minimum_detectable_drop(400, 0.9, 0.18)
    assert strict is not None and usual is not None and strict > usual
    with pytest.raises(ValueError):
        minimum_detectable_drop(100, 0.9, power=0.4)


def test_a_drop_of_that_size_is_found_about_80_percent_of_the_time() -> None:
    # Independent pairs: each pair drops with probability (f + d) / 2 and gains with (f - d) / 2.
    n, p, flips = 400, 0.9, 0.2
    drop = minimum_detectable_drop(n, p, flips)
    assert drop is not None
    rng = random.Random(6)
    found = 0
    for _ in range(400):
        pairs = []
        for _ in range(n):
            u = rng.random()
            pairs.append((1.0, 0.0) if u < (flips + drop) / 2 else (0.0, 1.0) if u < flips else (1.0, 1.0))
        test = paired_regression_test([pairs[i::4] for i in range(4)])
        assert test is not None
        found += test.significant
    assert 0.7 <= found / 400 <= 0.9


def test_an_always_passing_eval_sees_its_detectable_drop_about_80_percent_of_the_time() -> None:
    from glasskit_eval.statistics.paired import mcnemar_drop_p_value

    n = 200
    drop = minimum_detectable_drop(n, 1.0)
    assert drop is not None
    rng = random.Random(11)
    found = sum(mcnemar_drop_p_value(sum(rng.random() < drop for _ in range(n)), 0.0) <= 0.05
                for _ in range(2000))
    assert 0.7 <= found / 2000 <= 0.95


def test_repeats_to_detect_is_the_normal_approximation_for_a_consistent_drop() -> None:
    from glasskit_eval.statistics.power import MOST_REPEATS, repeats_to_detect

    # A deterministic stretch: no noise elsewhere, so the first repeat count already sees it.
    assert repeats_to_detect(10 / 30, 30, 0.0, 0.0) == 2
    # 16 of 400 pairs drop; 18% of the others flip, their r is 0.8 (inflation 9):
    # N = (1.645 + 0.842)^2 * 0.18 * 9 / (400 * 0.04^2) = 15.6 -> 16.
    z = NormalDist().inv_cdf(0.95) + NormalDist().inv_cdf(0.8)
    expected = math.ceil(z * z * 0.18 * 9 / (400 * 0.04 ** 2))
    assert expected == 16 and repeats_to_detect(0.04, 400, 0.18, 0.8) == expected
    # At that N the drop's z reaches z(0.95) + z(0.8); one fewer falls short.
    for repeats, ok in ((15, False), (16, True)):
        assert (400 * 0.04 >= z * math.sqrt(400 * 0.18 / repeats * 9)) is ok
    assert repeats_to_detect(0.01, 10, 0.5, 0.5) is None and MOST_REPEATS == 50
    with pytest.raises(ValueError):
        repeats_to_detect(0.0, 10, 0.1, 0.0)
