"""Arms' streams compared (glasskit_eval.arms.streamcompare): pooled figures, deltas and the paired test.

The figures are recomputed here from the events by hand; the two-sided McNemar mid-p is checked
against scipy's binomial distribution.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from scipy.stats import binom

from glasskit_eval.arms.streamcompare import compare_arm_streams
from glasskit_eval.cases.model import StreamGates
from glasskit_eval.evaluation.streamgates import stream_gates
from glasskit_eval.results import Emission, EventOutcome, StreamMetrics, StreamResult

F = Fraction
QUIET = F(30)


def stream(arm: str | None, detected: list[bool], latency: Fraction, false_alarms: int, *, trial: int = 1,
           target: str = "pan", quiet: Fraction = QUIET) -> StreamResult:
    events = tuple(EventOutcome(i, F(i * 10), (F(i * 10), F(i * 10 + 2)), "x",
                                Emission(F(i * 10) + latency, "x") if hit else None)
                   for i, hit in enumerate(detected))
    latencies = tuple(sorted(e.latency for e in events if e.latency is not None))
    hits = sum(detected)
    metrics = StreamMetrics(events=len(events), detected=hits, repeats=0, false_alarms=false_alarms, quiet_s=quiet,
                            recall=F(hits, len(events)), precision=None,
                            false_alarms_per_min=false_alarms * 60 / quiet, latency_p50=None,
                            latency_p95=latencies[-1] if latencies else None, latency_max=None, latencies=latencies)
    alarms = tuple(Emission(F(5 + i), "x") for i in range(false_alarms))
    return StreamResult("c", target, None, trial, events, alarms, (), metrics, arm=arm)


def mid_p_two_sided(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    upper = lambda k: binom.sf(k, n, 0.5) + binom.pmf(k, n, 0.5) / 2  # noqa: E731
    return min(1.0, 2 * min(upper(b), upper(c)))


def test_figures_are_pooled_over_trials_and_events_are_paired() -> None:
    control = [stream("control", [True, True, True, False], F(1, 5), 1),
               stream("control", [True, True, False, False], F(1, 5), 0, trial=2)]
    late = [stream("late", [True, False, False, False], F(3, 5), 2),
            stream("late", [True, True, True, True], F(3, 5), 0, trial=2)]
    plain = [stream(None, [True, True, True, True], F(0), 0)]  # a plain stream is never an arm's
    (found,) = compare_arm_streams([*control, *late, *plain], ["control", "late"], "control")
    assert (found.control, found.arm, found.case, found.target) == ("control", "late", "c", "pan")
    assert found.control_figures.recall == F(5, 8) and found.arm_figures.recall == F(5, 8)
    assert found.delta_recall == 0.0
    # 1 and 2 false alarms in 60 s of quiet time.
    assert found.control_figures.false_alarms_per_min == 1 and found.arm_figures.false_alarms_per_min == 2
    assert found.delta_false_alarms_per_min == 1.0
    assert found.delta_latency_p95_s == pytest.approx(0.4)
    # Trial 1: the control alone saw events 1 and 2; trial 2: the arm alone saw events 2 and 3.
    assert (found.control_only, found.arm_only) == (2, 2)
    assert found.p_value == pytest.approx(mid_p_two_sided(2, 2))
    data = found.to_json()
    assert data["figures"]["arm"]["recall"] == 0.625 and data["p_value"] == pytest.approx(1.0)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (5, 0), (0, 7), (3, 9), (12, 4), (1, 1)])
def test_the_paired_test_is_the_two_sided_mcnemar_mid_p(b: int, c: int) -> None:
    control_hits = [True] * b + [False] * c + [True] * 3
    arm_hits = [False] * b + [True] * c + [True] * 3
    (found,) = compare_arm_streams([stream("a", control_hits, F(1), 0), stream("b", arm_hits, F(1), 0)],
                                   ["a", "b"], "a")
    assert (found.control_only, found.arm_only) == (b, c)
    assert found.p_value == pytest.approx(mid_p_two_sided(b, c), abs=1e-12)


def test_targets_an_arm_did_not_feed_are_left_out() -> None:
    found = compare_arm_streams([stream("a", [True], F(1), 0), stream("b", [True], F(1), 0, target="other")],
                                ["a", "b"], "a")
    assert found == []


def test_an_arms_figures_are_the_ones_its_stream_gates_judge() -> None:
    """One pooling rule: the comparison's figures of an arm over its trials are what the stream
    gates see when they gate that arm's streams of those trials."""
    late = [stream("late", [True, False, False, False], F(3, 5), 2),
            stream("late", [True, True, True, False], F(1, 5), 1, trial=2)]
    control = [stream("control", [True] * 4, F(1, 5), 0, trial=n) for n in (1, 2)]
    (found,) = compare_arm_streams([*control, *late], ["control", "late"], "control")
    wanted = StreamGates(min_recall=0.9, max_false_alarms_per_min=1.0, max_detection_latency_p95_s=0.5)
    gates = {g.name: g.message for g in stream_gates(late, options=wanted, eval_thresholds=None)}
    mine = found.arm_figures
    assert (mine.detected, mine.events, mine.false_alarms, mine.quiet_s) == (4, 8, 3, 60)
    assert gates["pan_min_recall"].startswith(f"recall {float(mine.recall) * 100:.1f}% (4/8 events)")
    assert gates["pan_max_false_alarms_per_min"].startswith(f"{float(mine.false_alarms_per_min):.3g} false alarms "
                                                            "per minute (3 in 60s of quiet time)")
    # Nearest-rank p95 of the four detections (3/5, 1/5, 1/5, 1/5): 3/5.
    assert mine.latency_p95 == F(3, 5)
    assert gates["pan_max_detection_latency_p95"] == "p95 detection latency 0.600s > 0.5s"
