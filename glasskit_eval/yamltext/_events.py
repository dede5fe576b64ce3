"""Values and lines built straight from the parser's events, for documents that need no node graph.

PyYAML's composer makes a Node with two Marks and a resolver call for every value before
``source`` walks the graph: for a case file of 100,000 events that is most of a six-second
load. A document without anchors, aliases, merge keys or explicit tags needs none of it:
each value and its line follow from its own events, with the loader's own resolver and
safe constructors. Anything else, and anything ``source`` would report as a problem, makes
:func:`values_and_lines` return None: ``source`` then takes the node path, so the value,
the lines and the problems are always the node path's, only sooner.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.events import (
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)

PathKey = tuple[str | int, ...]

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
#: Plain tags ``source`` builds with the safe constructor itself (timestamps and the rest go
#: through ``construct_object``, and merge or value markers are errors: the node path does them).
_CONSTRUCTED = frozenset(f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null"))
#: Numbers that ``int()`` and ``float()`` read as the safe constructor does (it strips ``_``,
#: reads ``0`` prefixes as octal, ``:`` as base 60, ``.inf``): only these skip it.
_DECIMAL_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_DECIMAL_FLOAT = re.compile(r"[-+]?[0-9]*\.[0-9]*(?:[eE][-+][0-9]+)?\Z")
_NO_KEY: Any = object()


class _NodePath(Exception):
    """The document needs the node path: an alias, a tag, deep nesting, or a problem to report."""


def values_and_lines(loader: Any, nesting: int, most: int) -> tuple[Any, dict[PathKey, int]] | None:
    """The document's value and the line of every value, as ``source``'s walker gives them; None
    where only the node path can say (also on any syntax error, which it words).

    ``loader`` is a fresh safe loader over the text (its parser, resolver and constructors);
    ``nesting`` and ``most`` are the walker's limits, beyond which it reports problems.
    """
    try:
        return _build(loader, nesting, most)
    except (_NodePath, yaml.YAMLError, ValueError, OverflowError):
        return None


def _build(loader: Any, nesting: int, most: int) -> tuple[Any, dict[PathKey, int]]:
    get = loader.get_event
    if type(get()) is not StreamStartEvent:
        raise _NodePath
    event = get()
    if type(event) is StreamEndEvent:
        return None, {}
    if type(event) is not DocumentStartEvent:
        raise _NodePath
    seen: dict[str, Any] = {}
    read = _plain_values(loader, seen)
    lines: dict[PathKey, int] = {}
    # The open collection (None at the top), its path, whether a mapping, and a mapping's pending
    # key with its line; the enclosing ones on the stack. Locals: this loop runs once per event.
    into: Any = None
    at: PathKey = ()
    is_map = False
    key: Any = _NO_KEY
    key_line = 0
    stack: list[tuple[Any, PathKey, bool]] = []
    root: Any = None
    while True:
        event = get()
        kind = type(event)
        if kind is MappingEndEvent or kind is SequenceEndEvent:
            into, at, is_map = stack.pop()
            if not stack:
                break
            continue
        if event.anchor is not None or event.tag is not None:
            raise _NodePath  # also an alias, whose anchor is set
        if kind is ScalarEvent:
            value = event.value
            if event.implicit[0]:
                text = value
                value = seen.get(text, _NO_KEY)
                if value is _NO_KEY:
                    value = read(text)
            if type(value) is str and not value.isascii() and not is_text(value):
                raise _NodePath
            if is_map and key is _NO_KEY:
                # A key: the walker refuses all but new strings (and `<<` resolves to a merge).
                if type(value) is not str or value in into:
                    raise _NodePath
                key, key_line = value, event.start_mark.line + 1
                continue
        elif is_map and key is _NO_KEY:
            raise _NodePath  # a collection as a key (or an event no document has here)
        elif kind is MappingStartEvent:
            value = {}
        elif kind is SequenceStartEvent:
            value = []
        else:
            raise _NodePath
        if is_map:
            path: PathKey = (*at, key)
            lines[path] = key_line  # a mapping value is located at its key's line
            into[key] = value
            key = _NO_KEY
        elif stack:
            path = (*at, len(into))
            lines[path] = event.start_mark.line + 1
            into.append(value)
        else:
            path = ()
            lines[path] = event.start_mark.line + 1
            root = value
            if kind is ScalarEvent:
                break  # the document is one scalar
        if kind is not ScalarEvent:
            if len(stack) + 1 >= nesting:
                raise _NodePath
            stack.append((into, at, is_map))
            into, at, is_map = value, path, kind is MappingStartEvent
    if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent or len(lines) > most:
        raise _NodePath  # a second document, or more values than the walker builds
    return root, lines


def _plain_values(loader: Any, seen: dict[str, Any]) -> Any:
    """What a plain (unquoted) scalar's text is read as: the loader's resolver and safe constructors,
    once per text (kept in ``seen``)."""
    resolve = loader.resolve
    constructors = loader.yaml_constructors
    implicit = (True, False)

    def read(text: str) -> Any:
        tag = resolve(yaml.ScalarNode, text, implicit)
        value: Any
        if tag == _STR:
            value = text
        elif tag == _FLOAT and _DECIMAL_FLOAT.match(text):
            value = float(text)
        elif tag == _INT and _DECIMAL_INT.match(text):
            value = int(text)  # past 4300 digits a ValueError: the walker reports it
        elif tag in _CONSTRUCTED:
            value = constructors[tag](loader, yaml.ScalarNode(tag, text))
        else:
            raise _NodePath
        seen[text] = value
        return value

    return read


def is_text(value: str) -> bool:
    """Whether ``value`` can be written as UTF-8 (no lone surrogates from an escape)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
