"""The review page's writes: a target's sample blocks or events, a target's removal, and restoring a state.

Every write names the revision (content hash) the page last saw and goes through
one path: build the candidate text, check it with ``validate``'s code
(``checks``), then replace the file atomically only if it still has that
revision. So a refused edit leaves the file untouched, and a file changed on disk
since the page read it is a conflict, never overwritten. Undo and redo are
restores: a whole-file write of a text this server itself served or wrote,
through the same check and the same conflict test.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cases.model import Case
from ..cases.write import content_hash
from ..errors import Problem
from . import casedata
from .checks import checked_case, short
from .errors import ApiError, NotFound
from .pins import keep_in_step

MAX_BLOCKS = 10_000

# One writer at a time within this server; other processes are caught by the hash check.
_save_lock = threading.Lock()


class Revisions:
    """Hashes of every file state this server served or wrote: the only texts a restore may write.

    The latest texts are kept too, so an edit made on a state the file has since left can be
    merged onto the file as it is now (what the page saw is the base of the merge).
    """

    #: Texts kept for merging; an edit on an older state than these is a conflict, as before.
    KEEP_TEXTS = 256
    #: And at most this many characters of them (the newest text always): a case of 100,000
    #: events is 4 MB, and every save of it is a new state.
    KEEP_CHARS = 256 << 20

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._texts: dict[str, str] = {}
        self._chars = 0
        self._lock = threading.Lock()

    def add(self, revision: str, text: str | None = None) -> None:
        with self._lock:
            self._seen.add(revision)
            if text is not None:
                self._chars -= len(self._texts.pop(revision, ""))
                self._texts[revision] = text
                self._chars += len(text)
                while len(self._texts) > self.KEEP_TEXTS or (self._chars > self.KEEP_CHARS and len(self._texts) > 1):
                    self._chars -= len(self._texts.pop(next(iter(self._texts))))

    def text(self, revision: str) -> str | None:
        with self._lock:
            return self._texts.get(revision)

    def __contains__(self, revision: object) -> bool:
        with self._lock:
            return revision in self._seen


@dataclass(frozen=True)
class Written:
    """What a write did (``saved`` goes to the page) and the case as it is now on disk.

    ``reply``, when set, is all the page needs to follow the write (an event save: the new
    revision and the edit as written); the whole case goes back only without it.
    """

    saved: dict[str, Any]
    loaded: casedata.LoadedCase
    reply: dict[str, Any] | None = None


# --- request bodies ---------------------------------------------------------------------------


def _revision(body: Any) -> str:
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "body must be a JSON object with the revision the page loaded")
    revision = body.get("revision")
    if not isinstance(revision, str) or not revision:
        raise ApiError(400, "bad_request", "body.revision must be the revision the page loaded")
    return revision


def _mappings(body: Any, key: str) -> list[dict[str, Any]]:
    """``body[key]``: a list of at most MAX_BLOCKS mappings (``blocks`` or ``events``)."""
    items = body.get(key)
    if not isinstance(items, list) or len(items) > MAX_BLOCKS:
        raise ApiError(400, "bad_request", f"body.{key} must be a list of at most {MAX_BLOCKS} {key}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ApiError(422, "invalid_edit", f"{key}[{i}] must be a mapping")
    return items


# --- the three writes ---------------------------------------------------------------------------


def save_blocks(root: Path, case_id: str, target_id: str, body: Any, seen: Revisions | None = None) -> Written:
    """Replace the sample blocks of one target with the minimal-diff writer.

    When the file changed on disk since the page read it, the edit is merged onto the file as
    it is now, the way ``seed`` merges: changes elsewhere (other targets, other blocks of this
    one, the description) are kept; a block changed both on disk and on the page is a conflict.
    """
    from ..errors import CaseEditError
    from ..yamltext.edit import edit_samples

    revision = _revision(body)
    blocks = _mappings(body, "blocks")
    with _save_lock:
        loaded = casedata.load(root, case_id)
        base = seen.text(revision) if seen is not None and loaded.revision != revision else None
        if base is None:
            loaded = _editable(root, case_id, revision)
        else:
            loaded = _editable(root, case_id, loaded.revision)
        _target(loaded, target_id)
        if base is not None:
            blocks = _merged_blocks(loaded, base, target_id, blocks)
        blocks = restore_numbers(blocks, _raw_blocks(loaded, target_id))
        try:
            result = edit_samples(loaded.text, target_id, blocks)
        except CaseEditError as exc:
            raise ApiError(422, "invalid_edit", str(exc)) from None
        written = _write(root, loaded, result.text, result.fallback, result.reason, keep_empty=_empty(loaded))
        if base is not None and seen is not None:
            # Undo of this edit goes back to the file as it was on disk, not as the page saw it.
            seen.add(loaded.revision, loaded.text)
            written.saved.update(merged=True, before={"text": loaded.text, "revision": loaded.revision})
        return written


def _merged_blocks(current: casedata.LoadedCase, base_text: str, target_id: str,
                   page: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page's blocks of ``target_id`` merged onto the file's current ones (the base: what the page saw)."""
    from ..cases.edit import parse_candidate

    base_case, _problems = parse_candidate(base_text, current.path)
    conflict = ApiError(409, "conflict", f"{current.path.name} changed on disk since the page loaded it, in the "
                        f"same samples of {target_id!r} you edited; reload to see the current file "
                        "(nothing was written)", revision=current.revision)
    if base_case is None:
        raise conflict
    targets = base_case.document.value.get("targets") or {}
    if target_id not in targets:
        raise conflict
    raw = targets[target_id].get("samples")
    base = raw if isinstance(raw, list) else []
    now = _raw_blocks(current, target_id)
    if now == base:
        return page  # the disk changed elsewhere only
    if not (len(base) == len(now) == len(page)):
        raise conflict  # blocks were added or removed on one side: which is which is a guess
    mine = {i for i in range(len(base)) if page[i] != base[i]}
    theirs = {i for i in range(len(base)) if now[i] != base[i]}
    if mine & theirs:
        raise conflict
    return [page[i] if i in mine else now[i] for i in range(len(base))]


