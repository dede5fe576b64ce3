from __future__ import annotations

import datetime
import enum
import itertools
import json
import sys
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal

import pytest

import glasskit_eval.support.jsonvalues as jsonvalues
from glasskit_eval.support.jsonvalues import (
    MAX_DEPTH,
    STEP_ITEMS,
    JsonPath,
    canonical_key,
    checked_plain,
    checked_steps,
    format_path,
    json_equal,
    json_problem,
    render_json,
    to_plain,
)


class Color(enum.IntEnum):
    RED = 1


class Shouty(str):
    def __str__(self) -> str:
        return self.upper()


class Custom:
    pass


def nested_lists(depth: int, leaf: object = 1) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_dicts(depth: int, leaf: object = 1) -> object:
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        10**30,
        0.5,
        -0.0,
        1e308,
        "",
        "text with ünïcode",
        [],
        {},
        (),
        (1, "a", None),
        [1, [2, [3, {"a": (4, 5)}]]],
        {"result": {"score": 0.9, "labels": ["a", "b"]}, "meta": None},
        {"": 1, "a.b": 2, "0": 3},
        Color.RED,
        OrderedDict(a=1),
        Shouty("x"),
        {Shouty("k"): 1},
    ],
)
def test_json_like_values_have_no_problem(value: object) -> None:
    assert json_problem(value) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "value is NaN"),
        (float("inf"), "value is infinite"),
        (float("-inf"), "value is infinite"),
        ({"result": {"score": float("nan")}}, "value at result.score is NaN"),
        ({"a": [1, {"b": float("-inf")}]}, "value at a[1].b is infinite"),
        ({"result": {1: 2}}, "object key 1 at result is not a string"),
        ({1: 2}, "object key 1 is not a string"),
        ({True: 2}, "object key True is not a string"),
        ({None: 2}, "object key None is not a string"),
        ({("a",): 2}, "object key ('a',) is not a string"),
        ({"items": [1, 2, {3}]}, "value at items[2] has unsupported type set"),
        ({1, 2}, "value has unsupported type set"),
        (frozenset(), "value has unsupported type frozenset"),
        (b"x", "value has unsupported type bytes"),
        (bytearray(b"x"), "value has unsupported type bytearray"),
        (Decimal("1"), "value has unsupported type Decimal"),
        (datetime.date(2024, 1, 1), "value has unsupported type date"),
        (Custom(), "value has unsupported type Custom"),
        (1j, "value has unsupported type complex"),
        ([range(3)], "value at [0] has unsupported type range"),
        ({"odd key": [float("nan")]}, 'value at ["odd key"][0] is NaN'),
        ((1, (2, float("nan"))), "value at [1][1] is NaN"),
    ],
)
def test_problems_name_the_location(value: object, reason: str) -> None:
    assert json_problem(value) == reason


def test_first_problem_in_document_order_is_reported() -> None:
    value = {"a": [1, float("nan")], "b": {1: 2}, "c": {3}}
    assert json_problem(value) == "value at a[1] is NaN"


def test_self_referencing_list_is_a_cycle() -> None:
    loop: list[object] = []
    loop.append(loop)
    assert json_problem(loop) == (
        "value at [0] refers back to a container that encloses it (cycle)"
    )


def test_indirect_cycle_through_dict_is_detected() -> None:
    outer: dict[str, object] = {}
    inner: list[object] = [1, outer]
    outer["child"] = inner
    assert json_problem({"root": outer}) == (
        "value at root.child[1] refers back to a container that encloses it (cycle)"
    )


def test_shared_container_is_not_a_cycle() -> None:
    shared = {"x": [1, 2]}
    assert json_problem([shared, shared, {"again": shared}]) is None


@pytest.mark.parametrize("make", [nested_lists, nested_dicts])
def test_nesting_at_the_limit_is_accepted(make: Callable[[int], object]) -> None:
    assert json_problem(make(MAX_DEPTH)) is None


@pytest.mark.parametrize("make", [nested_lists, nested_dicts])
def test_nesting_past_the_limit_is_rejected(make: Callable[[int], object]) -> None:
    reason = json_problem(make(MAX_DEPTH + 1))
    assert reason is not None
    assert reason.endswith(f"is nested more than {MAX_DEPTH} levels deep")


@pytest.mark.parametrize("make", [nested_lists, nested_dicts])
def test_very_deep_nesting_does_not_crash(make: Callable[[int], object]) -> None:
    reason = json_problem(make(100_000))
    assert reason is not None
    assert "nested more than" in reason
    # The path is elided rather than spelled out 100 levels long.
    assert len(reason) < 250


