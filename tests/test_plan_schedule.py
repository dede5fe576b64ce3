"""The expanded schedule and the command filters (glasskit_eval.plan.schedule)."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import load_case

from glasskit_eval.cases.model import Case
from glasskit_eval.compare.values import CompareConfig
from glasskit_eval.errors import UsageError, ValidationError
from glasskit_eval.plan.schedule import Filters, ScheduledSample, expand_case, select_cases
from glasskit_eval.support.timevalues import parse_cli_time

pytestmark = pytest.mark.frames


def make_case(tmp_path: Path, text: str, name: str = "c", *, allow_empty: bool = False) -> Case:
    cases = tmp_path / "cases"
    cases.mkdir(exist_ok=True)
    path = cases / f"{name}.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    case, problems = load_case(path, allow_empty=allow_empty)
    assert problems == [] and case is not None, problems
    return case


def at(*values: str) -> tuple[Fraction, ...]:
    return tuple(parse_cli_time(v) for v in values)


def rows(samples: list[ScheduledSample]) -> list[tuple[str, float, int]]:
    return [(s.target.id, s.timestamp_s, s.sample_index) for s in samples]


CASE = """
video: v.mp4
targets:
  door:
    samples:
    - range: [0, 1]
      expect: true
    - at: [2.5, 1.5]
      expect: false
  count:
    samples:
    - at: 0.25
      expect: 3
    - range: [0.5, 1.0]
      every_s: 0.1
      expect: 1
      ignore: not labelled yet
