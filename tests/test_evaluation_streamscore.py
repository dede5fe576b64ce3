"""Scoring a stream, exact and pure (glasskit_eval.evaluation._streamscore)."""

from __future__ import annotations

from fractions import Fraction as F
from typing import Any

from glasskit_eval.cases.model import EventSpec
from glasskit_eval.compare.modes import CompareConfig
from glasskit_eval.evaluation._streamscore import quiet_seconds, score_stream
from glasskit_eval.results import Emission
from glasskit_eval.statistics.descriptive import percentile
from glasskit_eval.summary import pooled_streams


def event(index: int, at: F | int | str, window: tuple[Any, Any] = (0, 1), expect: Any = "on",
          compare: CompareConfig | None = None) -> EventSpec:
    return EventSpec(index, F(at), (F(window[0]), F(window[1])), True, expect, compare)


def emit(time: F | int | str, value: Any = "on") -> Emission:
    return Emission(F(time), value)


def test_windows_are_closed_at_both_ends() -> None:
    events = [event(0, 10, (0, 2))]
    at_start = score_stream(events, [emit(10)], clip_end=F(60))
    at_end = score_stream(events, [emit(12)], clip_end=F(60))
    just_after = score_stream(events, [emit(F(12) + F(1, 10**9))], clip_end=F(60))
    just_before = score_stream(events, [emit(F(10) - F(1, 10**9))], clip_end=F(60))
    assert at_start.events[0].latency == 0 and at_end.events[0].latency == 2
    for score in (just_after, just_before):
        assert not score.events[0].detected and len(score.false_alarms) == 1


def test_earliest_match_detects_every_other_emission_in_the_window_repeats() -> None:
    events = [event(0, 5, (-1, 2))]
    emissions = [emit(F(53, 10), "off"), emit(F(57, 10)), emit(6), emit(F(41, 10), "off")]
    score = score_stream(events, emissions, clip_end=F(20))
    outcome = score.events[0]
    assert outcome.emission == emit(F(57, 10)) and outcome.latency == F(7, 10)
    # Before the hit, a non-matching value; after it, a matching one: both are repeats, in time order.
    assert score.repeats == (emit(F(41, 10), "off"), emit(F(53, 10), "off"), emit(6))
    assert score.false_alarms == () and score.metrics.repeats == 3


def test_an_event_may_be_detected_before_its_onset_with_negative_latency() -> None:
    score = score_stream([event(0, 5, ("-0.2", 1))], [emit("4.8")], clip_end=F(10))
    assert score.events[0].latency == F(-1, 5)


def test_without_quiet_every_emission_outside_the_windows_is_a_false_alarm() -> None:
    events = [event(0, 10, (0, 2)), event(1, 30, (-1, 1))]
    emissions = [emit(1), emit(11, "late"), emit(20, "x"), emit(31), emit(59)]
    score = score_stream(events, emissions, clip_end=F(60))
    assert score.false_alarms == (emit(1), emit(20, "x"), emit(59))
    # A value that does not match, inside a window, is a repeat (reported), not a false alarm.
    assert score.repeats == (emit(11, "late"),)
    assert not score.events[0].detected and score.events[1].latency == 1
    m = score.metrics
    # Quiet time: 60 s minus the windows [10, 12] and [29, 31] = 56 s.
    assert m.quiet_s == 56
    assert (m.events, m.detected, m.missed, m.false_alarms) == (2, 1, 1, 3)
    assert m.recall == F(1, 2) and m.precision == F(1, 4)
    assert m.false_alarms_per_min == F(3) / F(56, 60) == F(45, 14)
    assert m.latency_p50 == m.latency_p95 == m.latency_max == 1


