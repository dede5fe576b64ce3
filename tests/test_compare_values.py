from __future__ import annotations

import inspect
import sys

import pytest

from glasskit_eval.compare.values import (
    MODES,
    CompareConfig,
    MissingField,
    Outcome,
    compare_values,
    extract_field,
    infer_mode,
)


def check(expected: object, observed: object, mode: str, tolerance: float = 0.0) -> Outcome:
    return compare_values(expected, observed, CompareConfig(mode, tolerance))


def test_modes_are_the_six_documented_ones() -> None:
    assert MODES == (
        "exact",
        "numeric",
        "json_subset",
        "set_equals",
        "set_contains_any",
        "set_contains_all",
    )


def test_compare_config_defaults_and_json() -> None:
    config = CompareConfig("numeric")
    assert config.tolerance == 0.0
    assert CompareConfig("numeric", 0.05).to_json() == {"mode": "numeric", "tolerance": 0.05}
    with pytest.raises(AttributeError):
        config.mode = "exact"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("expect", "mode"),
    [
        (True, "exact"),
        (False, "exact"),
        ("yes", "exact"),
        (None, "exact"),
        (0, "numeric"),
        (0.8, "numeric"),
        (-3, "numeric"),
        ([1, 2], "exact"),
        ({"a": 1}, "exact"),
        ([], "exact"),
    ],
)
def test_infer_mode(expect: object, mode: str) -> None:
    assert infer_mode(expect) == mode


# --- field paths -------------------------------------------------------------------------

OBSERVATION = {
    "result": {"matches": True, "confidence": 0.9, "empty": None},
    "detections": [{"label": "bracket"}, {"label": "fastener", "box": [1, 2, 3, 4]}],
    "by_id": {"0": "zero", "-1": "minus one", "01": "leading zero"},
    "name": "abc",
    "": {"": "blank"},
    "a.b": "dotted key",
}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (None, OBSERVATION),
        ("result", OBSERVATION["result"]),
        ("result.matches", True),
        ("result.confidence", 0.9),
        ("result.empty", None),
        ("detections.0.label", "bracket"),
        ("detections.1.box.3", 4),
        ("detections.01.label", "fastener"),
        ("by_id.0", "zero"),
        ("by_id.-1", "minus one"),
        ("by_id.01", "leading zero"),
        (".", "blank"),
        ("", {"": "blank"}),
    ],
)
def test_extract_field_finds_values(field: str | None, value: object) -> None:
    assert extract_field(OBSERVATION, field) == value


@pytest.mark.parametrize(
    "field",
    [
        "missing",
        "result.missing",
        "result.matches.deeper",
        "result.empty.x",
        "detections.2.label",
        "detections.-1.label",
        "detections.+0.label",
        "detections. 0.label",
        "detections.0x0.label",
        "detections.\uff11.label",  # int() would accept this full-width digit
        "detections.label",
        "detections." + "9" * 5000,
        "name.0",
        "by_id.00",
        "a.b",
        "result.",
    ],
)
def test_extract_field_reports_missing_fields(field: str) -> None:
    with pytest.raises(MissingField) as caught:
        extract_field(OBSERVATION, field)
    assert caught.value.field == field
    assert caught.value.reason == f"adapter observation is missing configured field: {field}"
    assert str(caught.value) == caught.value.reason


def test_extract_field_indexes_tuples_and_top_level_lists() -> None:
    assert extract_field([5, (6, 7)], "1.0") == 6
    with pytest.raises(MissingField):
        extract_field([5], "1")


def test_extract_field_on_scalar_observation() -> None:
    assert extract_field(True, None) is True
    with pytest.raises(MissingField):
        extract_field(True, "result")


# --- exact ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "observed"),
    [
        (True, True),
        (False, False),
        (None, None),
        ("yes", "yes"),
        (1, 1.0),
        ([1, 2.0], [1.0, 2]),
        ({"a": 1, "b": [True]}, {"b": [True], "a": 1}),
        ([1, 2], (1, 2)),
    ],
)
def test_exact_passes(expected: object, observed: object) -> None:
    assert check(expected, observed, "exact") == Outcome(True, None)


