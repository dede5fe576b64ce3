"""Field paths and the six comparison modes, as plain functions over JSON-like values.

Both sides must already have passed :func:`jsonvalues.json_problem`; tuples are
accepted wherever arrays are, so an adapter's raw result can be compared before
:func:`jsonvalues.to_plain` copies it for a report.

A comparison never raises for a mismatch, including a wrong type on the observed
side: it returns a failed :class:`Outcome` whose reason is short enough for a console
line and renders values as compact JSON. Only programming errors (an unknown mode, a
bad tolerance) raise, because the case-file validator rejects those first.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import TypeGuard

from ..support.jsonvalues import JsonPath, canonical_key, format_path, json_equal, render_json
from .modes import MODES, CompareConfig, infer_mode

__all__ = [
    "MODES",
    "CompareConfig",
    "MissingField",
    "Outcome",
    "compare_values",
    "extract_field",
    "infer_mode",
    "what_is_there",
]

# No list is this long, and a longer digit string would trip int()'s digit limit.
_MAX_INDEX_DIGITS = 18


class MissingField(Exception):
    """The configured field path does not exist in the observation."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.reason = f"adapter observation is missing configured field: {field}"
        super().__init__(self.reason)


def extract_field(observation: object, field: str | None) -> object:
    """Select the value at a dot-separated ``field`` path; ``None`` selects everything.

    Object keys match by name, so a numeric part such as ``0`` looks up the key
    ``"0"`` in an object. In an array a part must be a nonnegative ASCII integer
    (``detections.0.label``); anything else, such as ``-1``, is treated as missing
    rather than counted from the end, because the spec allows only nonnegative indexes.

    Raises:
        MissingField: a key is absent, an index is out of range or not an integer,
            or the path continues into a scalar.
    """
    if field is None:
        return observation
    current = observation
    for part in field.split("."):
        if isinstance(current, dict):
            if part not in current:
                raise MissingField(field)
            current = current[part]
        elif isinstance(current, (list, tuple)):
            index = _index(part)
            if index is None or index >= len(current):
                raise MissingField(field)
            current = current[index]
        else:
            raise MissingField(field)
    return current


def what_is_there(observation: object, field: str) -> str:
    """Where a ``field`` path stops matching ``observation``, and what is there instead.

    ``at `result` the observation has keys: confidence, opn`` - the keys a user meant to name.
    """
    current = observation
    walked: list[str] = []
    for part in field.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, (list, tuple)) and (index := _index(part)) is not None and index < len(current):
            current = current[index]
        else:
            break
        walked.append(part)
    where = f"at `{'.'.join(walked)}` the observation" if walked else "the observation"
    if isinstance(current, dict):
        keys = sorted(str(k) for k in current)
        shown = ", ".join(keys[:20]) + (f", ... ({len(keys)} keys)" if len(keys) > 20 else "")
        return f"{where} has keys: {shown}" if keys else f"{where} is an empty object"
    if isinstance(current, (list, tuple)):
        return f"{where} is a list of {len(current)} items"
    kind = "null" if current is None else "a boolean" if isinstance(current, bool) else (
        "a number" if isinstance(current, (int, float)) else "a string" if isinstance(current, str) else "a value")
    return f"{where} is {kind}"


def _index(part: str) -> int | None:
    # isdigit() alone would also accept "²" and full-width digits, which int() then
    # either rejects or reads in ways no one writing a field path intends.
    if not (part.isascii() and part.isdigit()):
        return None
    digits = part.lstrip("0") or "0"
    if len(digits) > _MAX_INDEX_DIGITS:
        return None
    return int(digits)


@dataclass(frozen=True)
class Outcome:
    """Whether a sample passed, and if not, why."""

    passed: bool
    reason: str | None = None


def compare_values(expected: object, observed: object, config: CompareConfig) -> Outcome:
    """Compare an observed value with the expectation under ``config.mode``.

    Raises:
        ValueError: the mode is unknown or the tolerance is not a finite number >= 0.
    """
    comparator = _COMPARATORS.get(config.mode)
    if comparator is None:
        raise ValueError(
            f"unknown comparison mode {config.mode!r}; expected one of {', '.join(MODES)}"
        )
    if not _is_number(config.tolerance) or config.tolerance < 0:
        raise ValueError(f"tolerance must be a finite number >= 0, got {config.tolerance!r}")
    reason = comparator(expected, observed, config.tolerance)
    return Outcome(passed=reason is None, reason=reason)


