"""Streams in the console: the table within 80 columns, each miss and false alarm with its time, the verdict's counts.

(glasskit_eval.reports.streams, and the stream side of reports.console's summary and verdict line.)
"""

from __future__ import annotations

import io
from fractions import Fraction as F
from typing import Any

from test_evaluation_streamscore import emit, event

from glasskit_eval.evaluation._streamscore import score_stream
from glasskit_eval.reports.console import print_summary, verdict_line
from glasskit_eval.reports.streams import event_counts, rounded, stream_findings, stream_table
from glasskit_eval.results import Gate, SampleResult, Status, StreamResult, TrialResult
from glasskit_eval.summary import RunResult, RunSummary


def stream(events: list[Any], emissions: list[Any], case: str = "room", target: str = "lights",
           trial: int = 1) -> StreamResult:
    score = score_stream(events, emissions, clip_end=F(30))
    return StreamResult(case=case, target=target, target_label=None, trial=trial, events=score.events,
                        false_alarms=score.false_alarms, repeats=score.repeats, metrics=score.metrics,
                        frames_delivered=750)


def summary(*streams: StreamResult, gates: tuple[Gate, ...] = (), results: tuple[SampleResult, ...] = ()) -> RunSummary:
    trial = TrialResult(trial=1, results=results, gates=gates, duration_seconds=23.5, timing_mode=None,
                        streams=streams)
    return RunSummary.of(RunResult(eval_dir="/e", cases=("room",), repeat=1, trials=(trial,), gates=(),
                                   duration_seconds=23.5))


#: Four events, the last missed; one emission in quiet time at 17 s (a false alarm).
FOUR = [event(0, 5), event(1, 12), event(2, 20), event(3, 27)]
HITS = [emit(5), emit(F(121, 10)), emit(20), emit(17)]


def sample(status: Status) -> SampleResult:
    return SampleResult(case="room", target="lit", target_label=None, sample_index=0, timestamp_s=1.0,
                        source="at", status=status, expected=True, field=None, compare_mode=None, reason="r")


def test_a_stream_only_verdict_counts_events_and_never_passes_what_no_gate_judged() -> None:
    s = summary(stream(FOUR, HITS))
    assert verdict_line(s) == "NOT GATED: 1 of 4 events missed, 1 false alarm in 23.5s; no gate is set"
    gated = summary(stream(FOUR, HITS), gates=(Gate("lights_min_recall", False, "recall 75.0%"),))
    assert verdict_line(gated) == "FAILED: 1 of 4 events missed, 1 false alarm in 23.5s; gates: lights_min_recall"
    passing = summary(stream(FOUR, HITS), gates=(Gate("lights_min_recall", True, "recall 75.0%"),))
    assert verdict_line(passing).startswith("PASSED: 1 of 4 events missed, 1 false alarm in ")
    clean = summary(stream(FOUR, [emit(5), emit(12), emit(20), emit(27)]))
    assert verdict_line(clean) == "PASSED: 4 of 4 events detected in 23.5s"
    assert "nothing evaluated" not in verdict_line(summary(stream([], [])))


def test_samples_and_events_are_both_counted() -> None:
    s = summary(stream(FOUR, HITS), results=(sample(Status.FAILED), sample(Status.PASSED)))
    assert verdict_line(s) == ("NOT GATED: 1 failed, 1 passed; 1 of 4 events missed, 1 false alarm in 23.5s; "
                               "no gate is set")
    counts = event_counts(s)
    assert counts is not None and (counts.events, counts.missed, counts.false_alarms, counts.frames) == (4, 1, 1, 750)
    assert event_counts(summary()) is None


def test_a_stream_only_summary_has_no_empty_sample_figures_or_tables() -> None:
    out = io.StringIO()
    print_summary(summary(stream(FOUR, HITS)), out)
    text = out.getvalue()
    assert "Streams: 1 (750 frames fed): 1 of 4 events missed, 1 false alarm" in text
    assert "Samples:" not in text and "Pass rate" not in text and "By target" not in text
    assert "samples/s" not in text and "frames/s" in text
    assert "room/lights  false alarm @ 17s" in text and "room/lights  missed event @ 27s" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_streams_table_fits_80_columns_whatever_the_names() -> None:
    long = stream(FOUR, HITS, case="a-case-with-a-very-long-name", target="and-a-target-named-at-length")
    for s in (summary(stream(FOUR, HITS)), summary(long)):
        text = stream_table(s)
        assert text is not None and max(len(line) for line in text.splitlines()) <= 80
    text = stream_table(summary(long))
    assert text is not None and "a-case-with…d-at-length" in text
    assert "1 (2.31/min)" in (stream_table(summary(stream(FOUR, HITS))) or "")


def test_rates_are_rounded_for_people() -> None:
    assert rounded(187.97826086956522) == "188"
    assert rounded(2.3076923) == "2.31" and rounded(0.0) == "0" and rounded(12.345) == "12.3"


def test_findings_are_in_time_order_and_capped() -> None:
    lines = stream_findings(summary(stream(FOUR, HITS)))
    assert lines == ["Missed events and false alarms",
                     '  room/lights  false alarm @ 17s: "on"',
                     '  room/lights  missed event @ 27s: no "on" in [27, 28]s']
    many = stream(FOUR, [emit(F(k, 10)) for k in range(300, 400, 2)])
    lines = stream_findings(summary(many))
    assert lines[-1].startswith("  ... and ") and len(lines) == 1 + 20 + 1
    assert stream_findings(summary(stream(FOUR, [emit(5), emit(12), emit(20), emit(27)]))) == []


def test_with_arms_the_headline_counts_the_controls_events_and_a_stream_gate_is_a_gate() -> None:
    import dataclasses

    control = dataclasses.replace(stream(FOUR, HITS), arm="control")
    dim = dataclasses.replace(stream(FOUR, []), arm="dim")
    trial = TrialResult(trial=1, results=(), gates=(), duration_seconds=1.0, timing_mode=None, streams=(control, dim))
    run = RunResult(eval_dir="/e", cases=("room",), repeat=1, trials=(trial,), gates=(), duration_seconds=1.0)
    s = RunSummary.of(run, control="control")
    assert verdict_line(s).startswith("NOT GATED: 1 of 4 events missed, 1 false alarm in ")  # not 5 of 8
    # A sample gate does not judge events: still not gated. A stream gate does.
    sample_gated = summary(stream(FOUR, HITS), gates=(Gate("eval_min_pass_rate", True, "ok"),))
    assert verdict_line(sample_gated).startswith("NOT GATED: ")
    stream_gated = summary(stream(FOUR, HITS), gates=(Gate("room_lights_max_false_alarms_per_min", True, "ok"),))
    assert verdict_line(stream_gated).startswith("PASSED: ")
