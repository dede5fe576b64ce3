"""Calibration of the paired regression test and the arms' tests by simulation, with more seeds than the test suite.

    python benchmarks/bench_regression_calibration.py [--pairs 2000] [--seed 1] [--arms | --no-arms]

The design of the suite's simulations (``tests/test_statistics_kit.py``): 4 cases x 100 samples,
3 trials a side, each trial's outcomes a two-state Markov chain (stationary pass rate 0.9, repeat
probability 0.8), independent across trials and versions. Printed, for the test that learns its
noise from the repeats and for the one that learns it from the differences (no repeats): the
share of A/A pairs flagged at alpha 0.05, and the share flagged when the candidate also fails
every trial on one contiguous stretch of 15 samples per case. Without repeats (one trial a side,
through ``reports.baseline.diff`` and the ``significant`` gate): the same two figures, how many
inconclusive verdicts named a stretch, the median ``--repeat`` they suggested, and the power of the
design rerun with that many trials a side.

Arms (``--arms`` alone; ``--no-arms`` leaves them out), the same design with the control and an arm
in place of baseline and candidate (``tests/test_arms_calibration.py``): the share of A/A runs and
of runs whose arm fails the stretch that the two-sided arms comparison flags, with its noise from
the repeats and from the differences (the same 3-trial pass fractions); and through
``robustness_gate`` on each run's results (``--max-robustness-drop 0.05``), the share that fails it
with 3 trials and with the first trial alone (no repeats: noise from the differences). No timing
claims: the figures are counts.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import importable

if TYPE_CHECKING:
    from glasskit_eval.reports.baseline import BaselineDiff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--arms", action="store_true", help="only the arms' figures")
    which.add_argument("--no-arms", action="store_true", help="leave the arms' figures out")
    args = parser.parse_args()
    importable(tests=True)
    if not args.arms:
        regression(args.pairs, random.Random(args.seed))
    if not args.no_arms:
        arms(args.pairs, random.Random(args.seed))


def flagged_both_ways(rng: random.Random, pairs: int, stretch: bool, test: Callable[..., Any]) -> tuple[int, int]:
    """How many of ``pairs`` simulated pairs ``test`` flags with its noise from the repeats, and from the differences."""
    from test_statistics_kit import repeated_pair

    repeats = differences = 0
    for _ in range(pairs):
        series, noise = repeated_pair(rng, stretch)
        with_noise = test(series, noise=noise)
        alone = test(series)
        assert with_noise is not None and alone is not None
        repeats += with_noise.significant
        differences += alone.significant
    return repeats, differences


def arms(pairs: int, rng: random.Random) -> None:
    """The arms' two-sided comparison and the robustness gate on A/A runs and on runs with a stretch."""
    from test_arms_calibration import arms_run

    from glasskit_eval.evaluation.gates import robustness_gate
    from glasskit_eval.statistics.sidebyside import paired_difference_test

    for stretch in (False, True):
        label = "stretch of 15 (power)" if stretch else "A/A (false alarms)"
        repeats, differences = flagged_both_ways(rng, pairs, stretch, paired_difference_test)
        print(f"arms, 3 trials, two-sided comparison, {label}: noise from repeats {repeats / pairs:.1%}, "
              f"from differences {differences / pairs:.1%} of {pairs} runs")
        gated = single = 0
        for _ in range(pairs):
            trials = arms_run(rng, stretch)
            gated += not robustness_gate([r for t in trials for r in t], "control", "arm", 0.05).passed
            single += not robustness_gate(trials[0], "control", "arm", 0.05).passed
        print(f"arms, robustness gate (max drop 5 points), {label}: fails with 3 trials (noise from repeats) "
              f"{gated / pairs:.1%}, with the first trial alone (noise from differences) {single / pairs:.1%} "
              f"of {pairs} runs")


def regression(pairs: int, rng: random.Random) -> None:
    """The paired regression test (``compare``, ``run --baseline``)."""
    from test_statistics_kit import repeated_pair

    from glasskit_eval.evaluation.gates import baseline_gate
    from glasskit_eval.statistics.paired import paired_regression_test

    for stretch in (False, True):
        repeats, differences = flagged_both_ways(rng, pairs, stretch, paired_regression_test)
        label = "stretch of 15 (power)" if stretch else "A/A (false alarms)"
        print(f"3 trials a side, {label}: noise from repeats {repeats / pairs:.1%}, "
              f"from differences {differences / pairs:.1%} of {pairs} pairs")
    for stretch in (False, True):
        flagged = named = 0
        suggested: list[int] = []
        for _ in range(pairs):
            found = single_trial_diff(rng, stretch)
            flagged += not baseline_gate(found, "significant").passed
            why = found.why_inconclusive
            named += why is not None
            if why is not None and why.repeat is not None:
                suggested.append(why.repeat)
        label = "stretch of 15 (power)" if stretch else "A/A (false alarms)"
        median = sorted(suggested)[len(suggested) // 2] if suggested else None
        print(f"1 trial a side, {label}: flagged {flagged / pairs:.1%} of {pairs} pairs; "
              f"{named} inconclusive naming a stretch, {len(suggested)} with a suggestion, median --repeat {median}")
        if stretch and median is not None:
            # Does the suggestion hold? The same design rerun with that many trials a side.
            # The suggestion is for a drop the size of the longest stretch: one case's, so also
            # check the design with the stretch in one case only.
            for cases in (4, 1):
                found = 0
                for _ in range(pairs):
                    series, noise = repeated_pair(rng, True, median, cases)
                    test = paired_regression_test(series, noise=noise)
                    found += test is not None and test.significant
                print(f"{median} trials a side, stretch of 15 in {cases} case(s): noise from repeats "
                      f"{found / pairs:.1%}")


def single_trial_diff(rng: random.Random, stretch: bool) -> BaselineDiff:
    """A baseline and a candidate of one trial each (the first trial of the 3-trial design) through ``diff``."""
    from test_statistics_kit import repeated_side

    from glasskit_eval.reports.baseline import diff, outcomes

    def results(side: list[list[list[float]]]) -> list[dict[str, object]]:
        return [{"case": f"case{c}", "target": "t", "timestamp_s": i * 0.5,
                 "status": "passed" if trials[0] else "failed"}
                for c, samples in enumerate(side) for i, trials in enumerate(samples)]

    base, cand = repeated_side(rng), repeated_side(rng, stretch)
    return diff(outcomes(results(base)), outcomes(results(cand)), "baseline.json")


if __name__ == "__main__":
    main()
