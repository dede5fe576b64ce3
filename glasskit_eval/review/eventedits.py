"""The review page's one-event writes to a stream target, and how its errors name an event.

The page sends one edit (add, set or delete one event), never the whole list: a target of many
thousands of events costs one event on the wire. The write goes through the same path as every
other (``edits``): the candidate passes ``validate``'s checks and replaces the file only if it
still has the revision the page saw. A file changed on disk since then is merged as samples are:
the edit goes onto the file as it is now unless the same event (or, for an add, the list) changed
there too, which is a conflict. Errors name an event by its onset (``event @ 12.4s``), the way the
page shows it, not by its position in the list.

The answer is as small as the request: the new revision, the event as written, the change to the
file's text (a splice the page applies to its copy) and the case's status, never the whole case,
which the page already holds; only a merged save (the file had changed elsewhere too) sends the
whole case again. The page undoes an event edit with the inverse edit (``merge: false``: the file
must still be exactly what the edit wrote, as for a restore) and its copy of the text the edit
replaced (``source_edit``), which is written byte for byte if it holds exactly the inverse edit's
events and passes the same checks; otherwise the writer renders the event.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..cases.model import Case
from . import casedata
from .edits import (
    EVENT_KEY_ORDER,
    Revisions,
    Written,
    _empty,
    _revision,
    _save_lock,
    _target,
    _write,
    editable,
    restore_numbers,
)
from .errors import ApiError
from .eventnames import name_events, named
from .eventsplice import alike_values, splice

OPS = ("add", "set", "delete")


def _op(body: Any) -> tuple[str, int, dict[str, Any] | None]:
    op, index, event = body.get("op"), body.get("index"), body.get("event")
    if not isinstance(body.get("merge", True), bool):
        raise ApiError(400, "bad_request", "body.merge must be true or false")
    if op not in OPS:
        raise ApiError(400, "bad_request", f"body.op must be one of {', '.join(OPS)}")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ApiError(400, "bad_request", "body.index must be the event's position (a nonnegative integer)")
    if op != "delete" and not isinstance(event, dict):
        raise ApiError(422, "invalid_edit", "body.event must be a mapping (at, window, expect, comment)")
    return op, index, event if isinstance(event, dict) else None


def _raw_events(loaded: casedata.LoadedCase, target_id: str) -> list[Any]:
    assert loaded.case is not None
    raw = loaded.case.document.value["targets"][target_id].get("events")
    return list(raw) if isinstance(raw, list) else []


def _ordered(event: dict[str, Any]) -> dict[str, Any]:
    rank = {key: n for n, key in enumerate(EVENT_KEY_ORDER)}
    return {k: event[k] for k in sorted(event, key=lambda k: rank.get(k, len(rank)))}


def apply_op(events: list[Any], op: str, index: int, event: dict[str, Any] | None) -> list[Any]:
    """``events`` with one event added before ``index``, replaced at it, or deleted from it."""
    limit = len(events) if op == "add" else len(events) - 1
    if index > limit:
        raise ApiError(409, "conflict", f"there is no event at position {index} any more; reload the case "
                       "(nothing was written)")
    out = list(events)
    if op == "delete":
        del out[index]
    elif op == "add":
        assert event is not None
        out.insert(index, _ordered(event))
    else:
        assert event is not None
        old = out[index]
        out[index] = _ordered(restore_numbers([event], [old] if isinstance(old, dict) else [])[0])
    return out


def save_event(root: Path, case_id: str, target_id: str, body: Any, seen: Revisions | None = None) -> Written:
    """One event of ``targets.<target_id>.events`` added, changed or deleted (body: revision, op, index, event)."""
    from ..errors import CaseEditError
    from ..yamltext.edit import plain, rewrite

    revision = _revision(body)
    op, index, event = _op(body)
    # Undo and redo send the inverse edit with merge false: like a restore, only onto the exact state.
    merge = body.get("merge", True)
    with _save_lock:
        # One read of the file (a long list of events makes every parse count).
        loaded = casedata.load(root, case_id)
        base = seen.text(revision) if merge and seen is not None and loaded.revision != revision else None
        editable(loaded, revision if base is None else loaded.revision)
        _target(loaded, target_id)
        assert loaded.case is not None
        spec = loaded.case.target(target_id)
        if spec is None or spec.stream is None:
            raise ApiError(422, "invalid_edit", f"targets.{target_id} has samples, not events; edit its samples")
        events = _raw_events(loaded, target_id)
        if base is not None:
            _check_merge(loaded, base, target_id, events, op, index)
        new = apply_op(events, op, index, event)
        exact = _exact(loaded.text, body) if base is None else None
        if base is None:
            spliced = splice(loaded, target_id, events, new, index, _empty(loaded), exact)
            if spliced is not None:
                try:
                    written = _write(root, loaded, spliced.text, False, None, keep_empty=None,
                                     checked=(spliced.case, list(spliced.problems)))
                except ApiError as exc:
                    raise named(exc, target_id, spliced.events) from None
                return _replied(written, loaded.text, target_id, op, index, spliced.events)
        data = plain(loaded.case.document.value)
        data["targets"][target_id]["events"] = new
        checked = _holds(loaded, exact, data) if exact is not None else None
        if exact is not None and checked is not None:
            held = checked.document.value["targets"][target_id]["events"]
            return _replied(_write(root, loaded, exact, False, None, keep_empty=None, checked=(checked, [])),
                            loaded.text, target_id, op, index, held)
        try:
            result = rewrite(loaded.text, data)
        except CaseEditError as exc:
            raise ApiError(422, "invalid_edit", name_events(str(exc), target_id, new)) from None
        try:
            written = _write(root, loaded, result.text, result.fallback, result.reason, keep_empty=_empty(loaded))
        except ApiError as exc:
            raise named(exc, target_id, new) from None
        if base is not None and seen is not None:
            seen.add(loaded.revision, loaded.text)
            # The page undoes by the inverse edit, onto this revision: it needs no text.
            written.saved.update(merged=True, before={"revision": loaded.revision})
        return _replied(written, loaded.text, target_id, op, index, new)


def _exact(text: str, body: dict[str, Any]) -> str | None:
    """The file ``text`` with ``body.source_edit`` applied (undo, redo: the page's copy of the state it goes back to).

    None when there is none, or it does not fit ``text`` (offsets in UTF-16 units, as the page counts).
    """
    edit = body.get("source_edit")
    if edit is None:
        return None
    if not (isinstance(edit, dict) and all(type(edit.get(k)) is int for k in ("start", "end"))
            and isinstance(edit.get("text"), str)):
        raise ApiError(400, "bad_request", "body.source_edit must be {start, end, text}: a change to the file's text")
    start, end, inserted = edit["start"], edit["end"], str(edit["text"])
    if not text.isascii():
        units = text.encode("utf-16-le")
        if not 0 <= start <= end <= len(units) // 2:
            return None
        try:
            start, end = len(units[:2 * start].decode("utf-16-le")), len(units[:2 * end].decode("utf-16-le"))
        except UnicodeDecodeError:
            return None  # an offset inside a character
    if not 0 <= start <= end <= len(text):
        return None
    return text[:start] + inserted + text[end:]


def _holds(loaded: casedata.LoadedCase, exact: str, data: dict[str, Any]) -> Case | None:
    """``exact``, checked as ``validate`` would, if it holds exactly ``data``; else None (the writer renders it)."""
    from .checks import checked_case

    case, problems = checked_case(loaded.path, exact, keep_empty=_empty(loaded))
    return case if case is not None and not problems and alike_values(case.document.value, data) else None


def _replied(written: Written, before: str, target_id: str, op: str, index: int, new: list[Any]) -> Written:
    """``written`` with the page's small answer: what changed, not the case (``before``: the file it changed)."""
    after = written.loaded
    text = source_edit(before, after.text) if written.saved["changed"] else None
    return replace(written, reply={
        "revision": after.revision,
        "edit": {"target": target_id, "op": op, "index": index, "event": None if op == "delete" else new[index]},
        "source_edit": text,
        "summary": casedata.status_of(after),
    })


_CHUNK = 1 << 16


def _common(a: str, b: str, limit: int, backwards: bool) -> int:
    """How many characters ``a`` and ``b`` share at their start (or end), at most ``limit``.

    Compared a chunk at a time (C-speed slices), then narrowed by halves within the first chunk that differs.
    """
    def part(s: str, i: int, j: int) -> str:
        return s[len(s) - j:len(s) - i] if backwards else s[i:j]

    start = 0
    while start < limit and part(a, start, min(limit, start + _CHUNK)) == part(b, start, min(limit, start + _CHUNK)):
        start += _CHUNK
    if start >= limit:
        return limit
    end = min(limit, start + _CHUNK)
    while start < end:
        mid = (start + end + 1) // 2
        if part(a, start, mid) == part(b, start, mid):
            start = mid
        else:
            end = mid - 1
    return start


def _utf16(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def source_edit(old: str, new: str) -> dict[str, Any]:
    """``new`` as ``old`` with ``old[start:end]`` (``old``) replaced by ``text``; offsets in UTF-16 units, as JavaScript counts."""
    head = _common(old, new, min(len(old), len(new)), False)
    tail = _common(old, new, min(len(old), len(new)) - head, True)
    start = _utf16(old[:head])
    gone = old[head:len(old) - tail]
    return {"start": start, "end": start + _utf16(gone), "text": new[head:len(new) - tail], "old": gone}


def _check_merge(current: casedata.LoadedCase, base_text: str, target_id: str, now: list[Any], op: str,
                 index: int) -> None:
    """Refuse an edit whose event (or, adding, whose list) changed on disk since the page saw the file."""
    from ..cases.edit import parse_candidate

    conflict = ApiError(409, "conflict", f"{current.path.name} changed on disk since the page loaded it, in the "
                        f"events of {target_id!r} you edited; reload to see the current file (nothing was written)",
                        revision=current.revision)
    base_case, _problems = parse_candidate(base_text, current.path)
    targets = base_case.document.value.get("targets") or {} if base_case is not None else {}
    if target_id not in targets:
        raise conflict
    raw = targets[target_id].get("events")
    base = list(raw) if isinstance(raw, list) else []
    if base == now:
        return  # the disk changed elsewhere only
    if op == "add" or len(base) != len(now) or index >= len(base) or base[index] != now[index]:
        raise conflict
