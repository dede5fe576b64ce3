"""One event edit of a long events list as a splice of a few lines, checked without parsing the whole file.

A target of 100,000 events would cost several whole-file YAML parses per save. The file as
it is (its revision) was parsed once already (``casedata``'s parse cache), so we know the line
of every event. The edit runs on a *proxy*: the file with the events list cut down to the
edited event and one unchanged neighbour on each side, plus the last event. The usual
minimal-diff writer edits the proxy and re-reads its result (the same loader as ``validate``:
nesting limit, duplicate keys, located problems). The candidate is the proxy's edited lines
put back between the untouched runs of events, and each seam is one the file already had (the
neighbour's own bytes, unchanged), so the candidate loads to exactly the intended data; that
data then passes ``validate``'s case checks (``parse_case`` and past-the-end) before the
conflict-checked write. Anything unusual (a flow list, merges, odd line breaks, a re-render)
returns None and the caller takes the whole-file path. Undo and redo bring the exact text the
edit replaced: it takes the writer's place in the proxy, through the same seams and re-read.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ..cases.model import Case
from ..cases.parse import parse_case
from ..errors import Problem
from ..yamltext.source import PathKey, YamlDocument, load_yaml_text
from . import casedata

#: Shorter lists take the whole-file path (it costs little there).
MIN_EVENTS = 500


@dataclass(frozen=True, slots=True)
class Spliced:
    """The candidate text and the case it holds (checked), or the problems that refuse it."""

    text: str
    case: Case | None
    problems: tuple[Problem, ...]
    #: The events as the candidate holds them (an exact text's own numbers: ``1.0``, not the page's ``1``).
    events: list[Any]


def _at(where: PathKey, k: int, rest: PathKey = ()) -> PathKey:
    return (*where, k, *rest)


def _with_events(value: dict[str, Any], target_id: str, events: list[Any]) -> dict[str, Any]:
    """``value`` with the target's events replaced; everything else shared, not copied."""
    targets = dict(value["targets"])
    targets[target_id] = {**targets[target_id], "events": events}
    return {**value, "targets": targets}


def splice(loaded: casedata.LoadedCase, target_id: str, old: list[Any], new: list[Any], index: int,
           keep_empty: Collection[str], exact: str | None = None) -> Spliced | None:
    """``new`` (``old`` with one event added at, set at or deleted from ``index``) written as a splice.

    ``exact`` (undo and redo: the file as it was, byte for byte) is written instead of the writer's
    own rendering when it differs from the file only around the edited event and holds exactly ``new``.
    """
    from ..yamltext._nodes import same
    from ..yamltext.edit import load as safe_load
    from ..yamltext.edit import plain, rewrite

    assert loaded.case is not None
    doc = loaded.case.document
    text, n = loaded.text, len(old)
    if n < MIN_EVENTS or "\x85" in text or "\u2028" in text or "\u2029" in text \
            or text.count("\r") != text.count("\r\n"):
        return None  # YAML breaks lines there too: our line offsets would not be its lines
    where: PathKey = ("targets", target_id, "events")
    first, last = 0, n - 1
    k0, k1 = max(0, index - 1), min(n, index + 2)
    lines = [doc.lines.get(_at(where, k)) for k in sorted({first, k0, k1 - 1, *([k1] if k1 < n else []), last})]
    if any(line is None for line in lines) or lines != sorted(set(lines)):  # type: ignore[type-var]
        return None  # events sharing a line (a flow list): not whole lines
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(k: int) -> int:
        line = doc.lines[_at(where, k)]
        return starts[line - 1]

    # The seams with the untouched runs: the unchanged neighbours' own bytes, as in the file.
    # (Appending, the neighbour before is the list's last event: its first line stands for it.)
    cut = _Cut(
        loaded, target_id, where, k0, k1, n, text[:pos(first)], text[pos(first):pos(k0)],
        text[pos(k0):pos(k1)] if k1 < n else text[pos(k0):],
        text[pos(k1):pos(last)] if k1 < n else "", text[pos(last):] if k1 < n else "",
        text[pos(k0):pos(k0 + 1) if k0 + 1 < n else starts[doc.lines[_at(where, k0)]]] if k0 > 0 else "",
        text[pos(k1 - 1):pos(k1)] if k1 < n else "")
    shown = old[k0:k1] + ([old[last]] if k1 < n else [])
    proxy = cut.head + cut.window + cut.tail
    if not same(safe_load(proxy), _with_events(doc.value, target_id, shown)):
        return None
    after_shown = new[k0:k1 + len(new) - n] + ([new[-1]] if k1 < n else [])
    exact_proxy = cut.exact_proxy(exact) if exact is not None else None
    if exact_proxy is not None:
        put = cut.put_back(exact_proxy, new, after_shown, keep_empty, alike=True)
        if put is not None:
            return put
    result = rewrite(proxy, plain(_with_events(doc.value, target_id, after_shown)))
    return None if result.fallback else cut.put_back(result.text, new, after_shown, keep_empty)