def test_deep_cycle_reports_cycle_or_depth_without_crashing() -> None:
    head: list[object] = []
    tail = head
    for _ in range(50):
        nxt: list[object] = []
        tail.append(nxt)
        tail = nxt
    tail.append(head)
    reason = json_problem(head)
    assert reason is not None
    assert reason.endswith("refers back to a container that encloses it (cycle)")


def test_wide_values_are_fine() -> None:
    assert json_problem({f"k{i}": list(range(100)) for i in range(1000)}) is None


@pytest.mark.skipif(
    not hasattr(sys, "get_int_max_str_digits") or sys.get_int_max_str_digits() == 0,
    reason="this Python has no int-to-str digit limit",
)
def test_integer_too_long_for_json_is_rejected() -> None:
    assert json_problem({"n": 10**5000}) == (
        "value at n is an integer with too many digits to write as JSON"
    )


def test_large_integer_within_digit_limit_is_accepted() -> None:
    assert json_problem(10**600) is None


def test_lone_surrogates_are_not_json_like() -> None:
    # json.dumps(..., ensure_ascii=False).encode("utf-8") raises on these (the checkpoint encoder did).
    assert json_problem({"label": "ok" + chr(0xD800)}) == (
        "value at label is a string with a lone surrogate (U+D800) at character 2, which UTF-8 "
        "(and so JSON) cannot encode")
    assert json_problem({"a": {"x" + chr(0xDFFF): 1}}) == (
        "object key at a is a string with a lone surrogate (U+DFFF) at character 1, which UTF-8 "
        "(and so JSON) cannot encode")
    assert json_problem(["caf\u00e9", "\U0001F600"]) is None


class _HostileDict(dict):  # type: ignore[type-arg]
    def items(self):  # type: ignore[no-untyped-def, override]
        raise RuntimeError("items() is broken")

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("iteration is broken")


class _HostileList(list):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("iteration is broken")


def test_container_subclasses_whose_iteration_raises_are_read_through_their_storage() -> None:
    value = _HostileDict(a=_HostileList([1, 2]))
    assert json_problem(value) is None
    plain = to_plain(value)
    assert plain == {"a": [1, 2]} and type(plain) is dict and type(plain["a"]) is list
    assert json_problem(_HostileList([float("nan")])) == "value at [0] is NaN"


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ((1, 2), [1, 2]),
        ({"a": (1, (2, 3))}, {"a": [1, [2, 3]]}),
        (OrderedDict(b=1, a=2), {"b": 1, "a": 2}),
        (Color.RED, 1),
        (Shouty("abc"), "abc"),
        ({Shouty("key"): Shouty("v")}, {"key": "v"}),
        (None, None),
        (True, True),
        (1.5, 1.5),
    ],
)
def test_to_plain_returns_plain_json_types(value: object, plain: object) -> None:
    result = to_plain(value)
    assert result == plain
    assert json.loads(json.dumps(result)) == plain
    assert type(result) is type(plain)


@pytest.mark.parametrize(("value", "plain"), [
    ((1, 2), [1, 2]),
    ({"a": (1, (2, 3)), "b": {"c": [OrderedDict(d=Color.RED)]}}, {"a": [1, [2, 3]], "b": {"c": [{"d": 1}]}}),
    ({Shouty("key"): Shouty("v"), "z": None, "y": 1.5, "x": True}, {"key": "v", "z": None, "y": 1.5, "x": True}),
    ([[], {}, [[]]], [[], {}, [[]]]),
    (Color.RED, 1),
])
def test_checked_plain_copies_as_to_plain_does_in_the_same_walk(value: object, plain: object) -> None:
    problem, copy = checked_plain(value)
    assert problem is None
    assert copy == plain and type(copy) is type(plain)
    assert json.dumps(copy) == json.dumps(to_plain(value))


def test_checked_plain_reports_the_problem_json_problem_reports() -> None:
    value = {"a": [1, {"b": float("nan")}]}
    assert checked_plain(value) == (json_problem(value), None)
    assert json_problem(value) == "value at a[1].b is NaN"


