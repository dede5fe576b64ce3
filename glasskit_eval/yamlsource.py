"""Load YAML into plain values while remembering the line of every value.

Validation messages must point at ``file:line: targets.step_1.samples[2].range``,
so we walk the composed node graph ourselves instead of calling ``safe_load``:
that keeps each node's line and lets us refuse duplicate mapping keys, which
PyYAML would otherwise silently overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import Problem

PathKey = tuple[str | int, ...]

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


def format_path(path: PathKey) -> str:
    """Render ``("targets", "a", "samples", 2, "range")`` as ``targets.a.samples[2].range``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass
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


class _Walker:
    def __init__(self, loader: yaml.SafeLoader, doc: YamlDocument) -> None:
        self.loader = loader
        self.doc = doc
        self.problems: list[Problem] = []

    def build(self, node: yaml.Node, path: PathKey) -> Any:
        self.doc.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP_TAG:
            self.loader.flatten_mapping(node)
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.loader.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    self.problems.append(
                        Problem(self.doc.file, format_path(path), "mapping keys must be strings",
                                key_node.start_mark.line + 1)
                    )
                    continue
                child_path = (*path, key if isinstance(key, str) else str(key))
                if key in result:
                    self.problems.append(
                        Problem(self.doc.file, format_path(child_path),
                                "duplicate key; YAML would silently keep only the last value",
                                key_node.start_mark.line + 1)
                    )
                    continue
                result[key] = self.build(value_node, child_path)
            return result
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ_TAG:
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        # Scalars and explicitly tagged nodes (!!set, !!timestamp, ...) use PyYAML's
        # safe constructors; non-JSON results are rejected later by the validators.
        return self.loader.construct_object(node, deep=True)


def load_yaml_text(text: str, file: str) -> tuple[YamlDocument, list[Problem]]:
    """Parse ``text``; syntax errors come back as problems, never as exceptions."""
    doc = YamlDocument(file=file, value=None)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return doc, []
        walker = _Walker(loader, doc)
        doc.value = walker.build(node, ())
        return doc, walker.problems
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        message = f"invalid YAML: {exc.problem or exc.context or exc}"
        return doc, [Problem(file, "", message, line)]
    except yaml.YAMLError as exc:
        return doc, [Problem(file, "", f"invalid YAML: {exc}")]
    finally:
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