# Each comparator returns None on a match, otherwise the failure reason.
_Comparator = Callable[[object, object, float], "str | None"]


def _compare_exact(expected: object, observed: object, tolerance: float) -> str | None:
    if json_equal(expected, observed):
        return None
    reason = f"expected {render_json(expected)}, observed {render_json(observed)}"
    where = _first_difference(expected, observed, None)
    if where is not None:
        reason += f" (first difference at {format_path(where)})"
    elif _is_bool_vs_number(expected, observed):
        reason += " (booleans never equal numbers)"
    return reason


def _first_difference(a: object, b: object, path: JsonPath | None) -> JsonPath | None:
    # Caller guarantees a and b differ; descend while both sides have the same shape.
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if not json_equal(x, y):
                return _first_difference(x, y, (path, index))
        return path
    if isinstance(a, dict) and isinstance(b, dict):
        for key, value in a.items():
            if key not in b:
                return (path, key)
            if not json_equal(value, b[key]):
                return _first_difference(value, b[key], (path, key))
        for key in b:
            if key not in a:
                return (path, key)
    return path


def _is_bool_vs_number(a: object, b: object) -> bool:
    return (isinstance(a, bool) and _is_number(b)) or (isinstance(b, bool) and _is_number(a))


def _compare_numeric(expected: object, observed: object, tolerance: float) -> str | None:
    if not _is_number(expected):
        return f"expect is not a number: {render_json(expected)}"
    if not _is_number(observed):
        return f"expected a number, observed {render_json(observed)}"
    difference = abs(_exact(observed) - _exact(expected))
    limit = _exact(tolerance)
    if difference <= limit:
        return None
    if limit == 0:
        return f"expected {render_json(expected)}, observed {render_json(observed)}"
    return (
        f"|{render_json(observed)} - {render_json(expected)}| = {_format_exact(difference)}"
        f" exceeds tolerance {render_json(tolerance)}"
    )


def _is_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value)


def _exact(value: float) -> Fraction:
    # Numbers are compared as the shortest decimals that round-trip, which is what
    # the user wrote in YAML and what the JSON report shows. Binary float arithmetic
    # would make |0.7 - 0.8| = 0.10000000000000009 and fail a tolerance of 0.1, and an
    # epsilon would need a magnitude to be relative to; exact rationals need neither.
    if isinstance(value, int):
        return Fraction(value)
    return Fraction(float.__repr__(value))


def _format_exact(value: Fraction) -> str:
    if value.denominator == 1:
        return render_json(value.numerator)
    try:
        return repr(float(value))
    except OverflowError:
        return str(Decimal(value.numerator) / Decimal(value.denominator))


def _compare_json_subset(expected: object, observed: object, tolerance: float) -> str | None:
    return _subset_problem(expected, observed, None)


def _subset_problem(expected: object, observed: object, path: JsonPath | None) -> str | None:
    if isinstance(expected, dict):
        if not isinstance(observed, dict):
            return _located(path, f"expected an object, observed {render_json(observed)}")
        for key, value in expected.items():
            if key not in observed:
                return _located(path, f"missing key {json.dumps(key, ensure_ascii=False)}")
            problem = _subset_problem(value, observed[key], (path, key))
            if problem is not None:
                return problem
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(observed, (list, tuple)):
            return _located(path, f"expected an array, observed {render_json(observed)}")
        unmatched = _unmatched_items(expected, observed)
        if not unmatched:
            return None
        matched = len(expected) - len(unmatched)
        return _located(
            path,
            f"matched {matched} of {len(expected)} expected items one-for-one; "
            f"unmatched: {render_json([expected[i] for i in unmatched])}",
        )
    if json_equal(expected, observed):
        return None
    return _located(path, f"expected {render_json(expected)}, observed {render_json(observed)}")


def _is_subset(expected: object, observed: object) -> bool:
    if isinstance(expected, dict):
        return isinstance(observed, dict) and all(
            key in observed and _is_subset(value, observed[key]) for key, value in expected.items()
        )
    if isinstance(expected, (list, tuple)):
        return isinstance(observed, (list, tuple)) and not _unmatched_items(expected, observed)
    return json_equal(expected, observed)


