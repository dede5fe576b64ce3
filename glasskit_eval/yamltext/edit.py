"""Minimal-diff edits of case files: change sample blocks, keep every other byte.

``seed`` and ``review`` change a few sample blocks of a case file that people
maintain by hand, with comments and their own formatting. Re-rendering the
whole file (what the upstream tool does) would throw all of that away, so we
edit the text instead (see ``yamlmorph``): everything outside the edited blocks
survives byte for byte, and inside an edited block only the changed lines do.

Every result is checked: the candidate text must load (the safe loader) to
exactly the intended document, compared type-strictly (``1``, ``1.0`` and
``true`` differ). If it does not, we re-render the whole document and say so in
``EditResult.fallback`` / ``reason``, so callers can tell the user that the
file's comments were lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import CaseEditError
from ._morph import CannotEdit, Morph
from ._nodes import compose, detect_style, load_data, same
from ._render import Style, render_document


@dataclass(frozen=True)
class EditResult:
    text: str
    #: whether ``text`` differs from the input
    changed: bool = False
    #: the whole document was re-rendered (comments and formatting lost)
    fallback: bool = False
    #: why the in-place edit was not possible (callers add "re-rendered, comments lost")
    reason: str | None = None
    #: what was re-rendered inside edited blocks (and comments dropped there)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplaceSamples:
    """Replace ``targets.<target_id>.samples`` with new sample-block mappings."""

    target_id: str
    blocks: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class SetBlockKey:
    """Set one key (``expect``, ``comment``, ``at``, ...) of one sample block."""

    target_id: str
    block_index: int
    key: str
    value: Any


@dataclass(frozen=True)
class DeleteBlockKey:
    """Remove one key of one sample block; removing an absent key is a no-op."""

    target_id: str
    block_index: int
    key: str


Edit = ReplaceSamples | SetBlockKey | DeleteBlockKey


# --- public API -----------------------------------------------------------------


def edit_samples(text: str, target_id: str, new_blocks: Sequence[Mapping[str, Any]]) -> EditResult:
    return apply_edits(text, [ReplaceSamples(target_id, new_blocks)])


def apply_edits(text: str, edits: Sequence[Edit]) -> EditResult:
    """Apply edits in order (each sees the result of the previous) and write them in one go."""
    old = load(text)
    data = plain(old)
    for edit in edits:
        _apply(data, edit)
    return _rewrite(text, old, data)


def rewrite(text: str, new_data: Any) -> EditResult:
    """Text that loads as ``new_data``, as close to ``text`` as we can make it.

    Sample blocks are put in BLOCK_KEY_ORDER first; that only decides where new
    keys and new blocks go, since existing keys keep their place in the text.
    """
    data = plain(new_data)
    targets = data.get("targets") if isinstance(data, dict) else None
    for target in (targets or {}).values() if isinstance(targets, dict) else ():
        samples = target.get("samples") if isinstance(target, dict) else None
        if isinstance(samples, list):
            target["samples"] = [ordered_block(b) if isinstance(b, dict) else b for b in samples]
    return _rewrite(text, load(text), data)


def _rewrite(text: str, old: Any, new_data: Any) -> EditResult:
    if same(old, new_data):
        return EditResult(text)
    eol = detect_eol(text)
    try:
        root = compose(text)
        if root is None:
            raise CannotEdit("the document is empty")
        morph = Morph(text, root, eol)
        candidate = morph.run(old, new_data)
        reason = _check(candidate, new_data)
        if reason is None:
            return EditResult(candidate, changed=candidate != text, notes=tuple(morph.notes))
    except CannotEdit as exc:
        reason = str(exc)
    except (yaml.YAMLError, RecursionError) as exc:
        reason = f"the in-place edit failed ({type(exc).__name__})"
    return full_render(text, new_data, reason)


def full_render(text: str, new_data: Any, reason: str) -> EditResult:
    """Re-render the whole document in the file's indentation style, keeping its header comments."""
    eol = detect_eol(text)
    try:
        root = compose(text)
        style = detect_style(root) if root is not None else Style()
    except yaml.YAMLError:
        root, style = None, Style()
    header = _header(text, root)
    candidate = header + render_document(new_data, style, eol)
    if _check(candidate, new_data) is not None:
        dumped = yaml.safe_dump(new_data, sort_keys=False, allow_unicode=True, default_flow_style=False)
        candidate = header + dumped.replace("\n", eol)
    return EditResult(candidate, changed=candidate != text, fallback=True, reason=reason)