def test_given_quiet_spans_score_only_what_falls_inside_them_edges_included() -> None:
    events = [event(0, 20, (0, 1))]
    quiet = [(F(0), F(10)), (F(40), F(50))]
    emissions = [emit(0), emit(10), emit(F(10) + F(1, 1000)), emit(30), emit(40), emit(50), emit(51)]
    score = score_stream(events, emissions, clip_end=F(60), quiet=quiet)
    assert score.false_alarms == (emit(0), emit(10), emit(40), emit(50))
    assert score.unscored == (emit(F(10) + F(1, 1000)), emit(30), emit(51))
    assert score.metrics.quiet_s == 20 and score.metrics.false_alarms_per_min == 12
    assert score.metrics.recall == 0 and score.metrics.precision == 0
    assert score.metrics.latency_p95 is None


def test_field_and_compare_apply_to_emissions_event_compare_wins() -> None:
    events = [event(0, 1, expect="boiling"), event(1, 5, expect=10, compare=CompareConfig("numeric", 0.5))]
    emissions = [emit(1, {"other": "boiling"}), emit(F(3, 2), {"alert": "boiling"}),
                 emit(5, {"alert": 11}), emit(F(11, 2), {"alert": F(21, 2) and 10.5})]
    score = score_stream(events, emissions, clip_end=F(10), field="alert")
    assert score.events[0].latency == F(1, 2)  # the first emission lacks the field: not a match
    assert score.events[1].latency == F(1, 2)  # 11 is outside the tolerance, 10.5 inside
    assert [e.time for e in score.repeats] == [1, 5]


def test_figures_are_null_without_what_they_are_computed_from() -> None:
    score = score_stream([], [], clip_end=F(10), quiet=[])
    m = score.metrics
    assert (m.recall, m.precision, m.false_alarms_per_min, m.latency_p50, m.latency_max) == (None,) * 5
    assert score.metrics.quiet_s == 0


def test_windows_and_quiet_spans_are_clamped_to_the_clip() -> None:
    # A window starting before 0 and one ending after the clip count only their part inside it.
    assert quiet_seconds(F(10), [(F(-1), F(1)), (F(9), F(12))], None) == 8
    assert quiet_seconds(F(10), [], [(F(8), F(20)), (F(0), F(1))]) == 3


def test_latency_percentiles_are_the_latency_summarys_nearest_rank() -> None:
    # Twenty events detected at latencies 1/20 .. 20/20: p50 is the 10th, p95 the 19th, as the summary.
    events = [event(i, 10 * i, (0, 2)) for i in range(20)]
    emissions = [emit(10 * i + F(i + 1, 20)) for i in range(20)]
    m = score_stream(events, emissions, clip_end=F(200)).metrics
    latencies = tuple(F(i + 1, 20) for i in range(20))
    assert m.latency_p50 == percentile(latencies, 50) == F(10, 20)
    assert m.latency_p95 == percentile(latencies, 95) == F(19, 20)
    assert m.latency_max == 1
    assert float(m.latency_p95) == percentile(tuple(float(x) for x in latencies), 95)


def test_pooled_figures_add_events_emissions_and_quiet_time() -> None:
    a = score_stream([event(0, 1)], [emit(F(3, 2)), emit(5, "x")], clip_end=F(30))
    b = score_stream([event(0, 1), event(1, 10)], [emit(2)], clip_end=F(30))
    m = pooled_streams([a, b])
    assert (m.events, m.detected, m.false_alarms, m.repeats) == (3, 2, 1, 0)
    assert m.quiet_s == 29 + 28 and m.recall == F(2, 3)
    assert m.latencies == (F(1, 2), F(1))


def test_emissions_at_the_same_time_keep_their_order() -> None:
    score = score_stream([event(0, 1)], [emit(1, "no"), emit(1, "on"), emit(1, "on")], clip_end=F(5))
    assert score.events[0].emission == emit(1, "on")
    assert score.repeats == (emit(1, "no"), emit(1, "on"))


def test_json_shape_of_outcomes() -> None:
    score = score_stream([event(0, "0.5")], [emit("0.7", {"alert": "on"})], clip_end=F(2), field="alert")
    assert score.events[0].to_json() == {"at": 0.5, "emission": {"time_s": 0.7, "value": {"alert": "on"}},
                                          "expect": "on", "index": 0, "latency_s": float(F(1, 5)),
                                          "status": "detected", "window_s": [0.5, 1.5]}
