"""Which old sequence item each new item comes from, so an edited list keeps its items' text.

Pure: works on the old and new data only; :mod:`._morph` turns the plan into text edits.
"""

from __future__ import annotations

import difflib
from typing import Any

from ._nodes import canon, same


def plan_items(old: list[Any], new: list[Any]) -> list[tuple[str, int]]:
    """For each new item: keep old i, morph old i in place, move old i's text here, or new."""
    # Items equal at both ends are kept as they are: one edit in a list of 100,000 events
    # plans only the items between.
    head = 0
    while head < min(len(old), len(new)) and same(old[head], new[head]):
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and same(old[-1 - tail], new[-1 - tail]):
        tail += 1
    if head or tail:
        middle = _plan(old[head:len(old) - tail], new[head:len(new) - tail])
        shifted = [(kind, i + head if i >= 0 else i) for kind, i in middle]
        return [("keep", i) for i in range(head)] + shifted + \
            [("keep", len(old) - tail + i) for i in range(tail)]
    return _plan(old, new)


def _plan(old: list[Any], new: list[Any]) -> list[tuple[str, int]]:
    old_keys = [canon(v) for v in old]
    new_keys = [canon(v) for v in new]
    ops = difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False).get_opcodes()
    pool: dict[Any, list[int]] = {}
    for tag, i1, i2, _j1, _j2 in ops:
        if tag != "equal":
            for i in range(i1, i2):
                pool.setdefault(old_keys[i], []).append(i)
    plan: list[tuple[str, int]] = []
    regions: list[tuple[int, int, int, int]] = []
    moved: set[int] = set()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            plan.extend(("keep", i1 + n) for n in range(i2 - i1))
            continue
        regions.append((i1, i2, j1, j2))
        for j in range(j1, j2):
            same_text = pool.get(new_keys[j])
            if same_text:
                moved.add(same_text[0])
                plan.append(("move", same_text.pop(0)))
            else:
                plan.append(("new", -1))
    # Changed items are edited in place, each paired with the most similar old
    # item of its region (in order): a block split in two keeps its comments
    # in one half, and a neighbour's comments stay with the neighbour.
    for i1, i2, j1, j2 in regions:
        olds = [i for i in range(i1, i2) if i not in moved]
        news = [j for j in range(j1, j2) if plan[j][0] == "new"]
        for i, j in _pair(olds, news, old, new):
            plan[j] = ("morph", i)
    return plan


def _similarity(a: Any, b: Any) -> float:
    score = 0.01  # any pairing beats none: the item keeps its place and layout
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() & b.keys():
            if same(a[key], b[key]):
                score += 1.5
            else:
                # A block split in pieces shares times with the block it came from, not with
                # its neighbour: its comments go with the piece that kept some of its times.
                score += 1.0 if _scalars(a[key]) & _scalars(b[key]) else 0.5
    return score


def _scalars(value: Any) -> set[Any]:
    items = value if isinstance(value, list) else [value]
    # Compared as numbers: a piece's times are floats even where the file wrote `at: [1, 2]`.
    return {float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else canon(v)
            for v in items if not isinstance(v, (dict, list))}


def _pair(olds: list[int], news: list[int], old: list[Any], new: list[Any]) -> list[tuple[int, int]]:
    """Order-preserving pairing of old and new items with the highest total similarity."""
    if not olds or not news:
        return []
    if len(olds) * len(news) > 40_000:
        return list(zip(olds, news))
    rows, cols = len(olds), len(news)
    best = [[0.0] * (cols + 1) for _ in range(rows + 1)]
    for r in range(rows - 1, -1, -1):
        for c in range(cols - 1, -1, -1):
            best[r][c] = max(best[r + 1][c], best[r][c + 1],
                             _similarity(old[olds[r]], new[news[c]]) + best[r + 1][c + 1])
    pairs: list[tuple[int, int]] = []
    r = c = 0
    while r < rows and c < cols:
        here = _similarity(old[olds[r]], new[news[c]]) + best[r + 1][c + 1]
        if best[r][c] == here:
            pairs.append((olds[r], news[c]))
            r, c = r + 1, c + 1
        elif best[r][c] == best[r + 1][c]:
            r += 1
        else:
            c += 1
    return pairs
