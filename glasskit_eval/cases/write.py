"""Write case files safely: atomic replace, kept permissions, optimistic concurrency.

A case file is replaced by writing a temporary file in the same directory,
fsyncing it and renaming it over the original, so a crash leaves either the old
or the new file, never half of one, and never a stray temporary file when we
get to clean up. Writers that read a file, let a person or an adapter think,
and then write it back (``review``, ``seed``) pass the hash of what they read:
if the file changed on disk in the meantime, the write is refused with
``CaseConflictError`` instead of silently overwriting someone's edit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CaseConflictError, OutputError, Problem, ValidationError
from ..support.fsio import lock_fd, replace_file
from ..yamltext.edit import EditResult, rewrite

#: Case files are locked only where locks are advisory: a Windows byte lock is mandatory and
#: would stop the user's editor from reading the file; there the hash check alone guards edits.
_LOCK_CASE_FILES = os.name == "posix"


@dataclass(frozen=True)
class CaseText:
    """A case file's text exactly as stored (line endings untouched) and its content hash."""

    path: Path
    text: str
    hash: str


def content_hash(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def read_case_text(path: Path) -> CaseText:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError([Problem(str(path), "", f"cannot read file: {exc.strerror or exc}")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError([Problem(str(path), "", "file is not UTF-8 text")]) from None
    return CaseText(path, text, content_hash(data))


def replace_text(path: Path, text: str, *, expected_hash: str | None = None) -> str:
    """Atomically replace ``path`` with ``text``; returns the new content hash.

    With ``expected_hash``, the current content is checked under an advisory lock
    right before the rename and the write is refused if it differs.
    """
    path = Path(path)
    data = text.encode("utf-8")
    try:
        with _locked(path) as current:
            if expected_hash is not None and (current is None or content_hash(current) != expected_hash):
                raise CaseConflictError(path, expected_hash, None if current is None else content_hash(current))
            _write_replace(path, data)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}; the file was left unchanged") from None
    return content_hash(data)


#: A writer re-reads and retries this often when another writer replaced the file in between.
_MERGE_ATTEMPTS = 5


def merge_into_current(path: Path, planned: Any, targets: Collection[str],
                       apply: Callable[[Any], Any]) -> EditResult:
    """Apply an edit planned on ``planned`` (the data as read earlier) to the file as it is now.

    Every long-running writer (``seed``; ``review`` saves) goes through here: edits made to the
    file meanwhile are kept when they do not touch the samples of ``targets``; when they do, the
    write is refused with :class:`CaseConflictError`, never an overwrite. ``apply`` gets a copy
    of the current data and returns the data to write; the candidate must be a valid case file.
    """
    from .edit import parse_candidate

    for _attempt in range(_MERGE_ATTEMPTS):
        current = read_case_text(path)
        case, problems = parse_candidate(current.text, path)
        if case is None or problems:
            raise CaseConflictError(path, "", current.hash, f"{path} changed on disk and is no longer a valid "
                                    "case file; nothing was written. Fix it, then run again.")
        now = case.document.value
        changed = sorted(t for t in targets if _samples(now, t) != _samples(planned, t))
        if changed:
            raise CaseConflictError(path, "", current.hash, f"{path} changed on disk while this command ran: the "
                                    f"samples of {', '.join(repr(t) for t in changed)} were edited; nothing "
                                    "was written. Keep your edits and run again, or revert them and resume.")
        result = rewrite(current.text, apply(json.loads(json.dumps(now))))
        if not result.changed:
            return result  # nothing to write: the file already says all of it
        _case, problems = parse_candidate(result.text, path)
        if problems:
            raise ValidationError(problems, hint="the edit would make an invalid case file and was not "
                                  "written; please report this as a bug")
        try:
            replace_text(path, result.text, expected_hash=current.hash)
        except CaseConflictError:
            continue  # replaced between our read and our write: merge again onto the newer file
        return result
    raise CaseConflictError(path, "", None, f"{path} keeps changing on disk; nothing was written. Try again "
                            "when other writers have finished.")


def _samples(data: Any, target: str) -> Any:
    targets = data.get("targets") if isinstance(data, dict) else None
    spec = targets.get(target) if isinstance(targets, dict) else None
    # A stream target's events are its samples: an edit to either conflicts.
    labelled = [spec.get("samples"), spec.get("events")] if isinstance(spec, dict) else None
    return json.dumps(labelled, sort_keys=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[bytes | None]:
    """Yield the file's current bytes while holding an exclusive flock on it.

    After a rename the lock sits on the old inode, so we re-open until the file
    we locked is still the one at ``path``.
    """
    for _attempt in range(100):
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed in finally below
        except FileNotFoundError:
            yield None
            return
        try:
            if _LOCK_CASE_FILES:
                lock_fd(handle.fileno(), blocking=True)
            try:
                same_file = os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
            except FileNotFoundError:
                same_file = False
            if same_file:
                yield handle.read()
                return
        finally:
            handle.close()  # closing releases the lock
    raise OutputError(f"cannot lock {path}: it keeps being replaced by another writer")


def _write_replace(path: Path, data: bytes) -> None:
    replace_file(path, data)