@dataclass(frozen=True, slots=True)
class _Cut:
    """The file cut around the edited event: ``head gap0 window gap1 tail`` (the proxy: ``head window tail``)."""

    loaded: casedata.LoadedCase
    target_id: str
    where: PathKey
    k0: int
    k1: int
    n: int
    head: str
    gap0: str
    window: str
    gap1: str
    tail: str
    #: The unchanged neighbours' bytes the edited window must start and end with ("": no neighbour).
    first_guard: str
    last_guard: str

    def exact_proxy(self, exact: str) -> str | None:
        """The proxy ``exact`` makes, or None if it differs from the file outside the window."""
        outside = len(self.head) + len(self.gap0) + len(self.gap1) + len(self.tail)
        if len(exact) < outside or not (exact.startswith(self.head) and exact.startswith(self.gap0, len(self.head))
                                        and exact.endswith(self.gap1 + self.tail)):
            return None
        return self.head + exact[len(self.head) + len(self.gap0):len(exact) - len(self.gap1) - len(self.tail)] + self.tail

    def put_back(self, edited: str, new: list[Any], after_shown: list[Any], keep_empty: Collection[str],
                 alike: bool = False) -> Spliced | None:
        """The edited proxy put back between the untouched runs and checked; None: not a clean splice.

        ``alike``: the edited events may spell a number as the page cannot (``1.0`` for its ``1``); the
        candidate then holds the proxy's own values.
        """
        from ..yamltext._nodes import same
        from ..yamltext.edit import plain

        head, tail = self.head, self.tail
        if not (edited.startswith(head) and edited.endswith(tail) and len(edited) >= len(head) + len(tail)):
            return None
        middle = edited[len(head):len(edited) - len(tail)]
        if not (middle.startswith(self.first_guard) and middle.endswith(self.last_guard)):
            return None
        loaded = self.loaded
        assert loaded.case is not None
        doc = loaded.case.document
        reread, problems = load_yaml_text(edited, str(loaded.path))
        if problems:
            return None  # the whole-file path reports it, located
        expected = plain(_with_events(doc.value, self.target_id, after_shown))
        if alike and not same(reread.value, expected) and alike_values(reread.value, expected):
            held = reread.value["targets"][self.target_id]["events"]
            count = self.k1 - self.k0 + len(new) - self.n
            new = [*new[:self.k0], *held[:count], *new[self.k0 + count:]]
        elif not same(reread.value, expected):
            return None
        candidate = head + self.gap0 + middle + self.gap1 + tail
        full = YamlDocument(str(loaded.path), _with_events(doc.value, self.target_id, new),
                            _lines(doc, reread, self.where, self.k0, self.k1, len(new) - self.n, head, self.gap0,
                                   self.window, middle))
        case, found = parse_case(full, loaded.path, allow_empty=keep_empty)
        if found or case is None:
            return Spliced(candidate, None, tuple(found), new)
        from .checks import past_end_problems

        late = past_end_problems(case)
        return Spliced(candidate, None if late else case, tuple(late), new)


def alike_values(a: Any, b: Any) -> bool:
    """``same``, but a number equals a number of the same value (``1.0`` and ``1``): what JSON can tell apart."""
    from ..yamltext._nodes import same

    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    if isinstance(a, dict):
        return isinstance(b, dict) and all(type(k) is str for k in a) and a.keys() == b.keys() \
            and all(alike_values(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(alike_values(x, y) for x, y in zip(a, b))
    return bool(a == b) if number(a) and number(b) else same(a, b)


def _lines(doc: YamlDocument, proxy: YamlDocument, where: PathKey, k0: int, k1: int, shift: int,
           head: str, gap0: str, window: str, middle: str) -> dict[PathKey, int]:
    """The candidate's line of every value: the old lines around the window, the window's from the proxy."""
    depth = len(where)
    start = head.count("\n") + gap0.count("\n") + 1  # the window's first line, in the file
    end = start + window.count("\n")  # the first line after it
    delta = middle.count("\n") - window.count("\n")
    out: dict[PathKey, int] = {}
    last = where[-1]
    # One pass over every value of the file (several per event): no call, no new tuple unless a path moves.
    for path, line in doc.lines.items():
        k = path[depth] if len(path) > depth and path[depth - 1] == last and path[:depth] == where else None
        if type(k) is int and k >= k1:
            out[path if not shift else (*where, k + shift, *path[depth + 1:])] = line + delta
        elif type(k) is int and k >= k0:
            continue  # in the window: the proxy has its new line
        elif line >= end:
            out[path] = line + delta
        elif line < start:
            out[path] = line
    proxy_start = head.count("\n") + 1
    proxy_end = proxy_start + middle.count("\n")
    window_new = k1 - k0 + shift
    for path, line in proxy.lines.items():
        k = path[depth] if len(path) > depth and path[:depth] == where else None
        if isinstance(k, int):
            if k < window_new:
                out[_at(where, k0 + k, path[depth + 1:])] = line - proxy_start + start
        elif proxy_start <= line < proxy_end:
            out[path] = line - proxy_start + start
    return out
