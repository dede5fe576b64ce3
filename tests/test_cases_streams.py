"""Stream targets in case files: ``events``, ``stream``, ``quiet`` (glasskit_eval.cases.streams)."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import load_case, make_eval, run_cli

from glasskit_eval.cases.model import DEFAULT_WINDOW, Case, StreamGates, StreamSpec
from glasskit_eval.compare.modes import CompareConfig


def write(tmp_path: Path, text: str) -> Path:
    cases = tmp_path / "eval" / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    path = cases / "c.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def ok(tmp_path: Path, text: str) -> Case:
    case, problems = load_case(write(tmp_path, text))
    assert problems == [], "\n".join(str(p) for p in problems)
    assert case is not None
    return case


def problems(tmp_path: Path, text: str, *, allow_empty: bool = False) -> list[tuple[str, int | None, str]]:
    case, found = load_case(write(tmp_path, text), allow_empty=allow_empty)
    assert case is None and found
    return [(p.path, p.line, p.message) for p in found]


def stream_of(case: Case, target: str = "pan") -> StreamSpec:
    spec = case.target(target)
    assert spec is not None and spec.stream is not None and spec.blocks == ()
    return spec.stream


ISSUE_CASE = """
video: v.mp4
targets:
  pan:
    stream: {every_s: 0.2, window: [-0.2, 1.5]}
    sample_defaults: {field: alert}
    events:
      - at: 12.4
        expect: boiling
      - at: 40.0
        expect: boiling
        window: [0, 3.0]
    quiet: [[50, 60], [0, 10]]
thresholds:
  per_target:
    pan: {min_recall: 0.9, max_false_alarms_per_min: 0.5, max_detection_latency_p95_s: 1.2}
"""


def test_the_issue_example_parses_exactly(tmp_path: Path) -> None:
    case = ok(tmp_path, ISSUE_CASE)
    stream = stream_of(case)
    assert stream.every_s == Fraction(1, 5)
    assert stream.field == "alert" and stream.compare is None
    first, second = stream.events
    assert (first.index, first.at, first.window, first.expect) == (0, Fraction(62, 5), (Fraction(-1, 5), Fraction(3, 2)),
                                                                   "boiling")
    assert first.span == (Fraction(61, 5), Fraction(139, 10))
    assert (second.at, second.window) == (Fraction(40), (Fraction(0), Fraction(3)))
    # Quiet spans are kept sorted whatever order they were written in.
    assert stream.quiet == ((Fraction(0), Fraction(10)), (Fraction(50), Fraction(60)))
    assert case.thresholds is not None and case.thresholds.stream_gates == {
        "pan": StreamGates(min_recall=0.9, max_false_alarms_per_min=0.5, max_detection_latency_p95_s=1.2)}


def test_defaults_window_every_frame_and_no_quiet(tmp_path: Path) -> None:
    stream = stream_of(ok(tmp_path, """
        video: v.mp4
        targets:
          pan:
            events: [{at: 1, expect: true, compare: {mode: exact}}]
        """))
    assert stream.every_s is None and stream.quiet is None
    assert stream.events[0].window == DEFAULT_WINDOW == (Fraction(0), Fraction(1))
    assert stream.events[0].compare == CompareConfig("exact")


def test_overlapping_windows_name_both_lines(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        video: v.mp4
        targets:
          pan:
            events:
              - at: 1.0
                expect: x
              - at: 3.0
                expect: x
              - at: 1.5
                expect: x
        """)
    assert found == [("targets.pan.events[2]", 9,
                      "the window [1.5, 2.5]s of events[2] overlaps the window [1.0, 2.0]s of events[0] "
                      "(targets.pan.events[0], line 5); windows of one target may not overlap (both ends are "
                      "closed): narrow a window or move an event")]


def test_windows_touching_at_one_instant_overlap_but_a_tick_apart_do_not(tmp_path: Path) -> None:
    touching = problems(tmp_path, """
        video: v.mp4
        targets:
          pan:
            events: [{at: 1, expect: x}, {at: 2, expect: x}]
        """)
    assert len(touching) == 1 and "overlaps the window [1.0, 2.0]s of events[0]" in touching[0][2]
    ok(tmp_path, """
        video: v.mp4
        targets:
          pan:
            events: [{at: 1, expect: x, window: [0, 0.999]}, {at: 2, expect: x}]
        """)