# --- helpers --------------------------------------------------------------------------


def load(text: str) -> Any:
    try:
        return load_data(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CaseEditError(f"cannot edit a case file that is not valid YAML{where}: "
                            f"{getattr(exc, 'problem', None) or exc}; fix it first") from None


def detect_eol(text: str) -> str:
    at = text.find("\n")
    if at > 0 and text[at - 1] == "\r":
        return "\r\n"
    if at < 0 and "\r" in text:
        return "\r"
    return "\n"


def plain(value: Any) -> Any:
    """A deep copy without shared sub-objects (YAML aliases), tuples turned into lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _check(candidate: str, intended: Any) -> str | None:
    try:
        loaded = load_data(candidate)
    except yaml.YAMLError as exc:
        return f"the in-place edit would not parse ({getattr(exc, 'problem', None) or exc})"
    if not same(loaded, intended):
        return "the in-place edit would not load back to the intended data"
    return None


def _header(text: str, root: yaml.Node | None) -> str:
    """Comment, blank and ``---`` lines before the document's content."""
    if root is None:
        return ""
    lines = text.splitlines(keepends=True)[:root.start_mark.line]
    if all(not ln.strip() or ln.lstrip().startswith("#") or ln.strip() == "---" for ln in lines):
        return "".join(lines)
    return ""


def _target(data: Any, target_id: str) -> dict[str, Any]:
    targets = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(targets, dict):
        raise CaseEditError("the case file has no `targets:` mapping to edit")
    target = targets.get(target_id)
    if not isinstance(target, dict):
        known = ", ".join(str(t) for t in targets) or "none"
        raise CaseEditError(f"targets.{target_id}: no such target (targets: {known})")
    return target


def _block(data: Any, target_id: str, index: int) -> dict[str, Any]:
    samples = _target(data, target_id).get("samples")
    where = f"targets.{target_id}.samples"
    if not isinstance(samples, list):
        raise CaseEditError(f"{where}: not a list of sample blocks")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(samples):
        raise CaseEditError(f"{where}[{index}]: no such sample block; the target has {len(samples)}")
    block = samples[index]
    if not isinstance(block, dict):
        raise CaseEditError(f"{where}[{index}]: not a mapping")
    return block


# The order of the spec's examples; new keys go where a person would write them (a clip
# next to the times it widens, before what is expected of it).
BLOCK_KEY_ORDER = ("range", "at", "every_s", "clip", "field", "compare", "expect", "comment", "ignore")


def ordered_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """``block`` with known keys in BLOCK_KEY_ORDER, unknown keys after them as given."""
    rank = {key: n for n, key in enumerate(BLOCK_KEY_ORDER)}
    keys = sorted(block, key=lambda k: rank.get(k, len(rank)))
    return {k: block[k] for k in keys}


def _apply(data: Any, edit: Edit) -> None:
    if isinstance(edit, ReplaceSamples):
        blocks = plain(list(edit.blocks))
        for i, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise CaseEditError(f"targets.{edit.target_id}.samples[{i}]: a sample block must be a mapping")
        _target(data, edit.target_id)["samples"] = [ordered_block(b) for b in blocks]
    elif isinstance(edit, SetBlockKey):
        samples = _target(data, edit.target_id)["samples"]
        block = _block(data, edit.target_id, edit.block_index)
        samples[edit.block_index] = ordered_block({**block, edit.key: plain(edit.value)})
    elif isinstance(edit, DeleteBlockKey):
        _block(data, edit.target_id, edit.block_index).pop(edit.key, None)
    else:  # pragma: no cover - guarded by the type checker
        raise TypeError(f"unknown edit {edit!r}")
