"""Render plain values as YAML text that loads back to exactly the same value.

Used by the minimal-diff case-file writer (``yamledit``) for the blocks it has
to write anew. Plain values only: null, booleans, ints, floats, strings, lists
and mappings. Strings that would resolve to something else (``"1.0"``,
``"yes"``, ``"null"``, ``"a: b"``) are quoted; floats use ``repr`` so ``0.1``
stays ``0.1``; unicode is written as is, only unprintable characters are
escaped.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

# Characters that end or start structure inside flow collections; a plain
# scalar holding one of them must be quoted there even if it is fine in a block.
_FLOW_INDICATORS = frozenset(",[]{}:#")
# YAML line breaks besides \n and \r; they may not appear raw inside a quoted line.
_EXTRA_BREAKS = frozenset("\x85\u2028\u2029\ufeff")


@dataclass(frozen=True)
class Style:
    """Indentation and style of the file being edited, so new text looks native."""

    #: child key column minus parent key column of nested block mappings
    map_indent: int = 2
    #: dash column minus parent key column of a block sequence under a key
    seq_indent: int = 0
    #: column of an item's content minus its dash column (``- at:`` is 2)
    item_offset: int = 2
    #: write nested mappings in flow style (``{mode: numeric}``) inside blocks
    flow_mappings: bool = False


def _printable(ch: str) -> bool:
    code = ord(ch)
    return (
        0x20 <= code <= 0x7E
        or code in (0x09, 0x85)
        or 0xA0 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or 0x10000 <= code <= 0x10FFFF
    )


@functools.lru_cache(maxsize=4096)
def _plain_ok(text: str, flow: bool) -> bool:
    if not text or text != text.strip() or "\t" in text:
        return False
    if any(not _printable(ch) or ch in _EXTRA_BREAKS for ch in text):
        return False
    if flow and any(ch in _FLOW_INDICATORS for ch in text):
        return False
    # Let PyYAML's own resolver decide: "1.0", "yes", "~", "a: b", "- x" and
    # "x # y" all load as something other than the same string.
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return type(loaded) is str and loaded == text


def _single_quoted(text: str) -> str | None:
    if any(not _printable(ch) or ch in _EXTRA_BREAKS or ch == "\t" for ch in text):
        return None
    return "'" + text.replace("'", "''") + "'"


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def _double_quoted(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif _printable(ch) and ch not in _EXTRA_BREAKS:
            out.append(ch)
        else:
            code = ord(ch)
            if code < 0x100:
                out.append(f"\\x{code:02X}")
            elif code < 0x10000:
                out.append(f"\\u{code:04X}")
            else:
                out.append(f"\\U{code:08X}")
    out.append('"')
    return "".join(out)


def render_string(text: str, *, flow: bool = False) -> str:
    if _plain_ok(text, flow):
        return text
    return _single_quoted(text) or _double_quoted(text)


def render_float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    # YAML 1.1 floats need a dot: repr(1e16) is "1e+16", which would load as a string.
    if "." not in text:
        text = text.replace("e", ".0e", 1) if "e" in text else text + ".0"
    return text


def render_scalar(value: Any, *, flow: bool = False) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return render_float(value)
    if isinstance(value, str):
        return render_string(value, flow=flow)
    # Dates and other YAML scalars only reach us when copied from the original file.
    dumped = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=2**30)
    return dumped.removesuffix("\n").removesuffix("\n...").strip()


def is_collection(value: Any) -> bool:
    return isinstance(value, (Mapping, list))


def render_flow(value: Any) -> str:
    """One-line flow rendering: ``{at: 1.5, expect: [a, b]}``."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(
            f"{render_scalar(k, flow=True)}: {render_flow(v)}" for k, v in value.items()
        ) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render_flow(v) for v in value) + "]"
    return render_scalar(value, flow=True)


def inline_ok(value: Any, style: Style) -> bool:
    """Whether a value goes on its key's line: scalars, empty and scalar-only lists, and
    nested collections when the file writes those in flow style."""
    if not is_collection(value) or not value:
        return True
    if isinstance(value, list) and not any(is_collection(v) for v in value):
        return True
    return style.flow_mappings


def entry_lines(key: Any, value: Any, indent: int, style: Style) -> list[str]:
    """Lines of one ``key: value`` entry of a block mapping whose keys sit at ``indent``."""
    head = " " * indent + render_scalar(key)
    if inline_ok(value, style):
        return [f"{head}: {render_flow(value)}"]
    if isinstance(value, Mapping):
        return [f"{head}:", *block_lines(value, indent + style.map_indent, style)]
    return [f"{head}:", *block_lines(value, indent + style.seq_indent, style)]


def item_lines(value: Any, dash: int, style: Style, *, flow_item: bool = False) -> list[str]:
    """Lines of one item of a block sequence whose dashes sit at column ``dash``."""
    offset = max(2, style.item_offset)
    lead = " " * dash + "-" + " " * (offset - 1)
    if flow_item or not is_collection(value) or not value or (
        isinstance(value, list) and inline_ok(value, style)
    ):
        return [lead + render_flow(value)]
    lines = block_lines(value, dash + offset, style)
    return [lead + lines[0][dash + offset:], *lines[1:]]


def block_lines(value: Any, indent: int, style: Style) -> list[str]:
    """A non-empty mapping or list in block style, its keys or dashes at ``indent``."""
    out: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            out.extend(entry_lines(key, item, indent, style))
    else:
        for item in value:
            out.extend(item_lines(item, indent, style))
    return out


def render_document(value: Any, style: Style, eol: str = "\n") -> str:
    lines = block_lines(value, 0, style) if is_collection(value) and value else [render_flow(value)]
    return "".join(line + eol for line in lines)
