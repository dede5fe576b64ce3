"""Composed YAML nodes: an alias-aware composer, type-strict comparison, style detection.

Helpers for ``yamlmorph``, which edits YAML text guided by PyYAML's node marks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from ._render import Style
from .source import loader_classes


class AliasNode(yaml.Node):
    """An ``*alias`` occurrence with its own marks (PyYAML reuses the anchored node)."""

    id = "alias"


def _alias_aware(base: type[Any]) -> type[Any]:
    class _Composer(base):  # type: ignore[misc]
        def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                target = super().compose_node(parent, index)
                assert target is not None
                return AliasNode(target.tag, target.value, event.start_mark, event.end_mark)
            node: yaml.Node | None = super().compose_node(parent, index)
            assert node is not None
            return node

    return _Composer


# libyaml's parser (marks count characters, as PyYAML's do) under the nesting-limited composer:
# a long case file is edited at libyaml's speed without giving up the depth limit.
_COMPOSERS = tuple(_alias_aware(base) for base in loader_classes())


def _first(text: str, loaders: tuple[type[Any], ...], read: Callable[[Any], Any]) -> Any:
    for n, cls in enumerate(loaders):
        loader = cls(text)
        try:
            return read(loader)
        except yaml.YAMLError:
            if n == len(loaders) - 1:
                raise
        finally:
            loader.dispose()
    raise AssertionError("unreachable")  # pragma: no cover


def compose(text: str) -> yaml.Node | None:
    """The node graph of ``text``, each ``*alias`` its own node with its own marks."""
    node: yaml.Node | None = _first(text, _COMPOSERS, lambda loader: loader.get_single_node())
    return node


def load_data(text: str) -> Any:
    """``yaml.safe_load(text)``, at libyaml's speed when PyYAML has it, with the nesting limit."""
    return _first(text, loader_classes(), lambda loader: loader.get_single_data())


def canon(value: Any) -> Any:
    """A hashable, type-strict form: 1, 1.0 and True differ; key order does not matter."""
    if isinstance(value, Mapping):
        items = sorted(((repr(canon(k)), canon(v)) for k, v in value.items()), key=lambda kv: kv[0])
        return ("map", tuple(items))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(canon(v) for v in value))
    if isinstance(value, float):
        return ("float", repr(value))
    if value is None or isinstance(value, (bool, int, str)):
        return (type(value).__name__, value)
    return (type(value).__name__, repr(value))


def same(a: Any, b: Any) -> bool:
    """``canon(a) == canon(b)``, without building either: a long list is compared item by item."""
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        if not all(type(k) is str for k in a):
            return bool(canon(a) == canon(b))  # 1, 1.0 and True are one dict key, but not one YAML key
        return all(k in b and same(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is not type(b):
        return False
    if a is None or type(a) in (bool, int, str):
        return bool(a == b)
    return repr(a) == repr(b)


def is_block_map(node: yaml.Node) -> bool:
    return isinstance(node, yaml.MappingNode) and not isinstance(node, AliasNode) and not node.flow_style


def is_block_seq(node: yaml.Node) -> bool:
    return isinstance(node, yaml.SequenceNode) and not isinstance(node, AliasNode) and not node.flow_style


def is_flow(node: yaml.Node) -> bool:
    return isinstance(node, yaml.CollectionNode) and not isinstance(node, AliasNode) and bool(node.flow_style)


def is_block_scalar(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")


def detect_style(root: yaml.Node) -> Style:
    """Indentation habits of the file, from its block collections; defaults where it has none."""
    map_indents: Counter[int] = Counter()
    seq_indents: Counter[int] = Counter()
    offsets: Counter[int] = Counter()
    flow_maps = block_maps = 0
    seen: set[int] = set()

    def walk(node: yaml.Node, in_block: bool) -> None:
        nonlocal flow_maps, block_maps
        if isinstance(node, AliasNode) or id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if in_block and isinstance(v, yaml.MappingNode) and not isinstance(v, AliasNode):
                    if v.flow_style:
                        flow_maps += 1
                    else:
                        block_maps += 1
                if is_block_map(node) and is_block_map(v) and v.value:
                    map_indents[v.value[0][0].start_mark.column - k.start_mark.column] += 1
                if is_block_map(node) and is_block_seq(v):
                    seq_indents[v.start_mark.column - k.start_mark.column] += 1
                walk(v, in_block or (isinstance(k, yaml.ScalarNode) and k.value == "samples"))
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                if is_block_seq(node) and is_block_map(item) and item.value:
                    offset = item.value[0][0].start_mark.column - node.start_mark.column
                    if offset > 0:
                        offsets[offset] += 1
                walk(item, in_block)

    walk(root, False)
    def pick(counter: Counter[int], default: int) -> int:
        return counter.most_common(1)[0][0] if counter else default

    return Style(
        map_indent=max(1, pick(map_indents, 2)),
        seq_indent=max(0, pick(seq_indents, 0)),
        item_offset=max(2, pick(offsets, 2)),
        flow_mappings=flow_maps > block_maps,
    )