#: Where a new key of an event goes: as the spec's examples write them.
EVENT_KEY_ORDER = ("at", "window", "compare", "expect", "comment")


def save_events(root: Path, case_id: str, target_id: str, body: Any) -> Written:
    """Replace ``targets.<target_id>.events`` (add, move, delete) with the minimal-diff writer.

    The same guarantees as sample blocks: the candidate passes ``validate``'s checks (overlapping
    windows, quiet time over a window, onsets past the end: located errors, nothing written) and
    replaces the file only if it still has the revision the page saw (else a conflict).
    """
    from ..errors import CaseEditError
    from ..yamltext.edit import plain, rewrite

    revision = _revision(body)
    events = _mappings(body, "events")
    with _save_lock:
        loaded = _editable(root, case_id, revision)
        _target(loaded, target_id)
        assert loaded.case is not None
        spec = loaded.case.target(target_id)
        if spec is None or spec.stream is None:
            raise ApiError(422, "invalid_edit", f"targets.{target_id} has samples, not events; edit its samples")
        data = plain(loaded.case.document.value)
        old = data["targets"][target_id].get("events")
        rank = {key: n for n, key in enumerate(EVENT_KEY_ORDER)}
        events = restore_numbers(events, old if isinstance(old, list) else [])
        data["targets"][target_id]["events"] = [
            {k: e[k] for k in sorted(e, key=lambda k: rank.get(k, len(rank)))} for e in events]
        try:
            result = rewrite(loaded.text, data)
        except CaseEditError as exc:
            raise ApiError(422, "invalid_edit", str(exc)) from None
        try:
            return _write(root, loaded, result.text, result.fallback, result.reason, keep_empty=_empty(loaded))
        except ApiError as exc:
            from .eventnames import named

            raise named(exc, target_id, data["targets"][target_id]["events"]) from None


def remove_target(root: Path, case_id: str, target_id: str, body: Any) -> Written:
    """Delete ``targets.<target_id>`` (the page's answer to deleting a target's last sample)."""
    from ..errors import CaseEditError
    from ..yamltext.edit import plain, rewrite

    revision = _revision(body)
    with _save_lock:
        loaded = _editable(root, case_id, revision)
        _target(loaded, target_id)
        assert loaded.case is not None
        data = plain(loaded.case.document.value)
        del data["targets"][target_id]
        try:
            result = rewrite(loaded.text, data)
        except CaseEditError as exc:
            raise ApiError(422, "invalid_edit", str(exc)) from None
        keep = [t for t in _empty(loaded) if t != target_id]
        return _write(root, loaded, result.text, result.fallback, result.reason, keep_empty=keep)


def restore_text(root: Path, case_id: str, body: Any, seen: Revisions) -> Written:
    """Write back a whole earlier state of the file (undo/redo), byte for byte."""
    revision = _revision(body)
    text = body.get("text")
    if not isinstance(text, str):
        raise ApiError(400, "bad_request", "body.text must be the file text to restore")
    if content_hash(text) not in seen:
        raise ApiError(422, "unknown_state", "that text is not a state of the file this review server "
                       "read or wrote; only undo and redo may restore a file")
    with _save_lock:
        loaded = _current(root, case_id, revision)
        return _write(root, loaded, text, False, None, keep_empty=None)


# --- shared steps ----------------------------------------------------------------------------------


def _current(root: Path, case_id: str, revision: str) -> casedata.LoadedCase:
    return _same(casedata.load(root, case_id), revision)


def _same(loaded: casedata.LoadedCase, revision: str) -> casedata.LoadedCase:
    if loaded.revision != revision:
        raise ApiError(409, "conflict", f"{loaded.path.name} changed on disk since the page loaded it; "
                       "reload to see the current file (nothing was written)", revision=loaded.revision)
    return loaded


def editable(loaded: casedata.LoadedCase, revision: str) -> casedata.LoadedCase:
    """``loaded``, if it still has ``revision`` (else a conflict) and is valid (else refused)."""
    _same(loaded, revision)
    if loaded.case is None or loaded.problems:
        raise ApiError(422, "invalid_case", f"{loaded.path.name} is invalid; fix it in an editor first",
                       problems=[str(p) for p in loaded.problems])
    return loaded


