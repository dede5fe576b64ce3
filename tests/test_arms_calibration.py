"""Calibration of the arms' paired tests by simulation (fixed seeds): the two-sided comparison and the
robustness gate, with their noise learnt from the repeats (``--repeat 3``) and from the differences.

Video-shaped data from ``test_statistics_kit``: 4 cases x 100 samples half a second apart, 3
trials per arm; a flaky adapter whose every trial is its own Markov chain (90% pass, each result
repeating the previous one with probability 0.8: neighbouring samples pass and fail together),
independent across trials and arms. A/A: both arms that adapter. The confined drop: the arm also
fails every trial on one contiguous stretch of 15 samples per case (a scene the perturbation
breaks). The same figures with more seeds: ``benchmarks/bench_regression_calibration.py --arms``.
"""

from __future__ import annotations

import random

from test_statistics_kit import repeated_pair, repeated_side

from glasskit_eval.arms.compare import compare_arms
from glasskit_eval.evaluation.gates import robustness_gate
from glasskit_eval.results import SampleResult, Status
from glasskit_eval.statistics.sidebyside import paired_difference_test


def test_aa_arms_with_repeats_rarely_differ_significantly() -> None:
    rng = random.Random(50)
    flagged = 0
    for _ in range(100):
        series, noise = repeated_pair(rng)
        test = paired_difference_test(series, noise=noise)
        assert test is not None and test.noise_source == "repeats"
        flagged += test.significant
    assert flagged <= 8  # alpha 0.05, two-sided


def test_repeats_find_an_arms_stretch_the_differences_hide() -> None:
    rng = random.Random(51)
    found = hidden = 0
    for _ in range(100):
        series, noise = repeated_pair(rng, stretch=True)
        test = paired_difference_test(series, noise=noise)
        alone = paired_difference_test(series)
        assert test is not None and alone is not None and alone.noise_source == "differences"
        found += test.significant and test.delta_pass_rate < 0
        hidden += alone.significant and alone.delta_pass_rate < 0
    assert found >= 80
    assert found - hidden >= 30


def arms_run(rng: random.Random, stretch: bool) -> list[list[SampleResult]]:
    """Each trial's results of a run with the arms ``control`` and ``arm`` (the arm with the stretch if asked)."""
    sides = {"control": repeated_side(rng), "arm": repeated_side(rng, stretch)}
    trials: list[list[SampleResult]] = [[] for _ in range(3)]
    for arm, cases in sides.items():
        for number, samples in enumerate(cases):
            for index, outcomes in enumerate(samples):
                for trial, passed in enumerate(outcomes):
                    trials[trial].append(SampleResult(
                        case=f"case{number}", target="t", target_label=None, sample_index=index,
                        timestamp_s=index * 0.5, source="at", status=Status.PASSED if passed else Status.FAILED,
                        expected=True, field="ok", compare_mode=None, reason="", arm=arm))
    return trials


def test_the_arms_report_and_the_robustness_gate_are_calibrated_on_simulated_runs() -> None:
    # Through compare_arms and robustness_gate, as a run with arms and --repeat 3 calls them.
    rng = random.Random(52)
    counts = {"aa_compared": 0, "aa_gated": 0, "stretch_compared": 0, "stretch_gated": 0, "stretch_alone": 0}
    runs = 40
    for stretch in (False, True):
        name = "stretch" if stretch else "aa"
        for _ in range(runs):
            trials = arms_run(rng, stretch)
            overall = compare_arms(trials, ["control", "arm"], "control").overall("arm")
            assert overall is not None and overall.test is not None and overall.test.noise_source == "repeats"
            counts[f"{name}_compared"] += overall.test.significant
            every = [r for t in trials for r in t]
            counts[f"{name}_gated"] += not robustness_gate(every, "control", "arm", 0.05).passed
            if stretch:  # the first trial alone: no repeats, the noise from the differences
                counts["stretch_alone"] += not robustness_gate(trials[0], "control", "arm", 0.05).passed
    assert counts["aa_compared"] <= 5 and counts["aa_gated"] <= 5  # near or below alpha of 40
    assert counts["stretch_compared"] >= 34 and counts["stretch_gated"] >= 34
    assert counts["stretch_gated"] - counts["stretch_alone"] >= 15
