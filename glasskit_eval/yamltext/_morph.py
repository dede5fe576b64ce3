"""Text surgery: turn YAML text into text that loads as new data, touching only what changed.

We walk PyYAML's composed node graph (every node knows its start and end line,
column and character index) side by side with the old and the new data. Equal
subtrees are never touched, so their bytes survive; changed mappings and
sequences are edited entry by entry and item by item (insert a line, replace a
value in place, drop an entry); only what cannot be edited in place is
re-rendered, in the file's own indentation. All changes are collected as
non-overlapping character-range replacements on the original text.

This module does not check its own output; ``yamledit`` loads the candidate and
falls back to a full re-render if it does not load to the intended data.
"""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Any

import yaml

from ._nodes import (
    AliasNode,
    detect_style,
    is_block_map,
    is_block_scalar,
    is_block_seq,
    is_flow,
    same,
)
from ._render import Style, entry_lines, inline_ok, item_lines, render_flow
from ._seqplan import plan_items

_MERGE_TAG = "tag:yaml.org,2002:merge"


class CannotEdit(Exception):
    """The text has a shape we do not edit in place; the caller re-renders instead."""


def _inline_node(node: yaml.Node) -> bool:
    """Nodes whose text is exactly [start, end): plain and quoted scalars, flow collections, aliases."""
    return isinstance(node, AliasNode) or is_flow(node) or (
        isinstance(node, yaml.ScalarNode) and not is_block_scalar(node)
    )


