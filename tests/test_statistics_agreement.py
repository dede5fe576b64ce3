"""Cohen's kappa against scikit-learn, its standard error against statsmodels, and coverage by simulation."""

from __future__ import annotations

import random

import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa, to_table

from glasskit_eval.statistics.agreement import cohen_kappa, within_tolerance

KNOWN = [
    (["cat", "cat", "dog", "dog", "bird", "cat", "dog", "bird", "bird", "cat"],
     ["cat", "dog", "dog", "dog", "bird", "cat", "cat", "bird", "dog", "cat"]),
    ([True] * 40 + [False] * 10 + [True] * 5 + [False] * 45, [True] * 40 + [False] * 10 + [False] * 5 + [True] * 45),
    ([1, 2, 3, 1, 2, 3, 1, 2, 3, 3, 3, 2], [1, 2, 3, 2, 2, 3, 1, 1, 3, 3, 2, 2]),
    ([True, False, True, True], [True, False, True, True]),  # perfect agreement
    (["a", "a", "b", "b"], ["b", "b", "a", "a"]),  # perfect disagreement
    (["x", "y", "z"], ["x", "y", "w"]),  # a category only the second labeller uses
]


def random_sets(seed: int, n: int, categories: int) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    a = [rng.randrange(categories) for _ in range(n)]
    b = [x if rng.random() < 0.6 else rng.randrange(categories) for x in a]
    return a, b


CASES = KNOWN + [random_sets(seed, n, k) for seed, n, k in ((1, 50, 2), (2, 200, 3), (3, 37, 5), (4, 1000, 4))]


@pytest.mark.parametrize("a, b", CASES)
def test_kappa_equals_scikit_learn(a: list[object], b: list[object]) -> None:
    found = cohen_kappa(list(zip(a, b, strict=True)))
    assert found is not None and found.kappa is not None
    assert found.kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-9)
    assert found.observed == pytest.approx(sum(x == y for x, y in zip(a, b, strict=True)) / len(a), abs=1e-12)


@pytest.mark.parametrize("a, b", [c for c in CASES if len(set(c[0]) | set(c[1])) > 1])
def test_standard_error_equals_statsmodels_fleiss_cohen_everitt(a: list[object], b: list[object]) -> None:
    labels = sorted(set(a) | set(b), key=repr)
    index = {v: i for i, v in enumerate(labels)}
    table = to_table([[index[x], index[y]] for x, y in zip(a, b, strict=True)], bins=len(labels))[0]
    oracle = cohens_kappa(table)
    found = cohen_kappa(list(zip(a, b, strict=True)))
    assert found is not None and found.se is not None
    assert found.se == pytest.approx(oracle.std_kappa, abs=1e-9)
    assert found.low == pytest.approx(max(-1.0, oracle.kappa_low), abs=1e-9)
    assert found.high == pytest.approx(min(1.0, oracle.kappa_upp), abs=1e-9)


def test_undefined_kappa_and_no_items() -> None:
    same = cohen_kappa([("a", "a")] * 5)
    assert same is not None and same.kappa is None and same.observed == 1.0 and same.to_json()["kappa_ci"] is None
    assert cohen_kappa([]) is None


def test_within_tolerance() -> None:
    assert within_tolerance([(1.0, 1.4), (2.0, 3.0), (5.0, 5.0)], 0.5) == pytest.approx(2 / 3)
    assert within_tolerance([], 1.0) is None


def test_interval_covers_the_true_kappa_by_simulation() -> None:
    # Two labellers of 300 binary items: the first right with 0.9, the second with 0.85, independently.
    # True kappa from the joint distribution; the 95% interval should cover it about 95% of the time.
    prevalence, r1, r2, n = 0.4, 0.9, 0.85, 300
    p11 = prevalence * r1 * r2 + (1 - prevalence) * (1 - r1) * (1 - r2)
    p00 = prevalence * (1 - r1) * (1 - r2) + (1 - prevalence) * r1 * r2
    pa = prevalence * r1 + (1 - prevalence) * (1 - r1)
    pb = prevalence * r2 + (1 - prevalence) * (1 - r2)
    chance = pa * pb + (1 - pa) * (1 - pb)
    truth = (p11 + p00 - chance) / (1 - chance)
    rng = random.Random(11)
    covered = 0
    runs = 400
    for _ in range(runs):
        pairs = []
        for _item in range(n):
            true = rng.random() < prevalence
            pairs.append((true if rng.random() < r1 else not true, true if rng.random() < r2 else not true))
        found = cohen_kappa(pairs)
        assert found is not None and found.low is not None and found.high is not None
        covered += found.low <= truth <= found.high
    assert 0.92 <= covered / runs <= 0.98, covered / runs
