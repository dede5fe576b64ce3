"""Saving the page's edits: one target's sample blocks at a time.

The page sends the blocks as they should be written (raw mappings, inherited
settings left out) plus the revision it loaded. The minimal-diff writer
renders only the changed blocks; the result must validate before it replaces
the file, and the replacement is refused if the file changed on disk since the
page loaded it, so a concurrent edit is reported as a conflict, never lost.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..cases.edit import candidate_problems
from ..cases.model import Case, block_times
from ..errors import Problem, VideoError
from . import casedata
from .errors import ApiError

MAX_BLOCKS = 10_000

# One writer at a time within this server; other processes are caught by the hash check.
_save_lock = threading.Lock()


def _check_body(body: Any) -> tuple[str, list[dict[str, Any]]]:
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "body must be a JSON object {revision, blocks}")
    revision = body.get("revision")
    blocks = body.get("blocks")
    if not isinstance(revision, str) or not revision:
        raise ApiError(400, "bad_request", "body.revision must be the revision the page loaded")
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        raise ApiError(400, "bad_request", f"body.blocks must be a list of at most {MAX_BLOCKS} blocks")
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            raise ApiError(422, "invalid_edit", f"blocks[{i}] must be a mapping")
    return revision, blocks


def save_blocks(root: Path, case_id: str, target_id: str, body: Any,
                markers: list[dict[str, Any]]) -> dict[str, Any]:
    """Replace the samples of one target; returns the new case detail."""
    with _save_lock:
        saved = _save(root, case_id, target_id, body)
    loaded = casedata.load(root, case_id)
    detail = casedata.case_detail(loaded, markers)
    detail["saved"] = saved
    return detail


def _save(root: Path, case_id: str, target_id: str, body: Any) -> dict[str, Any]:
    from ..cases.write import replace_text
    from ..errors import CaseConflictError, CaseEditError
    from ..yamltext.edit import edit_samples

    revision, blocks = _check_body(body)
    loaded = casedata.load(root, case_id)
    if loaded.revision != revision:
        raise ApiError(409, "conflict", f"{loaded.path.name} changed on disk since the page loaded "
                          "it; reload to see the current file (your edit was not saved)",
                          revision=loaded.revision)
    if loaded.case is None or loaded.problems:
        raise ApiError(422, "invalid_case", f"{loaded.path.name} is invalid; fix it in an editor "
                          "first", problems=[str(p) for p in loaded.problems])
    if loaded.case.target(target_id) is None:
        raise ApiError(404, "not_found", f"no target {target_id!r} in case {case_id!r}")
    blocks = restore_numbers(blocks, _raw_blocks(loaded, target_id))
    try:
        result = edit_samples(loaded.text, target_id, blocks)
    except CaseEditError as exc:
        raise ApiError(422, "invalid_edit", str(exc)) from None
    if not result.changed:
        return {"fallback": False, "reason": None, "changed": False}
    problems = _validate(loaded.path, result.text)
    if problems:
        raise ApiError(422, "invalid_edit", "; ".join(_short(p) for p in problems),
                          problems=[str(p) for p in problems])
    try:
        replace_text(loaded.path, result.text, expected_hash=loaded.revision)
    except CaseConflictError:
        raise ApiError(409, "conflict", f"{loaded.path.name} changed on disk while saving; reload "
                          "to see the current file (your edit was not saved)") from None
    return {"fallback": bool(result.fallback), "reason": result.reason, "changed": True}


def _raw_blocks(loaded: casedata.LoadedCase, target_id: str) -> list[Any]:
    assert loaded.case is not None
    raw = loaded.case.document.value["targets"][target_id].get("samples")
    return raw if isinstance(raw, list) else []


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _restore(new: Any, old: Any) -> Any:
    if _is_number(new) and _is_number(old) and new == old:
        return old
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: _restore(v, old[k]) if k in old else v for k, v in new.items()}
    if isinstance(new, list) and isinstance(old, list):
        if len(new) == len(old):
            return [_restore(n, o) for n, o in zip(new, old)]
        return [next((o for o in old if _restore(n, o) is o), n) if _is_number(n) else n for n in new]
    return new


def restore_numbers(blocks: list[dict[str, Any]], old: list[Any]) -> list[dict[str, Any]]:
    """Give back the file's own number spelling (``1.0`` stays ``1.0``) where the value is unchanged.

    The page speaks JSON, where JavaScript writes ``1.0`` as ``1``; without this,
    every save would rewrite untouched blocks. Unchanged blocks are matched
    anywhere in the list (inserting a block shifts the others), edited ones by position.
    """
    out = []
    for i, block in enumerate(blocks):
        same = next((o for o in old if isinstance(o, dict) and o == block), None)
        if same is not None:
            out.append(_restore(block, same))
        else:
            out.append(_restore(block, old[i]) if i < len(old) else block)
    return out


def _short(problem: Problem) -> str:
    return f"{problem.path}: {problem.message}" if problem.path else problem.message


def _validate(path: Path, text: str) -> list[Problem]:
    case, problems = candidate_problems(text, path)
    if problems or case is None:
        return problems
    return _past_end(case)


def _past_end(case: Case) -> list[Problem]:
    """Sample times after the clip's end would fail every `run`; refuse them here."""
    from ..plan.planning import past_end_problems
    from ..video.probe import probe

    path = casedata.video_path(case)
    try:
        info = probe(path)
    except VideoError:
        return []  # a missing video is shown on the page; it does not block labelling
    blocks = ((target.id, block.index, times[-1]) for target in case.targets for block in target.blocks
              if (times := block_times(block)))
    return past_end_problems(case, blocks, info, path.name)
