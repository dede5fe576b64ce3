"""Suspect labels from votes: the rule on hand-made cases, and by simulation with fixed seeds."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest

from glasskit_eval.compare.modes import CompareConfig
from glasskit_eval.labels.consensus import NEEDS_VOTES, check_labels, compare_from
from glasskit_eval.results import ErrorKind, SampleResult, Status


def vote(index: int, observed: Any, expected: Any = True, *, arm: str | None = None, mode: str | None = None,
         status: Status | None = None, case: str = "walk", target: str = "door") -> SampleResult:
    if status is None:
        status = Status.PASSED if observed == expected else Status.FAILED
    return SampleResult(case=case, target=target, target_label=None, sample_index=index, timestamp_s=index * 0.5,
                        source="at", status=status, expected=expected, field="open", compare_mode=mode,
                        reason="", observed={"open": observed}, observed_value=observed, arm=arm)


def test_votes_that_agree_against_the_label_make_a_suspect() -> None:
    check = check_labels([vote(0, False), vote(0, False), vote(0, False), vote(1, True), vote(1, True)])
    assert [s.key for s in check.suspects] == [("walk", "door", 0)]
    suspect = check.suspects[0]
    assert (suspect.expected, suspect.consensus, suspect.votes_against, suspect.votes) == (True, False, 3, 3)
    assert suspect.to_json() | {"values": None} == {
        "case": "walk", "target": "door", "sample_index": 0, "at": 0.0, "expected": True, "consensus": False,
        "votes_against": 3, "votes_for": 0, "votes": 3, "field": "open", "compare_mode": None, "values": None,
        "frame_index": None}
    assert check.ambiguous == () and check.claimed and check.judged == 2


def test_split_votes_are_ambiguous_and_a_clear_minority_is_not_reported() -> None:
    split = [vote(0, False), vote(0, True), vote(0, False), vote(0, True)]
    minority = [vote(1, True), vote(1, True), vote(1, False)]
    check = check_labels([*split, *minority])
    assert check.suspects == ()
    assert [a.key for a in check.ambiguous] == [("walk", "door", 0)]
    assert check.ambiguous[0].values == ((True, 2), (False, 2))  # votes for first on a tie


def test_votes_against_that_disagree_among_themselves_are_not_a_consensus() -> None:
    # Three wrong answers, each different: the label is doubtful, but no value replaces it.
    votes = [vote(0, "cat", "dog"), vote(0, "bird", "dog"), vote(0, "fish", "dog")]
    check = check_labels(votes)
    assert check.suspects == () and len(check.ambiguous) == 1


def test_numeric_votes_agree_within_the_samples_tolerance() -> None:
    votes = [vote(0, 7.0, 3, mode="numeric"), vote(0, 7.4, 3, mode="numeric"), vote(0, 6.8, 3, mode="numeric")]
    assert check_labels(votes).suspects == ()  # tolerance 0: three different values
    wide = compare_from({("walk", "door", 0): CompareConfig("numeric", 0.5)})
    suspect, = check_labels(votes, compare_of=wide).suspects
    assert suspect.consensus == 7.0 and suspect.votes_against == 3


def test_set_modes_group_votes_as_sets() -> None:
    votes = [vote(0, ["a", "b"], ["c"], mode="set_contains_any", status=Status.FAILED),
             vote(0, ["b", "a"], ["c"], mode="set_contains_any", status=Status.FAILED)]
    suspect, = check_labels(votes).suspects
    assert suspect.votes_against == 2


def test_perturbation_arms_errors_and_ignored_results_do_not_vote() -> None:
    results = [vote(0, False, arm="control"), vote(0, False, arm="blur", status=Status.FAILED),
               vote(0, False, arm="control", status=Status.ERROR), vote(0, True, arm="other")]
    results[2] = SampleResult(**{**{f: getattr(results[2], f) for f in results[2].__slots__},  # type: ignore[attr-defined]
                                 "error_kind": ErrorKind.ADAPTER})
    check = check_labels(results, abstaining_arms={"blur"})
    assert check.voting_arms == ("control", "other") and check.abstaining_arms == ("blur",)
    # Two votes (control failed, other passed): split.
    assert [a.votes for a in check.ambiguous] == [2]


def test_one_vote_per_sample_claims_nothing() -> None:
    check = check_labels([vote(0, False), vote(1, True), vote(2, False, arm="blur"), vote(2, False, arm="control")],
                         abstaining_arms={"blur"})
    assert not check.claimed and check.note == NEEDS_VOTES and "--repeat" in NEEDS_VOTES
    assert check.suspects == () and check.ambiguous == () and check.unjudged == 3


def test_quorum_is_checked() -> None:
    with pytest.raises(ValueError, match="quorum"):
        check_labels([], quorum=Fraction(1, 2))
    # A quorum of 1: every vote must agree.
    votes = [vote(0, False), vote(0, False), vote(0, True)]
    assert check_labels(votes, quorum=Fraction(1)).suspects == ()
    assert len(check_labels(votes).suspects) == 1


# --- simulation ------------------------------------------------------------------------------------

SAMPLES = 400
ARMS = ("control", "prompt_b", "model_c")
REPEATS = 3


def simulate(seed: int, flip_rate: float, accuracy: float = 0.9) -> tuple[list[SampleResult], set[int]]:
    """400 boolean samples, a few labels flipped, each arm and trial right with ``accuracy`` independently."""
    rng = random.Random(seed)
    truth = [rng.random() < 0.5 for _ in range(SAMPLES)]
    flipped = set(rng.sample(range(SAMPLES), round(SAMPLES * flip_rate)))
    results = []
    for _trial in range(REPEATS):
        for arm in ARMS:
            for i, true in enumerate(truth):
                label = (not true) if i in flipped else true
                observed = true if rng.random() < accuracy else not true
                results.append(vote(i, observed, label, arm=arm))
    return results, flipped


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulation_finds_flipped_labels(seed: int) -> None:
    results, flipped = simulate(seed, 0.05)
    found = {s.sample_index for s in check_labels(results).suspects}
    hits = len(found & flipped)
    precision, recall = hits / len(found), hits / len(flipped)
    assert precision >= 0.8 and recall >= 0.7, (precision, recall)
    # At 9 votes and 2/3 quorum the expected figures are far above the bar: a failure here is a bug.
    assert precision >= 0.95 and recall >= 0.9, (precision, recall)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulation_without_flipped_labels_suspects_almost_nothing(seed: int) -> None:
    results, flipped = simulate(seed, 0.0)
    assert flipped == set()
    assert len(check_labels(results).suspects) <= 2


def test_simulation_with_a_flaky_stretch_keeps_precision() -> None:
    # Video-shaped: the adapter is near chance on one stretch of neighbouring frames.
    rng = random.Random(7)
    results, flipped = simulate(7, 0.05)
    shaky = range(100, 160)
    redone = []
    for r in results:
        if r.sample_index in shaky:
            true = r.expected if r.sample_index not in flipped else not r.expected
            observed = true if rng.random() < 0.55 else not true
            r = vote(r.sample_index, observed, r.expected, arm=r.arm)
        redone.append(r)
    check = check_labels(redone)
    # Near chance nothing can tell a wrong label from a wrong model: outside the stretch precision holds.
    found = {s.sample_index for s in check.suspects if s.sample_index not in shaky}
    assert len(found & flipped) / len(found) >= 0.8
    # The stretch's samples split their votes: they show up as ambiguous, not as suspects.
    assert sum(a.sample_index in shaky for a in check.ambiguous) >= 10