"""


# --- expansion -------------------------------------------------------------------------------

def test_indexes_are_case_local_in_declaration_order_across_targets(tmp_path: Path) -> None:
    case = make_case(tmp_path, CASE)
    samples = expand_case(case)
    assert rows(samples) == [
        ("door", 0.0, 0), ("door", 0.5, 1), ("door", 1.5, 2), ("door", 2.5, 3),
        ("count", 0.25, 4), ("count", 0.5, 5), ("count", 0.6, 6), ("count", 0.7, 7), ("count", 0.8, 8),
        ("count", 0.9, 9),
    ]
    assert all(s.case is case for s in samples)
    assert samples[5].block.index == 1 and samples[5].block.target_id == "count"


def test_range_samples_are_exact_decimals(tmp_path: Path) -> None:
    case = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{range: [0, 3], every_s: 0.1, expect: 1}]}}\n")
    samples = expand_case(case)
    assert [s.time for s in samples] == [Fraction(k, 10) for k in range(30)]
    assert samples[7].timestamp_s == 0.7 and samples[29].timestamp_s == 2.9
    assert samples[3].location() == "c / t @ 0.3s"


def test_sample_properties(tmp_path: Path) -> None:
    case = make_case(tmp_path, """
        video: v.mp4
        targets:
          t:
            samples:
            - at: 1
              expect: true
            - at: 2
              expect: 0.5
            - at: 3
              expect: null
            - at: 4
            - at: 5
              ignore: blurry
            - at: 6
              expect: [a]
              compare: {mode: set_contains_any}
              field: result.tags
            - at: 7
              expect: {a: 1}
            - at: 8
              expect: text
            - at: 9
              expect: 3
        """)
    s = expand_case(case)
    assert [x.is_draft for x in s] == [False, False, False, True, False, False, False, False, False]
    assert [x.ignored for x in s] == [False, False, False, False, True, False, False, False, False]
    # Mode inference: non-boolean numbers are numeric; everything else is exact.
    assert [x.compare for x in s] == [
        CompareConfig("exact"), CompareConfig("numeric"), CompareConfig("exact"), None, None,
        CompareConfig("set_contains_any"), CompareConfig("exact"), CompareConfig("exact"),
        CompareConfig("numeric")]
    assert s[5].field == "result.tags" and s[0].field is None
    assert s[2].expect is None and s[6].expect == {"a": 1}


# --- Filters.check ---------------------------------------------------------------------------

@pytest.mark.parametrize(("filters", "message"), [
    (Filters(at=at("1")), "--at, --from and --until select times within one case; add --case"),
    (Filters(from_s=Fraction(1)), "--at, --from and --until select times within one case; add --case"),
    (Filters(until_s=Fraction(1)), "--at, --from and --until select times within one case; add --case"),
    (Filters(case="c", at=at("1"), from_s=Fraction(0)), "--at cannot be combined with --from or --until"),
    (Filters(case="c", at=at("1"), until_s=Fraction(2)), "--at cannot be combined with --from or --until"),
    (Filters(case="c", from_s=Fraction(2), until_s=Fraction(1)), "--until must be greater than --from"),
    (Filters(case="c", from_s=Fraction(1), until_s=Fraction(1)), "--until must be greater than --from"),
    (Filters(case="c", at=at("-1")), "--at must be a nonnegative time in seconds, got -1.0"),
    (Filters(case="c", from_s=Fraction(-1, 2)), "--from must be a nonnegative time in seconds, got -0.5"),
    (Filters(case="c", until_s=Fraction(-1)), "--until must be a nonnegative time in seconds, got -1.0"),
])
def test_filter_option_rules(filters: Filters, message: str) -> None:
    with pytest.raises(UsageError) as info:
        filters.check()
    assert str(info.value) == message


@pytest.mark.parametrize("filters", [
    Filters(),
    Filters(case="c"),
    Filters(targets=("a", "b")),
    Filters(case="c", at=at("1", "1")),
    Filters(case="c", from_s=Fraction(0)),
    Filters(case="c", until_s=Fraction(0)),
    Filters(case="c", from_s=Fraction(1), until_s=Fraction(2)),
])
def test_valid_filter_combinations(filters: Filters) -> None:
    filters.check()


# --- select ---------------------------------------------------------------------------------

def test_no_filters_select_everything(tmp_path: Path) -> None:
    case = make_case(tmp_path, CASE)
    ((selected_case, samples),) = select_cases([case], Filters(), allow_empty=False)
    assert selected_case is case and samples == expand_case(case)


def test_target_filter_keeps_indexes(tmp_path: Path) -> None:
    case = make_case(tmp_path, CASE)
    ((_, samples),) = select_cases([case], Filters(targets=("count",)), allow_empty=False)
    assert [s.sample_index for s in samples] == [4, 5, 6, 7, 8, 9]
    ((_, samples),) = select_cases([case], Filters(targets=("count", "door")), allow_empty=False)
    assert [s.sample_index for s in samples] == list(range(10))


def test_unknown_target_is_a_validation_error(tmp_path: Path) -> None:
    a = make_case(tmp_path, CASE, "a")
    b = make_case(tmp_path, "video: v.mp4\ntargets: {word: {samples: [{at: 1, expect: ok}]}}\n", "b")
    with pytest.raises(ValidationError) as info:
        select_cases([a, b], Filters(targets=("door", "zz")), allow_empty=False)
    (problem,) = info.value.problems
    assert problem.file == str(tmp_path / "cases")
    assert problem.message == "unknown target 'zz' in the selected cases; targets: count, door, word"
    with pytest.raises(ValidationError) as info:
        select_cases([b], Filters(case="b", targets=("door",)), allow_empty=False)
    assert info.value.problems[0].message == "unknown target 'door' in case 'b'; targets: word"


def test_cases_without_a_selected_target_are_left_out(tmp_path: Path) -> None:
    a = make_case(tmp_path, CASE, "a")
    b = make_case(tmp_path, "video: v.mp4\ntargets: {word: {samples: [{at: 1, expect: ok}]}}\n", "b")
    selected = select_cases([a, b], Filters(targets=("word",)), allow_empty=False)
    assert [(case.name, rows(samples)) for case, samples in selected] == [("b", [("word", 1.0, 0)])]


def test_at_selects_scheduled_times_exactly(tmp_path: Path) -> None:
    case = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{range: [0, 1], every_s: 0.1, expect: 1}]}}\n")
    ((_, samples),) = select_cases([case], Filters(case="c", at=at("0.3")), allow_empty=False)
    # 0.1 added three times is 0.30000000000000004: float accumulation would miss this sample.
    assert rows(samples) == [("t", 0.3, 3)]
    ((_, samples),) = select_cases([case], Filters(case="c", at=at("0.7", "0.2", "0.7")), allow_empty=False)
    assert rows(samples) == [("t", 0.2, 2), ("t", 0.7, 7)]


@pytest.mark.parametrize("value", ["0.30000000000000004", "0.3000000004", "3/10", "0.300"])
def test_at_matches_to_nine_decimals(tmp_path: Path, value: str) -> None:
    case = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{range: [0, 1], every_s: 0.1, expect: 1}]}}\n")
    ((_, samples),) = select_cases([case], Filters(case="c", at=at(value)), allow_empty=False)
    assert rows(samples) == [("t", 0.3, 3)]


@pytest.mark.parametrize("value", ["0.3000000006", "0.2999999991", "0.30000001", "0.33"])
def test_at_not_scheduled_is_a_usage_error_with_nearest_times(tmp_path: Path, value: str) -> None:
    case = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{range: [0, 1], every_s: 0.1, expect: 1}]}}\n")
    with pytest.raises(UsageError) as info:
        select_cases([case], Filters(case="c", at=at(value)), allow_empty=True)
    message = str(info.value)
    assert message.startswith(f"--at {value} is not a scheduled sample time in case 'c' for the selected targets")
    assert "nearest scheduled times: 0.3, " in message and message.endswith("see list-samples for the schedule")


def test_at_must_be_scheduled_for_the_selected_targets(tmp_path: Path) -> None:
    case = make_case(tmp_path, CASE)
    with pytest.raises(UsageError, match=r"^--at 2.5 is not a scheduled sample time .*nearest scheduled "
                       r"times: 0.9, 0.8, 0.7;"):
        select_cases([case], Filters(case="c", targets=("count",), at=at("2.5")), allow_empty=False)
    ((_, samples),) = select_cases([case], Filters(case="c", at=at("0.25", "0.7", "1.5")), allow_empty=False)
    assert rows(samples) == [("door", 1.5, 2), ("count", 0.25, 4), ("count", 0.7, 7)]


def test_from_is_inclusive_and_until_exclusive(tmp_path: Path) -> None:
    case = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{range: [0, 1], every_s: 0.1, expect: 1}]}}\n")
    window = Filters(case="c", from_s=parse_cli_time("0.3"), until_s=parse_cli_time("0.6"))
    ((_, samples),) = select_cases([case], window, allow_empty=False)
    assert rows(samples) == [("t", 0.3, 3), ("t", 0.4, 4), ("t", 0.5, 5)]
    ((_, samples),) = select_cases([case], Filters(case="c", from_s=parse_cli_time("0.9")), allow_empty=False)
    assert rows(samples) == [("t", 0.9, 9)]
    ((_, samples),) = select_cases([case], Filters(case="c", until_s=parse_cli_time("0.1")), allow_empty=False)
    assert rows(samples) == [("t", 0.0, 0)]


@pytest.mark.parametrize(("filters", "what"), [
    (Filters(case="c", from_s=Fraction(5)), "at or after 5.0s"),
    (Filters(case="c", until_s=Fraction(0)), "before 0.0s"),
    (Filters(case="c", from_s=Fraction(91, 100), until_s=Fraction(95, 100)), "in [0.91s, 0.95s)"),
])
def test_an_empty_time_window_is_an_error_even_with_allow_empty(tmp_path: Path, filters: Filters,
                                                                 what: str) -> None:
    case = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{range: [0, 1], every_s: 0.1, expect: 1}]}}\n")
    for allow_empty in (False, True):
        with pytest.raises(UsageError) as info:
            select_cases([case], filters, allow_empty=allow_empty)
        assert str(info.value) == (f"no samples are scheduled {what} in case 'c' for the selected targets; "
                                   "see list-samples for the schedule")


def test_drafts_are_rejected_only_inside_the_selected_scope(tmp_path: Path) -> None:
    case = make_case(tmp_path, """
        video: v.mp4
        targets:
          ready:
            samples:
            - at: [1, 2]
              expect: true
            - at: 3
              ignore: no expect needed when ignored
          draft:
            samples:
            - at: [1, 2]
            - at: 2.5
              expect: true
            - range: [3, 4]
        """)
    with pytest.raises(ValidationError) as info:
        select_cases([case], Filters(), allow_empty=False)
    problems = info.value.problems
    # One problem per draft block, located at the block.
    assert [(p.path, p.line) for p in problems] == [("targets.draft.samples[0]", 11),
                                                    ("targets.draft.samples[2]", 14)]
    assert problems[0].message == ("draft sample block has no `expect`; label it, or run `seed` to propose "
                                   "values (explicit `expect: null` is a real expectation)")
    # --allow-empty does not excuse drafts.
    with pytest.raises(ValidationError):
        select_cases([case], Filters(), allow_empty=True)
    ((_, samples),) = select_cases([case], Filters(targets=("ready",)), allow_empty=False)
    assert [s.sample_index for s in samples] == [0, 1, 2]
    ((_, samples),) = select_cases([case], Filters(case="c", targets=("draft",), at=at("2.5")), allow_empty=False)
    assert rows(samples) == [("draft", 2.5, 5)]
    with pytest.raises(ValidationError) as info:
        select_cases([case], Filters(case="c", from_s=Fraction(3)), allow_empty=False)
    assert [p.path for p in info.value.problems] == ["targets.draft.samples[2]"]
    ((_, samples),) = select_cases([case], Filters(), allow_empty=False, allow_drafts=True)
    assert sum(s.is_draft for s in samples) == 4


def test_explicit_null_is_not_a_draft(tmp_path: Path) -> None:
    case = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{at: 1, expect: null}]}}\n")
    ((_, samples),) = select_cases([case], Filters(), allow_empty=False)
    assert not samples[0].is_draft and samples[0].compare == CompareConfig("exact")


def test_empty_targets_need_allow_empty(tmp_path: Path) -> None:
    text = """
        video: v.mp4
        targets:
          empty:
            samples: []
          full:
            samples: [{at: 1, expect: true}]
        """
    case = make_case(tmp_path, text, allow_empty=True)
    ((_, samples),) = select_cases([case], Filters(targets=("empty",)), allow_empty=True)
    assert samples == []
    with pytest.raises(ValidationError) as info:
        select_cases([case], Filters(targets=("empty",)), allow_empty=False)
    assert info.value.problems[0].message == ("case 'c' has no samples in the selection; pass --allow-empty "
                                              "to accept that")
    ((_, samples),) = select_cases([case], Filters(), allow_empty=True)
    assert rows(samples) == [("full", 1.0, 0)]


def test_problems_of_every_case_are_reported_together(tmp_path: Path) -> None:
    a = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{at: 1}]}}\n", "a")
    b = make_case(tmp_path, "video: v.mp4\ntargets: {t: {samples: [{at: 2}, {at: 3}]}}\n", "b")
    with pytest.raises(ValidationError) as info:
        select_cases([a, b], Filters(), allow_empty=False)
    assert [(Path(p.file or "").name, p.path) for p in info.value.problems] == [
        ("a.yaml", "targets.t.samples[0]"), ("b.yaml", "targets.t.samples[0]"), ("b.yaml", "targets.t.samples[1]")]