def test_quiet_overlapping_a_window_names_both_lines_closed_edges(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        video: v.mp4
        targets:
          pan:
            events:
              - at: 5
                expect: x
                window: [-1, 1]
            quiet: [[0, 3], [6, 8]]
        """)
    # [6, 8] touches the window [4, 6] at 6: both are closed, so that is an overlap; [0, 3] is clear.
    assert found == [("targets.pan.quiet[1]", 8,
                      "quiet span [6.0, 8.0]s overlaps the window [4.0, 6.0]s of events[0] "
                      "(targets.pan.events[0], line 5); quiet time may not overlap a window (both are closed): "
                      "shorten the span")]


def test_unknown_keys_suggest_the_right_one(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        video: v.mp4
        targets:
          pan:
            stream: {evry_s: 0.2}
            events:
              - at: 1
                expect: x
                windw: [0, 2]
        """)
    messages = [m for _p, _l, m in found]
    assert any(m.startswith("unknown key 'evry_s' (did you mean 'every_s'?)") for m in messages)
    assert any(m.startswith("unknown key 'windw' (did you mean 'window'?)") for m in messages)
    assert [p for p, _l, _m in found] == ["targets.pan.stream.evry_s", "targets.pan.events[0].windw"]


def test_samples_and_events_together_are_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        video: v.mp4
        targets:
          pan:
            samples: [{at: 1, expect: x}]
            events: [{at: 1, expect: x}]
        """)
    assert found == [("targets.pan.events", 5, "a target has either `samples` (one frame at a time) or `events` "
                      "(a stream fed in order), not both; move the samples to a target of their own")]


def test_bad_values_are_located(tmp_path: Path) -> None:
    found = problems(tmp_path, """
        video: v.mp4
        targets:
          pan:
            stream: {every_s: 0, window: [1, 1]}
            events:
              - expect: x
              - at: -2
                expect: x
              - at: 3
                window: [0, "1"]
                expect: x
                compare: {mode: numeric}
            quiet: [[4, 2], [1]]
          plain:
            quiet: [[0, 1]]
            samples: [{at: 1, expect: 1}]
        thresholds:
          per_target:
            pan: {min_recall: 1.5, max_false_alarms_per_min: -1}
        """)
    by_path = {p: m for p, _l, m in found}
    assert by_path["targets.pan.stream.every_s"] == "every_s must be greater than 0, got 0"
    assert by_path["targets.pan.stream.window"] == "window end must be greater than its start, got [1, 1]"
    assert by_path["targets.pan.events[0]"] == "an event needs `at:`, its onset in seconds"
    assert by_path["targets.pan.events[1].at"] == "at must be nonnegative, got -2"
    assert by_path["targets.pan.events[2].window[1]"] == "window end must be a finite number of seconds, got a string"
    assert by_path["targets.pan.events[2].expect"] == "numeric comparison needs a number in expect, got a string"
    assert by_path["targets.pan.quiet[0]"] == "quiet span end must be greater than its start, got [4, 2]"
    assert by_path["targets.pan.quiet[1]"] == "each quiet span must be a two-element list [start, end] in seconds"
    assert by_path["targets.plain.quiet"].startswith("quiet applies to stream targets")
    assert by_path["thresholds.per_target.pan.min_recall"] == "min_recall must be a number from 0.0 to 1.0, got 1.5"
    assert by_path["thresholds.per_target.pan.max_false_alarms_per_min"] == (
        "max_false_alarms_per_min must be a nonnegative number, got -1")


def test_empty_events_need_allow_empty(tmp_path: Path) -> None:
    text = """
        video: v.mp4
        targets:
          pan:
            events: []
        """
    assert problems(tmp_path, text) == [("targets.pan.events", 4, "events is empty; add an event or pass --allow-empty")]
    case, found = load_case(write(tmp_path, text), allow_empty=True)
    assert found == [] and case is not None and stream_of(case).events == ()


STREAM_EVAL = """
video: cfr_h264.mp4
targets:
  pan:
    label: Pan alert
    sample_defaults: {field: alert}
    events:
      - at: 0.3
        expect: boiling
      - at: 1.5
        expect: boiling
        window: [-0.1, 0.3]
  step:
    samples: [{at: 0.2, expect: 1}]