def _editable(root: Path, case_id: str, revision: str) -> casedata.LoadedCase:
    return editable(casedata.load(root, case_id), revision)


def _target(loaded: casedata.LoadedCase, target_id: str) -> None:
    assert loaded.case is not None
    if loaded.case.target(target_id) is None:
        raise NotFound(f"no target {target_id!r} in case {loaded.id!r}")


def _empty(loaded: casedata.LoadedCase) -> list[str]:
    assert loaded.case is not None
    return casedata.empty_targets(loaded.case)


def _write(root: Path, loaded: casedata.LoadedCase, text: str, fallback: bool, reason: str | None, *,
           keep_empty: list[str] | None, checked: tuple[Case | None, list[Problem]] | None = None) -> Written:
    """Check ``text`` as ``validate`` would (unless ``checked`` already says what that found) and write it."""
    from ..cases.write import replace_text
    from ..errors import CaseConflictError, OutputError

    if text == loaded.text:
        return Written({"fallback": False, "reason": None, "changed": False}, loaded)
    case, problems = checked or checked_case(loaded.path, text, keep_empty=keep_empty)
    if problems or case is None:
        raise ApiError(422, "invalid_edit", "; ".join(short(p) for p in problems),
                       problems=[str(p) for p in problems])
    try:
        replace_text(loaded.path, text, expected_hash=loaded.revision)
    except CaseConflictError:
        raise ApiError(409, "conflict", f"{loaded.path.name} changed on disk while saving; reload to "
                       "see the current file (nothing was written)") from None
    except OutputError as exc:
        raise ApiError(500, "write_failed", str(exc)) from None
    # The page's next edit (and undo) must start from exactly these bytes, not a re-read
    # that another writer may already have changed.
    after = casedata.checked(loaded.id, loaded.path, text, case)
    # Still under the save lock: the frame lock follows the writes in the order they were made.
    saved: dict[str, Any] = {"fallback": fallback, "reason": reason, "changed": True}
    pins = keep_in_step(root, loaded, after)
    if pins is not None:
        saved["pins"] = pins
    return Written(saved, after)


# --- number spelling -----------------------------------------------------------------------------


def _raw_blocks(loaded: casedata.LoadedCase, target_id: str) -> list[Any]:
    assert loaded.case is not None
    raw = loaded.case.document.value["targets"][target_id].get("samples")
    return raw if isinstance(raw, list) else []


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _restore(new: Any, old: Any) -> Any:
    if _is_number(new) and _is_number(old) and new == old:
        return old
    if _is_number(new) and isinstance(old, list):
        # `at: [1.0, 6.0]` losing one timestamp becomes `at: 1.0`, not `at: 1`.
        return next((o for o in old if _is_number(o) and o == new), new)
    if isinstance(new, list) and _is_number(old):
        return [_restore(n, old) for n in new]
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: _restore(v, old[k]) if k in old else v for k, v in new.items()}
    if isinstance(new, list) and isinstance(old, list):
        if len(new) == len(old):
            return [_restore(n, o) for n, o in zip(new, old)]
        return [next((o for o in old if _restore(n, o) is o), n) if _is_number(n) else n for n in new]
    return new


#: Keys whose numbers are times: a new block's time takes the spelling of an equal old time.
_TIME_KEYS = ("at", "range", "every_s")


def _time_pool(old: list[Any]) -> dict[str, list[Any]]:
    pool: dict[str, list[Any]] = {}
    for block in old:
        if not isinstance(block, dict):
            continue
        for key in _TIME_KEYS:
            value = block.get(key)
            values = value if isinstance(value, list) else [value]
            pool.setdefault(key, []).extend(v for v in values if _is_number(v))
    return pool


def _spell(value: Any, pool: list[Any]) -> Any:
    if _is_number(value):
        return next((o for o in pool if o == value), value)
    if isinstance(value, list):
        return [_spell(v, pool) for v in value]
    return value


def _respell_times(block: dict[str, Any], pool: dict[str, list[Any]]) -> dict[str, Any]:
    return {k: _spell(v, pool.get(k, [])) if k in _TIME_KEYS else v for k, v in block.items()}


def restore_numbers(blocks: list[dict[str, Any]], old: list[Any]) -> list[dict[str, Any]]:
    """Give back the file's own number spelling (``1.0`` stays ``1.0``) where the value is unchanged.

    The page speaks JSON, where JavaScript writes ``1.0`` as ``1``; without this,
    every save would rewrite untouched blocks. Unchanged blocks are matched
    anywhere in the list (inserting a block shifts the others), edited ones by
    position; times of split-off blocks take the spelling of the time they came from.
    """
    pool = _time_pool(old)
    out = []
    for i, block in enumerate(blocks):
        same = next((o for o in old if isinstance(o, dict) and o == block), None)
        if same is not None:
            out.append(_restore(block, same))
        else:
            restored = _restore(block, old[i]) if i < len(old) else block
            out.append(_respell_times(restored, pool))
    return out