@pytest.mark.parametrize(
    ("expected", "observed", "reason"),
    [
        (True, False, "expected true, observed false"),
        (True, 1, "expected true, observed 1 (booleans never equal numbers)"),
        (0, False, "expected 0, observed false (booleans never equal numbers)"),
        (None, False, "expected null, observed false"),
        ("yes", "Yes", 'expected "yes", observed "Yes"'),
        ("1", 1, 'expected "1", observed 1'),
        ([1, 2], [2, 1], "expected [1,2], observed [2,1] (first difference at [0])"),
        ([1, 2], [1, 2, 3], "expected [1,2], observed [1,2,3]"),
        (
            {"a": 1, "b": 2},
            {"a": 1, "b": 3},
            'expected {"a":1,"b":2}, observed {"a":1,"b":3} (first difference at b)',
        ),
        (
            {"a": 1},
            {"a": 1, "c": 2},
            'expected {"a":1}, observed {"a":1,"c":2} (first difference at c)',
        ),
        (
            {"a": [True]},
            {"a": [1]},
            'expected {"a":[true]}, observed {"a":[1]} (first difference at a[0])',
        ),
        ({"a": 1}, [1], 'expected {"a":1}, observed [1]'),
    ],
)
def test_exact_fails_with_reason(expected: object, observed: object, reason: str) -> None:
    assert check(expected, observed, "exact") == Outcome(False, reason)


def test_exact_reason_is_bounded_for_large_values() -> None:
    outcome = check(list(range(1000)), list(range(1001)), "exact")
    assert not outcome.passed
    assert outcome.reason is not None
    assert len(outcome.reason) < 500


# --- numeric -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "observed", "tolerance"),
    [
        (0.8, 0.8, 0.0),
        (1, 1.0, 0.0),
        (0.8, 0.85, 0.05),
        (0.8, 0.75, 0.05),
        (0.8, 0.7, 0.1),
        (0.8, 0.9, 0.1),
        (0.3, 0.2, 0.1),
        (100, 101, 1),
        (0, -0.0, 0.0),
        (10**20, 10**20, 0.0),
        (1e-300, 2e-300, 1e-300),
    ],
)
def test_numeric_passes_within_tolerance(
    expected: float, observed: float, tolerance: float
) -> None:
    assert check(expected, observed, "numeric", tolerance) == Outcome(True, None)


@pytest.mark.parametrize(
    ("expected", "observed", "tolerance", "reason"),
    [
        (0.8, 0.7, 0.05, "|0.7 - 0.8| = 0.1 exceeds tolerance 0.05"),
        (0.8, 0.86, 0.05, "|0.86 - 0.8| = 0.06 exceeds tolerance 0.05"),
        (0.8, 0.85, 0.0499, "|0.85 - 0.8| = 0.05 exceeds tolerance 0.0499"),
        (5, 7, 1, "|7 - 5| = 2 exceeds tolerance 1"),
        (5, 6, 0.0, "expected 5, observed 6"),
        (0.3, 0.1 + 0.2, 0.0, "expected 0.3, observed 0.30000000000000004"),
        (10**20, 10**20 + 1, 0.0, "expected 100000000000000000000, observed 100000000000000000001"),
        (2.0**53, 2**53 + 1, 0.0, "expected 9007199254740992.0, observed 9007199254740993"),
        (0.8, "yes", 0.05, 'expected a number, observed "yes"'),
        (1, True, 0.0, "expected a number, observed true"),
        (0, False, 0.0, "expected a number, observed false"),
        (1, None, 0.0, "expected a number, observed null"),
        (1, [1], 0.0, "expected a number, observed [1]"),
        (1, float("nan"), 0.0, "expected a number, observed NaN"),
        (True, 1, 0.0, "expect is not a number: true"),
        ("1", 1, 0.0, 'expect is not a number: "1"'),
    ],
)
def test_numeric_fails_with_reason(
    expected: object, observed: object, tolerance: float, reason: str
) -> None:
    assert check(expected, observed, "numeric", tolerance) == Outcome(False, reason)


@pytest.mark.parametrize("tolerance", [-0.1, float("nan"), float("inf"), True])
def test_numeric_rejects_invalid_tolerance(tolerance: float) -> None:
    with pytest.raises(ValueError, match="tolerance"):
        check(1, 1, "numeric", tolerance)


# --- json_subset ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "observed"),
    [
        ({"a": 1}, {"a": 1, "b": 2}),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3}),
        ({"a": 1}, {"a": 1.0}),
        ({}, {"anything": [1]}),
        ([], []),
        ([], [1, 2]),
        ([3, 1], [1, 2, 3]),
        ([{"a": 1}], [{"a": 1, "b": 2}]),
        # Greedy first-fit pairs {"a":1} with the first observed item and strands the rest.
        ([{"a": 1}, {"a": 1, "b": 2}], [{"a": 1, "b": 2}, {"a": 1}]),
        ([{"a": 1}, {"a": 1}], [{"a": 1, "x": 1}, {"a": 1, "y": 2}]),
        ([1, 1], [1, 2, 1]),
        ([[3], [1]], [[1, 2], [3]]),
        ({"items": [{"k": [1]}, {"k": [1, 2]}]}, {"items": [{"k": [2, 1, 0]}, {"k": [1, 9]}]}),
        (5, 5),
        (5, 5.0),
        ("x", "x"),
        (None, None),
        ([1], (1, 2)),
    ],
)
def test_json_subset_passes(expected: object, observed: object) -> None:
    assert check(expected, observed, "json_subset") == Outcome(True, None)