"""


def test_validate_counts_events_and_list_samples_lists_them(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": STREAM_EVAL})
    code, out, err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 0, err
    assert f"Validation passed: {eval_dir} (1 samples, 2 events)" in out
    code, out, err = run_cli("list-samples", "--eval-dir", eval_dir)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[3:]]
    assert rows == [["c", "step", "0.2s", "1", "at"],
                    ["c", "Pan", "alert", "(pan)", "0.3s", '"boiling"', "alert", "event,", "window", "[0.3,", "1.3]s"],
                    ["c", "Pan", "alert", "(pan)", "1.5s", '"boiling"', "alert", "event,", "window", "[1.4,", "1.8]s"]]


def test_validate_refuses_an_event_past_the_end_and_a_draft_event(tmp_path: Path) -> None:
    eval_dir = make_eval(tmp_path, {"c": """
        video: cfr_h264.mp4
        targets:
          pan:
            events:
              - at: 2.5
                expect: x
            quiet: [[2.2, 2.4]]
        """})
    code, out, _err = run_cli("validate", "--eval-dir", eval_dir)
    case = eval_dir / "cases" / "c.yaml"
    assert code == 1
    assert (f"- {case}:6: targets.pan.events[0].at: event at 2.5s is past the end of the video cfr_h264.mp4 "
            "(2.0s from its first frame); fix the time") in out
    assert f"- {case}:8: targets.pan.quiet: quiet span [2.2, 2.4]s starts past the end" in out
    case.write_text(textwrap.dedent("""
        video: cfr_h264.mp4
        targets:
          pan:
            events:
              - at: 1.0
        """).lstrip())
    code, out, _err = run_cli("validate", "--eval-dir", eval_dir)
    assert code == 1 and f"- {case}:5: targets.pan.events[0]: event has no `expect`" in out


TIMES_CASE = """
video: v.mp4
targets:
  pan:
    stream: {window: [-0.25, 0.5]}
    events:
      - {at: 1.0, expect: a}
      - {at: 1.75, expect: a}
      - {at: 0.5, expect: a, window: [0, 0.1]}
      - {at: 3.0000001, expect: a}
      - {at: 3.0000001, expect: b}
      - {at: 2.2, expect: a, window: [0.1, 0.2]}
      - {at: 0.5000000000000001, expect: a, window: [0.0999999999999999, 0.2]}
    quiet: [[2.25, 2.29999999], [0.45, 0.55], [5, 6], [2.4, 2.41], [2.41000001, 2.5]]
"""


def test_times_compare_the_same_as_integers_of_one_scale_and_as_fractions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from glasskit_eval.cases import streams

    def both(text: str) -> list[tuple[str, int | None, str]]:
        found = problems(tmp_path, text)
        # No common denominator is small enough: every comparison is of Fractions.
        with monkeypatch.context() as patch:
            patch.setattr(streams, "_MAX_SCALE_BITS", 0)
            assert problems(tmp_path, text) == found
        return found

    found = both(TIMES_CASE)
    # Touching ends overlap, exactly: 0.5000000000000001 + 0.0999999999999999 is 0.6, where events[2] ends.
    assert [(path, line) for path, line, _ in found] == [
        ("targets.pan.events[1]", 7), ("targets.pan.events[4]", 10), ("targets.pan.events[6]", 12),
        ("targets.pan.quiet[1]", 13), ("targets.pan.quiet[0]", 13), ("targets.pan.quiet[3]", 13)]
    assert "events[6] overlaps the window [0.5, 0.6]s of events[2]" in found[2][2]
    assert "[2.4, 2.41]s overlaps the window [2.3, 2.4]s of events[5]" in found[5][2]
    # One time with no short decimal common denominator: the Fractions path, on its own.
    tiny = both(TIMES_CASE.replace("{at: 1.0,", "{at: 1.0e-300,"))
    assert tiny[0][:2] == ("targets.pan.events[2]", 8) and "[-0.250000, 0.500000]s of events[0]" in tiny[0][2]


def test_event_order_and_seconds_are_the_exact_times_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from glasskit_eval.cases import streams

    text = """
        video: v.mp4
        targets:
          pan:
            stream: {window: [-0.1, 0.3]}
            events:
              - {at: 2.5, expect: a}
              - {at: 0.1, expect: b, window: [0.30000000000000004, 0.7]}
              - {at: 1.0000000000000002, expect: c}
              - {at: 0.0000001, expect: d, window: [0, 0.01]}
            quiet: [[1.5, 2.0]]
        """
    for bits in (streams._MAX_SCALE_BITS, 0):
        monkeypatch.setattr(streams, "_MAX_SCALE_BITS", bits)
        stream = stream_of(ok(tmp_path, text))
        assert [e.index for e in stream.events] == [3, 1, 2, 0]
        assert streams.event_seconds(stream.events) == {
            e.index: (float(e.at), float(e.at + e.window[0]), float(e.at + e.window[1])) for e in stream.events}
        assert streams.event_seconds(stream.events)[1][2] == 0.8 != 0.1 + 0.7  # the exact sum, not the floats'