def _fmt(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


class Morph:
    """One edit of one document: collects replacements, then ``result`` applies them."""

    def __init__(self, text: str, root: yaml.Node, eol: str) -> None:
        self.text = text
        self.root = root
        self.eol = eol
        lines = text.splitlines(keepends=True)
        self.line_starts = [0]
        for line in lines:
            self.line_starts.append(self.line_starts[-1] + len(line))
        self.nlines = len(lines)
        self._dashes: list[int] | None = None
        self.keys = yaml.SafeLoader("")
        self.replacements: list[tuple[int, int, int, str]] = []
        self.notes: list[str] = []
        self.style = detect_style(root)

    # --- positions --------------------------------------------------------------

    def line_start(self, line: int) -> int:
        return self.line_starts[min(line, self.nlines)]

    def line_end(self, line: int) -> int:
        """Index just past the line's line break (or the end of the text)."""
        return self.line_starts[min(line + 1, self.nlines)]

    def line_content_end(self, line: int) -> int:
        end = self.line_end(line)
        while end > self.line_start(line) and self.text[end - 1] in "\r\n\x85\u2028\u2029":
            end -= 1
        return end

    def col(self, index: int) -> int:
        return index - self.line_start(self.line_of(index))

    def line_of(self, index: int) -> int:
        return bisect.bisect_right(self.line_starts, index) - 1

    def starts_line(self, index: int) -> bool:
        return not self.text[self.line_start(self.line_of(index)):index].strip(" ")

    def last_line(self, node: yaml.Node) -> int:
        """Last line holding text of ``node`` (block collections end where their last child ends)."""
        if is_block_map(node):
            return self.last_line(node.value[-1][1])
        if is_block_seq(node):
            return self.last_line(node.value[-1])
        end = node.end_mark
        line = end.line if end.column > 0 else end.line - 1
        if is_block_scalar(node):
            while line > node.start_mark.line and not self.text[
                self.line_start(line):self.line_content_end(line)
            ].strip():
                line -= 1
        return max(line, node.start_mark.line)

    def is_comment(self, line: int, deeper_than: int = -1) -> bool:
        text = self.text[self.line_start(line):self.line_content_end(line)]
        stripped = text.lstrip(" ")
        return stripped.startswith("#") and len(text) - len(stripped) > deeper_than

    def comment_lines(self, start: int, end: int) -> int:
        first, last = self.line_of(start), self.line_of(max(start, end - 1))
        return sum(
            1 for line in range(first, last + 1)
            if self.text[self.line_start(line):self.line_content_end(line)].lstrip().startswith("#")
        )

    # --- output -------------------------------------------------------------------

    def replace(self, start: int, end: int, new: str) -> None:
        self.replacements.append((start, end, len(self.replacements), new))

    def result(self) -> str:
        out: list[str] = []
        pos = 0
        for start, end, _seq, new in sorted(self.replacements):
            if start < pos:
                raise CannotEdit("two edits overlap")
            out.append(self.text[pos:start])
            out.append(new)
            pos = end
        out.append(self.text[pos:])
        return "".join(out)

    def rerendered(self, path: tuple[Any, ...], start: int, end: int) -> None:
        lost = self.comment_lines(start, end)
        note = f"{_fmt(path)}: re-rendered"
        if lost:
            note += f"; {lost} comment line(s) inside it were dropped"
        self.notes.append(note)

    def join(self, lines: list[str], *, trailing: bool = True) -> str:
        return self.eol.join(lines) + (self.eol if trailing else "")

    # --- entry points ---------------------------------------------------------------

    def run(self, old: Any, new: Any) -> str:
        node = self.root
        if same(old, new):
            return self.text
        handled = (
            (is_block_map(node) and self.morph_block_map(node, old, new, ()))
            or (is_block_seq(node) and self.morph_block_seq(node, old, new, ()))
            or (is_flow(node) and self.morph_flow(node, old, new, ()))
        )
        if not handled:
            raise CannotEdit("the document's top level changed shape")
        return self.result()

    def construct_key(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode) or isinstance(node, AliasNode) or node.tag == _MERGE_TAG:
            raise CannotEdit("complex, alias or merge keys")
        return self.keys.construct_object(node, deep=True)

    def entries(self, node: yaml.Node, old: Any) -> list[tuple[Any, yaml.Node, yaml.Node]] | None:
        """(key, key node, value node) of a mapping we may edit key by key, else None."""
        if not isinstance(old, dict):
            return None
        out = []
        try:
            for k, v in node.value:
                out.append((self.construct_key(k), k, v))
            keys = [key for key, _k, _v in out]
            if len(set(keys)) != len(keys) or set(keys) != set(old):
                return None
        except (CannotEdit, TypeError, yaml.YAMLError):
            return None
        return out

    # --- block mappings ---------------------------------------------------------------

    def morph_block_map(self, node: yaml.Node, old: Any, new: Any, path: tuple[Any, ...]) -> bool:
        if not isinstance(new, dict) or not new or not node.value:
            return False
        entries = self.entries(node, old)
        if entries is None:
            return False
        survivors = [e for e in entries if e[0] in new]
        if not survivors:
            return False
        first_key = entries[0][1]
        key_col = first_key.start_mark.column
        inline_start = not self.starts_line(first_key.start_mark.index)

        # Drop removed entries. The first entry may share its line with a dash
        # (``- at: 1``): then delete up to the next surviving key so that key
        # moves up onto the dash line.
        lead = 0
        if inline_start and entries[0][0] not in new:
            while entries[lead][0] not in new:
                lead += 1
            start, end = first_key.start_mark.index, entries[lead][1].start_mark.index
            self.replace(start, end, "")
        for key, k, v in entries[lead:]:
            if key not in new:
                self.replace(self.line_start(k.start_mark.line), self.line_end(self.last_line(v)), "")

        for key, k, v in survivors:
            if not same(old[key], new[key]):
                self.morph_entry(k, v, old[key], new[key], (*path, key), key_col)

        # New keys go right after the nearest preceding surviving key (in the new
        # dict's order), or before the first entry.
        by_key = {e[0]: e for e in entries}
        order = {e[0]: n for n, e in enumerate(entries)}
        pending: list[Any] = []
        anchor: Any = None
        groups: list[tuple[Any, list[Any]]] = []
        for key in new:
            if key in by_key:
                if pending:
                    groups.append((anchor, pending))
                    pending = []
                if anchor is None or order[key] > order[anchor]:
                    anchor = key
            else:
                pending.append(key)
        if pending:
            groups.append((anchor, pending))
        for anchor_key, keys in groups:
            lines = [line for key in keys for line in entry_lines(key, new[key], key_col, self.style)]
            if anchor_key is None:
                if inline_start:
                    at = first_key.start_mark.index
                    text = self.join([lines[0][key_col:], *lines[1:]]) + " " * key_col
                else:
                    at = self.line_start(first_key.start_mark.line)
                    text = self.join(lines)
            else:
                at = self.line_end(self.last_line(by_key[anchor_key][2]))
                text = self.join(lines)
                if at == len(self.text) and self.text and self.text[-1] not in "\r\n":
                    text = self.eol + text
            self.replace(at, at, text)
        return True

    def morph_in_place(self, node: yaml.Node, old: Any, new: Any, path: tuple[Any, ...]) -> bool:
        """Edit a block collection or a non-empty flow one where it stands (False: replace it)."""
        if is_block_map(node):
            return self.morph_block_map(node, old, new, path)
        if is_block_seq(node):
            return self.morph_block_seq(node, old, new, path)
        return is_flow(node) and bool(node.value) and self.morph_flow(node, old, new, path)

    def morph_entry(self, k: yaml.Node, v: yaml.Node, old: Any, new: Any,
                    path: tuple[Any, ...], key_col: int) -> None:
        if self.morph_in_place(v, old, new, path):
            return
        # A flow value keeps flow style; an empty one (``samples: []``) sets no style.
        if _inline_node(v) and ((is_flow(v) and bool(v.value)) or inline_ok(new, self.style)):
            self.splice(v, new, path)
            return
        self.rebuild_entry(k, v, new, path, key_col)

    def splice(self, node: yaml.Node, new: Any, path: tuple[Any, ...]) -> None:
        start, end = node.start_mark.index, node.end_mark.index
        text = render_flow(new)
        if start == end:  # an empty null right after ``key:`` or ``-``
            text = " " + text
        if is_flow(node) and "#" in self.text[start:end]:
            self.rerendered(path, start, end)
        self.replace(start, end, text)

    def trailing_comment(self, index: int) -> str:
        line = self.line_of(index)
        rest = self.text[index:self.line_content_end(line)]
        if rest.lstrip().startswith("#"):
            return rest
        at = rest.find(" #")
        return rest[at:] if at >= 0 else ""

    def rebuild_entry(self, k: yaml.Node, v: yaml.Node, new: Any,
                      path: tuple[Any, ...], key_col: int) -> None:
        key_line = k.start_mark.line
        colon = self.text.find(":", k.end_mark.index)
        if colon < 0 or self.line_of(colon) != k.end_mark.line or self.text[k.end_mark.index:colon].strip():
            raise CannotEdit(f"{_fmt(path)}: cannot find the key's colon")
        if v.start_mark.line != key_line:
            comment = self.trailing_comment(colon + 1)
        elif v.end_mark.line == key_line and _inline_node(v):
            comment = self.trailing_comment(v.end_mark.index)
        elif not _inline_node(v):
            comment = self.trailing_comment(v.start_mark.index + 1)
        else:
            comment = ""
        start = k.start_mark.index
        end = self.line_end(self.last_line(v))
        trailing = self.text[start:end].endswith(("\n", "\r"))
        head = self.text[start:colon + 1]
        lines = entry_lines("k", new, key_col, self.style)
        if len(lines) == 1:
            text = self.join([head + lines[0][key_col + 2:] + comment], trailing=trailing)
        else:
            text = self.join([head + comment, *lines[1:]], trailing=trailing)
        if self.comment_lines(self.line_end(key_line), end):
            self.rerendered(path, self.line_end(key_line), end)
        self.replace(start, end, text)

    # --- block sequences -------------------------------------------------------------

    def dash_of(self, item: yaml.Node, after: int) -> int:
        at = item.start_mark.index - 1
        while at >= after and self.text[at] in " \t\r\n":
            at -= 1
        if at >= after and self.text[at] == "-" and "#" not in self.text[self.line_start(self.line_of(at)):at]:
            return at
        # Something between the dash and the item (a comment): ask the scanner.
        if self._dashes is None:
            self._dashes = sorted(
                tok.start_mark.index
                for tok in yaml.scan(self.text, Loader=yaml.SafeLoader)
                if isinstance(tok, yaml.BlockEntryToken)
            )
        dashes = self._dashes
        at = bisect.bisect_left(dashes, item.start_mark.index) - 1
        if at < 0 or dashes[at] < after:
            raise CannotEdit("cannot find a sequence item's dash")
        return dashes[at]

    def morph_block_seq(self, node: yaml.Node, old: Any, new: Any, path: tuple[Any, ...]) -> bool:
        if not isinstance(new, list) or not new or not isinstance(old, list) or len(old) != len(node.value):
            return False
        items: list[yaml.Node] = node.value
        dash_col = self.col(self.dash_of(items[0], node.start_mark.index))
        dashes: list[int] = []
        prev_end = node.start_mark.index
        for item in items:
            dash = self.dash_of(item, prev_end)
            if not self.starts_line(dash):
                return False  # compact ``- - a``: re-render the whole list instead
            dashes.append(dash)
            prev_end = item.end_mark.index
        firsts = [self.line_of(d) for d in dashes]
        # Comment lines right below an item and indented past its dash belong to it.
        lasts = []
        for n, item in enumerate(items):
            last = self.last_line(item)
            stop = firsts[n + 1] if n + 1 < len(items) else self.nlines
            while last + 1 < stop and self.is_comment(last + 1, deeper_than=dash_col):
                last += 1
            lasts.append(last)
        gaps = [(lasts[i] + 1, firsts[i + 1]) for i in range(len(items) - 1)]  # [lo, hi) lines

        def blank(lo: int, hi: int) -> bool:
            return hi > lo and not self.text[self.line_start(lo):self.line_start(hi)].strip()

        blank_sep = bool(gaps) and all(
            any(blank(line, line + 1) for line in range(lo, hi)) for lo, hi in gaps
        )
        flow_items = sum(is_flow(i) and isinstance(i, yaml.MappingNode) for i in items) * 2 > len(items)
        offsets = [
            item.value[0][0].start_mark.column - dash_col for item in items
            if is_block_map(item) and item.value[0][0].start_mark.line == self.line_of(dashes[0])
        ]
        style = self.style
        item_style = Style(style.map_indent, style.seq_indent,
                           Counter(offsets).most_common(1)[0][0] if offsets else style.item_offset,
                           style.flow_mappings)

        plan = plan_items(old, new)
        kept = {i for kind, i in plan if kind in ("keep", "morph")}
        deleted = [i for i in range(len(items)) if i not in kept]
        for i in deleted:
            start, end = self.line_start(firsts[i]), self.line_end(lasts[i])
            if i > 0 and blank(*gaps[i - 1]):
                start = self.line_start(gaps[i - 1][0])
            elif i == 0 and len(items) > 1 and 1 not in deleted and blank(*gaps[0]):
                end = self.line_start(gaps[0][1])
            self.replace(start, end, "")

        anchor: int | None = None
        pending: list[str] = []

        def flush() -> None:
            if not pending:
                return
            if anchor is None:
                at = self.line_start(firsts[0])
                text = "".join(chunk + (self.eol if blank_sep else "") for chunk in pending)
            else:
                at = self.line_end(lasts[anchor])
                text = "".join((self.eol if blank_sep else "") + chunk for chunk in pending)
                if at == len(self.text) and self.text[-1:] not in ("\n", "\r"):
                    text = self.eol + text
            self.replace(at, at, text)
            pending.clear()

        for j, (kind, i) in enumerate(plan):
            if kind in ("keep", "morph"):
                flush()
                anchor = i
                if kind == "morph":
                    self.morph_item(items[i], dashes[i], dash_col, old[i], new[j], (*path, j), item_style)
            elif kind == "move":
                chunk = self.text[self.line_start(firsts[i]):self.line_end(lasts[i])]
                pending.append(chunk if chunk.endswith(("\n", "\r")) else chunk + self.eol)
            else:
                pending.append(self.join(item_lines(new[j], dash_col, item_style, flow_item=flow_items)))
        flush()
        return True

    def morph_item(self, item: yaml.Node, dash: int, dash_col: int, old: Any, new: Any,
                   path: tuple[Any, ...], style: Style) -> None:
        if self.morph_in_place(item, old, new, path):
            return
        if _inline_node(item) and (
            (is_flow(item) and bool(item.value))
            or (not isinstance(new, dict) and inline_ok(new, style))
            or (isinstance(new, dict) and not new)
        ):
            self.splice(item, new, path)
            return
        end = self.line_end(self.last_line(item))
        trailing = self.text[dash:end].endswith(("\n", "\r"))
        lines = item_lines(new, dash_col, style)
        self.rerendered(path, dash, end)
        self.replace(dash, end, self.join([lines[0][dash_col:], *lines[1:]], trailing=trailing))

    # --- flow collections ---------------------------------------------------------------

    def morph_flow(self, node: yaml.Node, old: Any, new: Any, path: tuple[Any, ...]) -> bool:
        """Edit a flow collection in place: changed values spliced, keys appended."""
        if self.text[node.start_mark.index:node.start_mark.index + 1] not in ("[", "{"):
            return False  # anchored or tagged: replace it whole
        if isinstance(node, yaml.MappingNode) and isinstance(new, dict):
            entries = self.entries(node, old)
            if not entries or any(key not in new for key, _k, _v in entries):
                return False
            for key, _k, v in entries:
                if not same(old[key], new[key]):
                    self.flow_value(v, old[key], new[key], (*path, key))
            added = [f"{render_flow(key)}: {render_flow(new[key])}" for key in new if key not in old]
            if added:
                at = entries[-1][2].end_mark.index
                self.replace(at, at, "".join(", " + a for a in added))
            return True
        if isinstance(node, yaml.SequenceNode) and isinstance(new, list) and isinstance(old, list):
            items = node.value
            if not items or len(items) != len(old):
                return False
            if len(new) == len(old):
                for i, item in enumerate(items):
                    if not same(old[i], new[i]):
                        self.flow_value(item, old[i], new[i], (*path, i))
                return True
            return self.rebuild_flow_seq(node, old, new, path)
        return False

    def flow_value(self, node: yaml.Node, old: Any, new: Any, path: tuple[Any, ...]) -> None:
        if is_flow(node) and node.value and self.morph_flow(node, old, new, path):
            return
        self.splice(node, new, path)

    def rebuild_flow_seq(self, node: yaml.Node, old: list[Any], new: list[Any],
                         path: tuple[Any, ...]) -> bool:
        items = node.value
        text = self.text
        open_at, close_at = node.start_mark.index, node.end_mark.index - 1
        lead = text[open_at + 1:items[0].start_mark.index]
        trail = text[items[-1].end_mark.index:close_at]
        sep = text[items[0].end_mark.index:items[1].start_mark.index] if len(items) > 1 else ", "
        if "#" in lead + trail + sep:
            return False
        if not new:
            self.replace(open_at + 1, close_at, "")
            return True
        pieces = []
        for kind, i in plan_items(old, new):
            if kind in ("keep", "move"):
                pieces.append(text[items[i].start_mark.index:items[i].end_mark.index])
            else:
                pieces.append(render_flow(new[len(pieces)]))
        self.replace(open_at + 1, close_at, lead + sep.join(pieces) + trail)
        return True