@pytest.mark.parametrize(
    ("expected", "observed", "reason"),
    [
        ({"b": 1}, {"a": 1}, 'missing key "b"'),
        ({"a": {"b": 1}}, {"a": {"c": 1}}, 'at a: missing key "b"'),
        ({"a": {"b": 1}}, {"a": {"b": 2}}, "at a.b: expected 1, observed 2"),
        ({"a": 1}, {"a": True}, "at a: expected 1, observed true"),
        ({"a": True}, {"a": 1}, "at a: expected true, observed 1"),
        ({"b": 1}, [1], "expected an object, observed [1]"),
        ({"a": {"b": 1}}, {"a": [1]}, "at a: expected an object, observed [1]"),
        ([1], {"a": 1}, 'expected an array, observed {"a":1}'),
        (
            [{"a": 1}, {"a": 1}],
            [{"a": 1}],
            'matched 1 of 2 expected items one-for-one; unmatched: [{"a":1}]',
        ),
        ([1, 1], [1, 2], "matched 1 of 2 expected items one-for-one; unmatched: [1]"),
        ([1], [True], "matched 0 of 1 expected items one-for-one; unmatched: [1]"),
        ([True], [1], "matched 0 of 1 expected items one-for-one; unmatched: [true]"),
        (
            {"d": [{"label": "x"}, {"label": "y"}]},
            {"d": [{"label": "x"}]},
            'at d: matched 1 of 2 expected items one-for-one; unmatched: [{"label":"y"}]',
        ),
        ("y", "x", 'expected "y", observed "x"'),
        (5, {"a": 5}, 'expected 5, observed {"a":5}'),
        (None, False, "expected null, observed false"),
    ],
)
def test_json_subset_fails_with_reason(expected: object, observed: object, reason: str) -> None:
    assert check(expected, observed, "json_subset") == Outcome(False, reason)


def test_json_subset_needs_augmenting_paths_not_just_first_fit() -> None:
    # Each expected item accepts a different set of observed items; only one assignment
    # covers all three, and first-fit in list order misses it.
    expected = [{"a": 1}, {"a": 1, "b": 1}, {"a": 1, "c": 1}]
    observed = [{"a": 1, "b": 1, "c": 1}, {"a": 1, "c": 1}, {"a": 1, "b": 1}]
    assert check(expected, observed, "json_subset").passed
    assert not check(expected, observed[:2], "json_subset").passed


def test_json_subset_handles_long_arrays() -> None:
    observed = [{"i": i, "extra": True} for i in range(300)]
    expected = [{"i": i} for i in reversed(range(300))]
    assert check(expected, observed, "json_subset").passed


def test_json_subset_long_scalar_arrays_with_duplicates() -> None:
    observed: list[object] = [f"tag{i % 500}" for i in range(20_000)]
    expected: list[object] = [f"tag{i % 500}" for i in reversed(range(20_000))]
    assert check(expected, observed, "json_subset").passed
    outcome = check([*expected, "tag7"], observed, "json_subset")
    assert outcome == Outcome(
        False, 'matched 20000 of 20001 expected items one-for-one; unmatched: ["tag7"]'
    )


def chain_case(size: int) -> tuple[list[object], list[object]]:
    # Expected {"tags": [k]} fits observed k and k + 1, so matching in order pairs each
    # with observed k; the final {"tags": ["last"]} fits only observed 0, and claiming
    # it shifts every earlier pair one slot along an augmenting path of length size.
    observed: list[object] = [{"tags": [0, "last"]}]
    observed += [{"tags": [j - 1, j]} for j in range(1, size)]
    expected: list[object] = [{"tags": [k]} for k in range(size - 1)]
    expected.append({"tags": ["last"]})
    return expected, observed


def test_json_subset_long_augmenting_path_needs_no_deep_recursion() -> None:
    expected, observed = chain_case(400)
    # A recursive augmenting-path search would need one frame per shifted pair.
    depth = len(inspect.stack(0))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 150)
    try:
        outcome = check(expected, observed, "json_subset")
    finally:
        sys.setrecursionlimit(limit)
    assert outcome == Outcome(True, None)