def test_a_walk_pauses_every_slice_of_items_so_an_event_loop_can_run_between() -> None:
    value = [[0] * 1000 for _ in range(3 * STEP_ITEMS // 1000)]
    steps = checked_steps(value, copy=True)
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            problem, copy = done.value
            break
        pauses += 1
    assert problem is None and copy == value and copy is not value
    assert pauses == (len(value) + len(value) * 1000 + 1) // STEP_ITEMS


def test_a_container_whose_items_alone_exceed_the_limit_is_refused_before_its_first_item(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonvalues, "MAX_JSON_CHARS", 1000)
    steps = checked_steps([{"a": 1}, [None] * 600], copy=False)
    with pytest.raises(StopIteration) as done:
        next(steps)  # no pause: the list of 600 is refused by its length
    assert done.value.value == ("is larger than 0 MiB as JSON", None)
    assert json_problem([None] * 240) is None
    assert json_problem(["x" * 1000]) == "is larger than 0 MiB as JSON"


def test_to_plain_copies_containers() -> None:
    original = {"a": [1, 2]}
    copy = to_plain(original)
    copy["a"].append(3)
    assert original == {"a": [1, 2]}


def test_to_plain_keeps_enum_out_of_json_output() -> None:
    assert json.dumps(to_plain({"c": Color.RED})) == '{"c": 1}'


def test_to_plain_rejects_unsupported_types() -> None:
    with pytest.raises(TypeError, match="unsupported type set"):
        to_plain({"a": {1}})


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (True, True, True),
        (True, False, False),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (0.0, False, False),
        (1, 1.0, True),
        (0, -0.0, True),
        (2**53 + 1, float(2**53), False),
        (None, None, True),
        (None, 0, False),
        (None, "", False),
        (None, False, False),
        ("1", 1, False),
        ("a", "a", True),
        ([1, 2], [1, 2], True),
        ([1, 2], (1, 2), True),
        ([1, 2], [2, 1], False),
        ([1], [1, 1], False),
        ([True], [1], False),
        ([1], [1.0], True),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": [1, {"b": 2.0}]}, {"a": [1.0, {"b": 2}]}, True),
        ({}, [], False),
        ([], None, False),
    ],
)
def test_json_equal(a: object, b: object, equal: bool) -> None:
    assert json_equal(a, b) is equal
    assert json_equal(b, a) is equal


CANONICAL_SAMPLES: list[object] = [
    None,
    True,
    False,
    0,
    0.0,
    -0.0,
    1,
    1.0,
    2,
    2.5,
    2**53,
    2**53 + 1,
    float(2**53),
    "",
    "1",
    "true",
    "null",
    [],
    [1],
    [1.0],
    [True],
    (1,),
    [1, 2],
    [2, 1],
    [[1]],
    {},
    {"a": 1},
    {"a": 1.0},
    {"a": True},
    {"a": 1, "b": 2},
    {"b": 2, "a": 1},
    {"a": [1, {"b": None}]},
    {"a": [1.0, {"b": None}]},
    [{"a": 1}],
    [["a", 1]],
    ["a", 1],
]


def test_canonical_key_agrees_with_json_equal() -> None:
    for a, b in itertools.product(CANONICAL_SAMPLES, repeat=2):
        same_key = canonical_key(a) == canonical_key(b)
        assert same_key is json_equal(a, b), (a, b)
        if same_key:
            assert hash(canonical_key(a)) == hash(canonical_key(b)), (a, b)


def test_canonical_key_collapses_set_members() -> None:
    keys = {canonical_key(v) for v in [1, 1.0, True, {"a": 1, "b": 2}, {"b": 2, "a": 1.0}]}
    assert len(keys) == 3


def test_canonical_key_rejects_unsupported_types() -> None:
    with pytest.raises(TypeError):
        canonical_key({1, 2})


def path_of(*steps: str | int) -> JsonPath | None:
    path: JsonPath | None = None
    for step in steps:
        path = (path, step)
    return path


@pytest.mark.parametrize(
    ("steps", "text"),
    [
        ((), ""),
        (("result",), "result"),
        (("result", "score"), "result.score"),
        (("items", 2), "items[2]"),
        ((0, "label"), "[0].label"),
        (("a b",), '["a b"]'),
        (("x", "0"), 'x["0"]'),
        (("x", ""), 'x[""]'),
        (("x", 'q"t'), 'x["q\\"t"]'),
    ],
)
def test_format_path(steps: tuple[str | int, ...], text: str) -> None:
    assert format_path(path_of(*steps)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (None, "null"),
        ("yes", '"yes"'),
        (["fastener"], '["fastener"]'),
        ({"a": (1, 2)}, '{"a":[1,2]}'),
        ("ü", '"ü"'),
    ],
)
def test_render_json_is_compact(value: object, text: str) -> None:
    assert render_json(value) == text


def test_render_json_truncates_long_values() -> None:
    text = render_json(list(range(1000)), limit=50)
    assert len(text) == 50
    assert text.endswith("…")


def test_render_json_falls_back_to_repr_for_non_json_values() -> None:
    assert render_json({1, 2}) == "{1, 2}"
