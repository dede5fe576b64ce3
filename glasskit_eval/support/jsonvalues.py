"""JSON-like values: the checks, copies, equality and set keys every comparison relies on.

A value is JSON-like when it is ``None``, a boolean, an int, a finite float, a string
UTF-8 can encode (no lone surrogates), a list or tuple of JSON-like values, or a dict
with such string keys and JSON-like values. Subclasses of list, tuple and dict are read
through their base type's storage, so their own methods never run (nor raise).
Adapter observations and ``expect`` values must pass :func:`json_problem` before they
reach :func:`to_plain`, :func:`json_equal`, :func:`canonical_key` or the comparators;
those functions trust that check and recurse freely, which is safe because it bounds
the nesting depth at :data:`MAX_DEPTH`.

Equality follows JSON rather than Python: booleans never equal numbers (Python says
``True == 1``), ints and floats compare by exact numeric value, arrays are ordered and
objects compare by key regardless of insertion order.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Hashable
from typing import Any, TypeAlias

__all__ = [
    "MAX_DEPTH",
    "JsonPath",
    "canonical_key",
    "checked_plain",
    "checked_steps",
    "format_path",
    "json_equal",
    "json_problem",
    "path_step",
    "render_json",
    "to_plain",
    "type_name",
    "walk_step",
]

#: Containers may nest at most this deep. Deeper values are JSON in principle, but
#: ``yaml.safe_dump`` (used when seeding case files) hits the default recursion limit
#: at about 330 levels, and every recursive helper here must stay well inside it.
MAX_DEPTH = 100

#: A value larger than this as JSON text (counted roughly: string lengths, a few characters per
#: other item) is refused: an adapter's 300 MB answer would otherwise be copied into every report.
MAX_JSON_CHARS = 64 * 1024 * 1024

# Only ints large enough to risk Python's int-to-str digit limit are converted to
# check them; below this, str() can never hit the limit (3.11's minimum is 640 digits).
_LARGE_INT_BITS = 2000

_PATH_DISPLAY_LIMIT = 120

#: A location inside a value, as a linked list of steps ending at the root (``None``);
#: a step is an object key (str) or an array index (int). Linked rather than joined
#: into strings so walks build no text for the values that turn out fine.
JsonPath: TypeAlias = tuple["JsonPath | None", "str | int"]


def json_problem(value: object) -> str | None:
    """Say why ``value`` is not JSON-like, or return None when it is.

    The reason names the offending location, for example ``value at result.score is
    NaN`` or ``object key 1 at result is not a string``. The walk is iterative, so
    neither self-referencing containers nor very deep nesting can crash the caller.
    """
    if type(value) is str and str.isascii(value) and len(value) < MAX_JSON_CHARS - 2:
        return None  # most expectations: a short label, checked without starting a walk
    problem, _copy = _finish(checked_steps(value, copy=False))
    return problem


def checked_plain(value: object) -> tuple[str | None, Any]:
    """:func:`json_problem` and :func:`to_plain` in one walk: ``(problem, None)`` or ``(None, copy)``."""
    return _finish(checked_steps(value, copy=True))


def walk_step(steps: Generator[None, None, tuple[str | None, Any]]) -> tuple[str | None, Any] | None:
    """Run a :func:`checked_steps` walk to its next pause: None while it goes on, its result once done."""
    try:
        next(steps)
    except StopIteration as done:
        result: tuple[str | None, Any] = done.value
        return result
    return None


def _finish(steps: Generator[None, None, tuple[str | None, Any]]) -> tuple[str | None, Any]:
    while (result := walk_step(steps)) is None:
        pass
    return result


#: Items a walk visits between two pauses of :func:`checked_steps`.
STEP_ITEMS = 1 << 14

_END = object()


def checked_steps(value: object, *, copy: bool) -> Generator[None, None, tuple[str | None, Any]]:
    """The walk behind :func:`json_problem`, pausing (yielding) every :data:`STEP_ITEMS` items.

    It returns ``(problem, None)`` or ``(None, plain copy)`` (the copy only with ``copy``).
    A caller on an event loop lets the loop run at each pause, so a huge value an adapter
    returned is checked without holding up Ctrl+C; containers are read lazily and a
    container whose items alone exceed :data:`MAX_JSON_CHARS` is refused before its first item.
    """
    # A frame is a container being read: (its items, its path, its depth, its id, its copy).
    # Ids on the frames (the root-to-node chain) detect cycles, while the same container
    # reached twice through different parents is legitimately shared.
    frames: list[tuple[Any, JsonPath | None, int, int, Any]] = []
    ancestors: set[int] = set()
    root: list[Any] = []
    size = 0
    visited = 0
    item: object = value
    path: JsonPath | None = None
    depth = 0
    parent: Any = root
    slot: str | int = 0
    while True:
        visited += 1
        if visited % STEP_ITEMS == 0:
            yield
        # Counted per occurrence: one string shared a million times is a million copies in JSON.
        # Strings are measured before they are checked: a 300 MB string is never encoded.
        size += str.__len__(item) + 2 if isinstance(item, str) else 4
        if size > MAX_JSON_CHARS:
            return f"is larger than {MAX_JSON_CHARS >> 20} MiB as JSON", None
        problem = _scalar_problem(item)
        if problem is not None:
            return _at(problem, path), None
        plain: Any = None
        if isinstance(item, (list, tuple, dict)):
            ident = id(item)
            if ident in ancestors:
                return _at("refers back to a container that encloses it (cycle)", path), None
            if depth >= MAX_DEPTH:
                return _at(f"is nested more than {MAX_DEPTH} levels deep", path), None
            # Every item adds at least two characters (a digit or "" and a separator).
            if size + 2 * len(item) > MAX_JSON_CHARS:
                return f"is larger than {MAX_JSON_CHARS >> 20} MiB as JSON", None
            ancestors.add(ident)
            if isinstance(item, dict):
                plain = {} if copy else None
                frames.append((iter(_items(item)), path, depth, ident, plain))
            else:
                plain = [] if copy else None
                frames.append((enumerate(_elements(item)), path, depth, ident, plain))
        elif copy:
            plain = _plain_scalar(item)
        if copy:
            if isinstance(parent, dict):
                parent[slot] = plain
            else:
                parent.append(plain)
        # The next item in document order: the first unread one of the innermost open container.
        while True:
            if not frames:
                return None, root[0] if copy else None
            items, path, depth, ident, parent = frames[-1]
            try:
                step: Any = next(items, _END)
            except RuntimeError:  # another thread resized it while it was read
                return _at("changed while it was being read", path), None
            if step is _END:
                frames.pop()
                ancestors.discard(ident)
                continue
            key, item = step
            break
        if isinstance(items, enumerate):
            slot = key
        else:
            if not isinstance(key, str):
                where = f" at {format_path(path)}" if path is not None else ""
                return f"object key {_short_repr(key)}{where} is not a string", None
            key_problem = _string_problem(key)
            if key_problem is not None:
                where = f" at {format_path(path)}" if path is not None else ""
                return f"object key{where} {key_problem}", None
            size += str.__len__(key) + 3
            slot = str.__str__(key)
        path = (path, slot)
        depth += 1


def _plain_scalar(value: object) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    assert isinstance(value, str)
    # str() would honour a subclass's __str__; this returns the characters as stored.
    return str.__str__(value)


def _items(value: dict[Any, Any]) -> Any:
    # The base type's storage, not a subclass's items()/__iter__: those may raise or answer
    # differently the second time, and to_plain must copy exactly what was checked.
    return dict.items(value)


def _elements(value: list[Any] | tuple[Any, ...]) -> Any:
    return list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)


def _string_problem(value: str) -> str | None:
    if str.isascii(value):
        return None
    try:
        str.encode(value, "utf-8")
    except UnicodeEncodeError as exc:
        code = ord(str.__getitem__(value, exc.start))
        return (f"is a string with a lone surrogate (U+{code:04X}) at character {exc.start}, "
                "which UTF-8 (and so JSON) cannot encode")
    return None


def _scalar_problem(value: object) -> str | None:
    if isinstance(value, str):
        return _string_problem(value)
    if value is None or isinstance(value, (bool, list, tuple, dict)):
        return None
    if isinstance(value, int):
        if value.bit_length() > _LARGE_INT_BITS:
            try:
                str(value)
            except ValueError:
                return "is an integer with too many digits to write as JSON"
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return "is NaN"
        if math.isinf(value):
            return "is infinite"
        return None
    return f"has unsupported type {type(value).__name__}"


def _at(problem: str, path: JsonPath | None) -> str:
    if path is None:
        return f"value {problem}"
    return f"value at {format_path(path)} {problem}"


def format_path(path: JsonPath | None) -> str:
    """Render a path like ``result.items[2]["odd key"]`` (empty for the root)."""
    steps: list[str | int] = []
    node = path
    while node is not None:
        node, step = node
        steps.append(step)
    text = "".join(path_step(step, n == 0) for n, step in enumerate(reversed(steps)))
    if len(text) > _PATH_DISPLAY_LIMIT:
        half = _PATH_DISPLAY_LIMIT // 2
        text = f"{text[:half]}…{text[-half:]}"
    return text


def path_step(step: str | int, first: bool) -> str:
    """One step of a path as messages write it: ``[2]``, ``.key`` (``key`` when first), ``["odd key"]``."""
    if isinstance(step, int):
        return f"[{step}]"
    if step.isidentifier():
        return step if first else f".{step}"
    import json  # only for odd keys: json costs a millisecond at start-up

    return f"[{json.dumps(step, ensure_ascii=False)}]"


def type_name(value: object, *, array: str = "a list", mapping: str = "a mapping", other: str | None = None) -> str:
    """How a message names ``value``'s type; ``array`` and ``mapping`` name the containers (YAML's words by
    default), ``other`` anything else (default: the Python type's name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return array
    if isinstance(value, dict):
        return mapping
    return other if other is not None else type(value).__name__


def _short_repr(value: object, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_plain(value: Any) -> Any:
    """Return a copy made of plain ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``.

    Tuples become lists and subclasses (``IntEnum``, ``OrderedDict``, numpy's
    ``float64``) become their base types, so ``json.dumps`` and ``yaml.safe_dump``
    accept the result. The value must already have passed :func:`json_problem`.
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return _plain_scalar(value)
    if isinstance(value, (list, tuple)):
        return [to_plain(item) for item in _elements(value)]
    if isinstance(value, dict):
        return {str.__str__(key): to_plain(item) for key, item in _items(value)}
    raise TypeError(f"value has unsupported type {type(value).__name__}")


def json_equal(a: object, b: object) -> bool:
    """JSON equality: booleans only equal booleans, ``1 == 1.0``, arrays ordered."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        # Python compares int and float exactly, so 2**53 + 1 != 2.0**53 as it should.
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    return False


def canonical_key(value: object) -> Hashable:
    """A hashable stand-in for ``value`` that is equal exactly when :func:`json_equal` is.

    Each kind is tagged so ``True`` never collides with ``1``. Numbers keep their
    Python value because ``1 == 1.0`` and ``hash(1) == hash(1.0)`` already hold.
    """
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, str):
        return ("string", str.__str__(value))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(canonical_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, canonical_key(item)) for key, item in value.items()))
    raise TypeError(f"value has unsupported type {type(value).__name__}")


def render_json(value: object, limit: int = 200) -> str:
    """Compact JSON for a failure reason, cut to ``limit`` characters."""
    import json

    try:
        text = json.dumps(to_plain(value), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        # Reasons are best effort; an unrenderable value must not turn a failed
        # comparison into a crash.
        text = _short_repr(value, limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"