def _unmatched_items(expected: Sequence[object], observed: Sequence[object]) -> list[int]:
    """Indexes of expected items left over by a maximum one-for-one matching.

    Greedy first-fit is not enough: an observed item that satisfies several expected
    items may be taken by the wrong one. Kuhn's algorithm tries each expected item in
    turn and re-routes earlier matches along an augmenting path when that frees a
    partner, which yields a maximum matching.
    """
    if not expected:
        return []
    # Scalars match by JSON equality, so a hash index finds their partners without
    # scanning; long arrays of tags or ids stay linear instead of quadratic.
    scalar_slots: dict[Hashable, list[int]] | None = None
    candidates: list[list[int]] = []
    for item in expected:
        if isinstance(item, (dict, list, tuple)):
            candidates.append(
                [j for j, candidate in enumerate(observed) if _is_subset(item, candidate)]
            )
            continue
        if scalar_slots is None:
            scalar_slots = {}
            for j, candidate in enumerate(observed):
                if not isinstance(candidate, (dict, list, tuple)):
                    scalar_slots.setdefault(canonical_key(candidate), []).append(j)
        candidates.append(scalar_slots.get(canonical_key(item), []))
    owner: list[int | None] = [None] * len(observed)
    partner: list[int | None] = [None] * len(expected)
    return [i for i in range(len(expected)) if not _augment(i, candidates, owner, partner)]


def _augment(
    start: int,
    candidates: list[list[int]],
    owner: list[int | None],
    partner: list[int | None],
) -> bool:
    # Breadth-first rather than the textbook recursive search, so a long expected
    # array cannot exhaust the interpreter stack.
    reached_from: dict[int, int] = {}
    queue = deque([start])
    while queue:
        item = queue.popleft()
        for slot in candidates[item]:
            if slot in reached_from:
                continue
            reached_from[slot] = item
            holder = owner[slot]
            if holder is not None:
                queue.append(holder)
                continue
            # A free observed item: shift every match along the path back to start.
            free: int | None = slot
            while free is not None:
                claimant = reached_from[free]
                released = partner[claimant]
                owner[free] = claimant
                partner[claimant] = free
                free = released
            return True
    return False


def _located(path: JsonPath | None, message: str) -> str:
    return message if path is None else f"at {format_path(path)}: {message}"


_Items = dict[Hashable, object]


def _on_sets(compare: Callable[[_Items, _Items], str | None]) -> Callable[[object, object, float], str | None]:
    """A set comparison over the distinct items of both arrays (tolerance does not apply)."""

    def run(expected: object, observed: object, tolerance: float) -> str | None:
        items = _set_items(expected, observed)
        return items if isinstance(items, str) else compare(*items)

    return run


def _set_items(expected: object, observed: object) -> tuple[_Items, _Items] | str:
    # Keyed by canonical form so 1 and 1.0 are one element and true and 1 are two;
    # dicts keep the first spelling of each element, in order, for the reason text.
    if not isinstance(expected, (list, tuple)):
        return f"expect is not an array: {render_json(expected)}"
    if not isinstance(observed, (list, tuple)):
        return f"expected an array, observed {render_json(observed)}"
    expected_items: dict[Hashable, object] = {}
    for item in expected:
        expected_items.setdefault(canonical_key(item), item)
    observed_items: dict[Hashable, object] = {}
    for item in observed:
        observed_items.setdefault(canonical_key(item), item)
    return expected_items, observed_items


@_on_sets
def _compare_set_equals(wanted: _Items, seen: _Items) -> str | None:
    missing = [value for key, value in wanted.items() if key not in seen]
    unexpected = [value for key, value in seen.items() if key not in wanted]
    problems = []
    if missing:
        problems.append(f"missing expected items: {render_json(missing)}")
    if unexpected:
        problems.append(f"unexpected observed items: {render_json(unexpected)}")
    return "; ".join(problems) or None


@_on_sets
def _compare_set_contains_any(wanted: _Items, seen: _Items) -> str | None:
    if any(key in seen for key in wanted):
        return None
    if not wanted:
        # "At least one expected item" cannot hold for an empty expectation.
        return "expect is an empty array, so no expected item can be observed"
    return f"observed none of the expected items: {render_json(list(wanted.values()))}"


@_on_sets
def _compare_set_contains_all(wanted: _Items, seen: _Items) -> str | None:
    missing = [value for key, value in wanted.items() if key not in seen]
    if missing:
        return f"missing expected items: {render_json(missing)}"
    return None


_COMPARATORS: dict[str, _Comparator] = {
    "exact": _compare_exact,
    "numeric": _compare_numeric,
    "json_subset": _compare_json_subset,
    "set_equals": _compare_set_equals,
    "set_contains_any": _compare_set_contains_any,
    "set_contains_all": _compare_set_contains_all,
}