def test_json_subset_long_augmenting_path_with_one_slot_short() -> None:
    expected, observed = chain_case(50)
    outcome = check(expected, observed[:-1], "json_subset")
    assert outcome == Outcome(
        False, 'matched 49 of 50 expected items one-for-one; unmatched: [{"tags":["last"]}]'
    )


# --- set modes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected", "observed"),
    [
        ("set_equals", [1, 2], [2, 1]),
        ("set_equals", [1, 2], [1, 1, 2]),
        ("set_equals", [1, 2], [1.0, 2]),
        ("set_equals", [{"a": 1, "b": [1, 2]}], [{"b": [1, 2], "a": 1.0}]),
        ("set_equals", [], []),
        ("set_equals", [None, "a"], ("a", None)),
        ("set_contains_any", ["bracket", "fastener"], ["x", "fastener"]),
        ("set_contains_any", [1], [1.0]),
        ("set_contains_all", ["bracket", "fastener"], ["fastener", "x", "bracket"]),
        ("set_contains_all", ["a", "a"], ["a"]),
        ("set_contains_all", [1.0], [1]),
        ("set_contains_all", [], ["x"]),
        ("set_contains_all", [], []),
    ],
)
def test_set_modes_pass(mode: str, expected: object, observed: object) -> None:
    assert check(expected, observed, mode) == Outcome(True, None)


@pytest.mark.parametrize(
    ("mode", "expected", "observed", "reason"),
    [
        (
            "set_equals",
            [1, 2],
            [1, 3],
            "missing expected items: [2]; unexpected observed items: [3]",
        ),
        ("set_equals", [1], [1, 2, 2], "unexpected observed items: [2]"),
        ("set_equals", [1, 2], [1], "missing expected items: [2]"),
        (
            "set_equals",
            [1],
            [True],
            "missing expected items: [1]; unexpected observed items: [true]",
        ),
        (
            "set_equals",
            [True],
            [1],
            "missing expected items: [true]; unexpected observed items: [1]",
        ),
        ("set_equals", ["a"], "a", 'expected an array, observed "a"'),
        ("set_equals", "a", ["a"], 'expect is not an array: "a"'),
        (
            "set_contains_any",
            ["bracket", "fastener"],
            ["x"],
            'observed none of the expected items: ["bracket","fastener"]',
        ),
        ("set_contains_any", [1], [True], "observed none of the expected items: [1]"),
        ("set_contains_any", [1, 1.0], [], "observed none of the expected items: [1]"),
        (
            "set_contains_any",
            [],
            ["x"],
            "expect is an empty array, so no expected item can be observed",
        ),
        ("set_contains_any", [1], {"a": 1}, 'expected an array, observed {"a":1}'),
        ("set_contains_any", {"a": 1}, [1], 'expect is not an array: {"a":1}'),
        (
            "set_contains_all",
            ["bracket", "fastener"],
            ["bracket"],
            'missing expected items: ["fastener"]',
        ),
        ("set_contains_all", [True, 1], [1], "missing expected items: [true]"),
        ("set_contains_all", [{"a": 1}], [{"a": 1, "b": 2}], 'missing expected items: [{"a":1}]'),
        ("set_contains_all", [1], None, "expected an array, observed null"),
    ],
)
def test_set_modes_fail_with_reason(
    mode: str, expected: object, observed: object, reason: str
) -> None:
    assert check(expected, observed, mode) == Outcome(False, reason)


# --- booleans never equal numbers, in every mode -------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected", "observed"),
    [
        ("exact", True, 1),
        ("exact", 1, True),
        ("exact", False, 0),
        ("exact", [True], [1]),
        ("numeric", 1, True),
        ("numeric", True, 1),
        ("json_subset", 1, True),
        ("json_subset", {"a": False}, {"a": 0}),
        ("json_subset", [1], [True]),
        ("set_equals", [True], [1]),
        ("set_contains_any", [1], [True]),
        ("set_contains_all", [False], [0]),
    ],
)
def test_booleans_never_match_numbers(mode: str, expected: object, observed: object) -> None:
    assert not check(expected, observed, mode).passed


# --- errors --------------------------------------------------------------------------------


def test_unknown_mode_raises() -> None:
    with pytest.raises(ValueError, match="unknown comparison mode 'fuzzy'"):
        check(1, 1, "fuzzy")


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_accepts_its_own_expectation(mode: str) -> None:
    value: object = 0.5 if mode == "numeric" else ["a", {"b": [1, 2]}]
    assert check(value, value, mode).passed
