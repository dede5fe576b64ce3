"""Load YAML into plain values while remembering the line of every value.

Validation messages must point at ``file:line: targets.step_1.samples[2].range``,
so we walk the composed node graph ourselves instead of calling ``safe_load``:
that keeps each node's line and lets us refuse duplicate mapping keys, which
PyYAML would otherwise silently overwrite. A document that needs no node graph (no
anchors, aliases, merge keys or tags, nothing to report) is read straight from the
parser's events instead (``_events``), to the same value and lines, several times sooner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from ..errors import Problem
from . import _events
from ._events import is_text

PathKey = tuple[str | int, ...]

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null"))


def format_path(path: PathKey) -> str:
    """Render ``("targets", "a", "samples", 2, "range")`` as ``targets.a.samples[2].range``."""
    from ..support.outside import inline  # a key is outside text: a line end in it stays an escape

    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{inline(part)}" if out else inline(str(part))
    return out


@dataclass(slots=True)
class YamlDocument:
    """A loaded YAML document: its value and the line (1-based) of every node."""

    file: str
    value: Any
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line(self, path: PathKey) -> int | None:
        # Fall back to the closest enclosing node that we know the line of.
        while True:
            if path in self.lines:
                return self.lines[path]
            if not path:
                return None
            path = path[:-1]

    def problem(self, path: PathKey, message: str) -> Problem:
        return Problem(self.file, format_path(path), message, self.line(path))


#: Values a document may expand to. Aliases are expanded per use, so a few lines of
#: nested aliases ("billion laughs") could otherwise build billions of values; the
#: largest legitimate case (10,000 samples, each a small mapping) is far below this.
MAX_VALUES = 1_000_000

#: Nesting deeper than this is refused before Python's recursion limit is reached.
MAX_NESTING = 200


class _TooLarge(Exception):
    pass


class _NestingLimit(yaml.composer.Composer):
    """A composer that refuses deep nesting.

    PyYAML composes collections recursively; without this a few thousand ``[``
    would end in a slow RecursionError instead of a located problem.
    """

    depth = 0
    peek_event: Callable[[], Any]  # from the parser it is mixed with

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise yaml.composer.ComposerError(
                    None, None, f"collections are nested more than {MAX_NESTING} levels deep",
                    self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _PythonLoader(_NestingLimit, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader with the nesting limit."""


def _loader_class() -> type[_PythonLoader]:
    """libyaml's parser under our composer when PyYAML has it; pure Python otherwise.

    libyaml scans and parses five to eight times faster, as a state machine (no
    recursion), and the Python composer above still builds the nodes, so the nesting
    limit holds (``CSafeLoader`` would compose in C, recursively). Values and lines are
    the same either way, and syntax errors are reported by the pure-Python parser.
    """
    try:
        from yaml._yaml import CParser
    except ImportError:
        return _PythonLoader

    class _LibyamlLoader(_NestingLimit, CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _NestingLimit.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    return cast("type[_PythonLoader]", _LibyamlLoader)  # the same interface


_Loader = _loader_class()


def loader_classes() -> tuple[type[_PythonLoader], ...]:
    """Safe loaders with the nesting limit: the fast one first, then the pure-Python one when they differ.

    Whatever parses a whole case file uses these: a hostile file stops at ``MAX_NESTING`` levels
    whichever parser reads it. On a syntax error the pure-Python parser reads the text again, so
    errors are worded the same with or without libyaml.
    """
    return (_Loader,) if _Loader is _PythonLoader else (_Loader, _PythonLoader)


class _Walker:
    def __init__(self, loader: _PythonLoader, doc: YamlDocument) -> None:
        self.loader = loader
        self.doc = doc
        self.problems: list[Problem] = []
        self.values = 0
        # Nodes being built right now: reaching one again means an alias refers to
        # a collection that contains it, which no JSON-like value can express.
        self.open: set[int] = set()

    def problem(self, path: PathKey, message: str, node: yaml.Node) -> None:
        self.problems.append(Problem(self.doc.file, format_path(path), message, node.start_mark.line + 1))

    def build(self, node: yaml.Node, path: PathKey, line: int | None = None) -> Any:
        self.values += 1
        if self.values > MAX_VALUES:
            raise _TooLarge
        # A mapping value is located at its key's line: `bogus:` rather than the
        # first line of the nested block below it.
        self.doc.lines[path] = line if line is not None else node.start_mark.line + 1
        if not isinstance(node, yaml.CollectionNode) or node.tag not in (_MAP_TAG, _SEQ_TAG):
            # Scalars and explicitly tagged nodes (!!set, !!timestamp, ...) use PyYAML's
            # safe constructors; non-JSON results are rejected later by the validators.
            value = self.scalar(node, path)
            return None if value is _REPORTED else value
        if id(node) in self.open:
            self.problem(path, "an alias refers to a collection that contains it; "
                         "YAML values here must not be recursive", node)
            return None
        if len(path) >= MAX_NESTING:
            self.problem(path, f"values are nested more than {MAX_NESTING} levels deep", node)
            return None
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self.build_mapping(node, path)
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def build_mapping(self, node: yaml.MappingNode, path: PathKey) -> dict[str, Any]:
        # `<<: *alias` merges are resolved here rather than by PyYAML's flatten_mapping,
        # whose precedence changed between releases: keys written in this mapping win,
        # then earlier merge sources over later ones (the YAML merge-key rule).
        sources: list[yaml.Node] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                sources.extend(value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node])
            else:
                own.append((key_node, value_node))
        result: dict[str, Any] = {}
        here = self.doc.lines.get(path)
        for source in reversed(sources):  # the earliest source is applied last and wins
            merged = self.build(source, path, here)
            if isinstance(merged, dict):
                result.update(merged)
            elif merged is not None or isinstance(source, yaml.ScalarNode):
                self.problem(path, "a merge key (<<) needs a mapping or a list of mappings", source)
        written: set[str] = set()
        for key_node, value_node in own:
            key = self.key(key_node, path)
            if key is None:
                continue
            child_path = (*path, key)
            if key in written:
                self.problem(child_path, "duplicate key; YAML would silently keep only the last value",
                             key_node)
                continue
            written.add(key)
            result[key] = self.build(value_node, child_path, key_node.start_mark.line + 1)
        return result

    def scalar(self, node: yaml.Node, path: PathKey) -> Any:
        try:
            if isinstance(node, yaml.ScalarNode) and node.tag in _PLAIN_TAGS:
                # The safe constructor itself, without construct_object's bookkeeping:
                # this is most of the time spent on a 10,000-sample case file.
                value = self.loader.yaml_constructors[node.tag](self.loader, node)
            else:
                value = self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as exc:
            # Python refuses integers of more than 4300 digits (and odd timestamps) outright.
            reason = "a number with too many digits" if "digits" in str(exc) else f"unreadable ({exc})"
            self.problem(path, f"this value is {reason}; shorten it or quote it as a string", node)
            return _REPORTED
        if isinstance(value, str) and not is_text(value):
            self.problem(path, "this string holds a lone surrogate escape (like \\ud800), which is not "
                         "text and cannot be written as UTF-8; remove it", node)
            return _REPORTED
        return value

    def key(self, node: yaml.Node, path: PathKey) -> str | None:
        """The key as a string, or None (with a problem) for keys JSON cannot hold."""
        if not isinstance(node, yaml.ScalarNode):
            self.problem(path, "mapping keys must be strings, not lists or mappings", node)
            return None
        key = self.scalar(node, path)
        if key is _REPORTED:
            return None
        if isinstance(key, str):
            return key
        # YAML 1.1 reads unquoted on/off/yes/no as booleans, ~ as null, 1 as a number...
        self.problem((*path, node.value), f"mapping key {node.value!r} is read as "
                     f"{_describe(key)}, but keys must be strings; quote it: \"{node.value}\"", node)
        return None


#: What ``_Walker.scalar`` returns for a value it has already reported as a problem.
_REPORTED: Any = object()


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    return f"a {type(value).__name__}"


def _compose(text: str) -> tuple[_PythonLoader, yaml.Node | None]:
    """The document's node graph, and the loader that built it (the walker uses its constructors)."""
    try:
        loader = _Loader(text)  # the pure-Python reader already checks characters here
        return loader, loader.get_single_node()
    except yaml.YAMLError:
        if _Loader is _PythonLoader:
            raise
        # libyaml words errors its own way and, in newer releases, stops deep nesting
        # itself: the pure-Python parser finds and describes the problem instead, so a
        # broken file reads the same whatever PyYAML build is installed.
        loader = _PythonLoader(text)
        return loader, loader.get_single_node()


def syntax_problem(file: str, text: str, exc: yaml.MarkedYAMLError) -> Problem:
    """A syntax error with its line and column, the offending line and a caret under the spot.

    A tab in a line's indentation gets its own advice: PyYAML's words for it ("found
    character '\\t' that cannot start any token") do not say what to do.
    """
    mark = exc.problem_mark or exc.context_mark
    what = exc.problem or exc.context or str(exc)
    if mark is None:
        return Problem(file, "", f"invalid YAML: {what}")
    lines = text.splitlines()
    if mark.line >= len(lines):
        return Problem(file, "", f"invalid YAML: {what} at the end of the file", mark.line + 1)
    number = mark.line + 1
    source = lines[mark.line]
    message = f"invalid YAML: {what} at line {number}, column {mark.column + 1}"
    indent = source[:len(source) - len(source.lstrip(" \t"))]
    if "\t" in indent:
        message += "; YAML indents with spaces, not tabs: replace the tab with spaces"
    # One character per tab keeps the caret under the spot; a long line is cut around it.
    shown, column = source.replace("\t", " "), mark.column
    if len(shown) > _SNIPPET:
        start = max(0, min(column - _SNIPPET // 2, len(shown) - _SNIPPET))
        shown = ("..." if start else "") + shown[start:start + _SNIPPET] + \
            ("..." if start + _SNIPPET < len(shown) else "")
        column = column - start + (3 if start else 0)
    gutter = " " * len(str(number))
    message += f"\n    {number} | {shown}\n    {gutter} | {' ' * column}^"
    return Problem(file, "", message, number)


#: Characters of the offending line shown under a syntax error.
_SNIPPET = 80


def _from_events(text: str) -> tuple[Any, dict[PathKey, int]] | None:
    """Value and lines without the node graph, for a document that needs none (most case files)."""
    try:
        loader = _Loader(text)
    except (yaml.YAMLError, ValueError):
        return None  # the node path reports it
    try:
        return _events.values_and_lines(loader, MAX_NESTING, MAX_VALUES)
    finally:
        loader.dispose()


def load_yaml_text(text: str, file: str) -> tuple[YamlDocument, list[Problem]]:
    """Parse ``text``; syntax errors come back as problems, never as exceptions."""
    doc = YamlDocument(file=file, value=None)
    built = _from_events(text)
    if built is not None:
        doc.value, doc.lines = built
        return doc, []
    loader: _PythonLoader | None = None
    try:
        loader, node = _compose(text)
        if node is None:
            return doc, []
        walker = _Walker(loader, doc)
        doc.value = walker.build(node, ())
        return doc, walker.problems
    except yaml.MarkedYAMLError as exc:
        return doc, [syntax_problem(file, text, exc)]
    except yaml.YAMLError as exc:
        return doc, [Problem(file, "", f"invalid YAML: {exc}")]
    except _TooLarge:
        return doc, [Problem(file, "", f"the YAML expands to more than {MAX_VALUES:,} values "
                             "(through aliases?); simplify the file")]
    except RecursionError:
        # PyYAML composes nested collections recursively, before our own depth check.
        return doc, [Problem(file, "", "invalid YAML: collections are nested too deeply")]
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml_file(path: Path) -> tuple[YamlDocument, list[Problem]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return YamlDocument(str(path), None), [Problem(str(path), "", "file is not UTF-8 text")]
    except OSError as exc:
        return YamlDocument(str(path), None), [
            Problem(str(path), "", f"cannot read file: {exc.strerror or exc}")
        ]
    return load_yaml_text(text, str(path))
