"""Atomic, permission-keeping, conflict-checked case-file writes."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from evalkit import load_case

from glasskit_eval.cases.write import (
    CaseConflictError,
    content_hash,
    read_case_text,
    replace_text,
)
from glasskit_eval.errors import OutputError, ValidationError
from glasskit_eval.yamltext.edit import DeleteBlockKey, Edit, EditResult, SetBlockKey, apply_edits

DATA = Path(__file__).parent / "data" / "yamledit"


@pytest.fixture
def case(tmp_path: Path) -> Path:
    path = tmp_path / "cases" / "hallway.yaml"
    path.parent.mkdir()
    shutil.copyfile(DATA / "commented.yaml", path)
    return path


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_read_keeps_line_endings_and_hashes_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "crlf.yaml"
    shutil.copyfile(DATA / "crlf.yaml", path)
    case = read_case_text(path)
    assert "\r\n" in case.text
    assert case.hash == hashlib.sha256(path.read_bytes()).hexdigest() == content_hash(case.text)


def test_read_errors_are_validation_problems(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cannot read file"):
        read_case_text(tmp_path / "missing.yaml")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"video: caf\xe9.mp4\n")
    with pytest.raises(ValidationError, match="not UTF-8"):
        read_case_text(bad)


def edit_case_file(path: Path, edits: list[Edit], *, expected_hash: str | None = None) -> tuple[EditResult, str]:
    """Read, edit with the minimal-diff writer and write back under the hash guard, as review does."""
    case = read_case_text(path)
    if expected_hash is not None and case.hash != expected_hash:
        raise CaseConflictError(case.path, expected_hash, case.hash)
    result = apply_edits(case.text, edits)
    if not result.changed:
        return result, case.hash
    return result, replace_text(case.path, result.text, expected_hash=case.hash)


def test_edit_writes_the_minimal_diff_and_returns_the_new_hash(case: Path) -> None:
    before = case.read_bytes()
    result, new_hash = edit_case_file(case, [SetBlockKey("dog_visible", 1, "expect", True)])
    after = case.read_bytes()
    assert not result.fallback and new_hash == hashlib.sha256(after).hexdigest()
    assert after == before.replace(b"            every_s: 1.0\n",
                                   b"            every_s: 1.0\n            expect: true\n")
    loaded, problems = load_case(case)
    assert problems == [] and loaded is not None
    assert leftovers(case.parent) == []


def test_unchanged_edit_does_not_touch_the_file(case: Path) -> None:
    inode = case.stat().st_ino
    result, digest = edit_case_file(case, [DeleteBlockKey("dog_visible", 1, "expect")])
    assert not result.changed and digest == read_case_text(case).hash
    assert case.stat().st_ino == inode


def test_permissions_are_kept(case: Path) -> None:
    os.chmod(case, 0o640)
    replace_text(case, "video: x.mp4\n")
    assert stat.S_IMODE(case.stat().st_mode) == 0o640
    os.chmod(case, 0o604)
    edit_case_file(case, [])
    replace_text(case, "video: y.mp4\n")
    assert stat.S_IMODE(case.stat().st_mode) == 0o604


def test_new_file_gets_umask_permissions_not_private_temp_ones(tmp_path: Path) -> None:
    # Run in a child so changing the umask cannot race other tests.
    target = tmp_path / "new.yaml"
    code = ("import os, sys; from pathlib import Path; os.umask(0o022); "
            "from glasskit_eval.cases.write import replace_text; replace_text(Path(sys.argv[1]), 'a: 1\\n')")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    subprocess.run([sys.executable, "-c", code, str(target)], check=True, env=env, timeout=60)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert target.read_text() == "a: 1\n"


def test_conflict_when_the_file_changed_since_it_was_read(case: Path) -> None:
    seen = read_case_text(case)
    someone_else = seen.text.replace("min_pass_rate: 0.9", "min_pass_rate: 0.8")
    case.write_text(someone_else, encoding="utf-8")
    with pytest.raises(CaseConflictError, match="changed on disk since it was read; nothing was written"):
        edit_case_file(case, [SetBlockKey("dog_visible", 1, "expect", True)], expected_hash=seen.hash)
    with pytest.raises(CaseConflictError) as info:
        replace_text(case, seen.text, expected_hash=seen.hash)
    assert info.value.expected == seen.hash and info.value.actual == content_hash(someone_else)
    assert case.read_text(encoding="utf-8") == someone_else
    assert leftovers(case.parent) == []
    # With the current hash the same write goes through.
    _result, digest = edit_case_file(case, [SetBlockKey("dog_visible", 1, "expect", True)],
                                     expected_hash=content_hash(someone_else))
    assert digest == read_case_text(case).hash


def test_conflict_when_the_file_was_deleted(case: Path) -> None:
    digest = read_case_text(case).hash
    case.unlink()
    with pytest.raises(CaseConflictError, match="was deleted"):
        replace_text(case, "video: x.mp4\n", expected_hash=digest)
    assert not case.exists()


def test_conflict_is_an_output_error() -> None:
    assert issubclass(CaseConflictError, OutputError)


@pytest.mark.parametrize("broken", ["replace", "fsync"])
def test_crash_during_the_write_leaves_the_original_and_no_temp_file(
    case: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    before = case.read_bytes()

    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, broken, fail)
    with pytest.raises(OutputError, match=r"cannot write .*hallway\.yaml: No space left on device; "
                                          "the file was left unchanged"):
        edit_case_file(case, [SetBlockKey("dog_visible", 1, "expect", True)])
    monkeypatch.undo()
    assert case.read_bytes() == before
    assert leftovers(case.parent) == []


def test_interrupt_during_the_write_cleans_up_and_propagates(
    case: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = case.read_bytes()

    def interrupt(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupt)
    with pytest.raises(KeyboardInterrupt):
        replace_text(case, "video: x.mp4\n")
    monkeypatch.undo()
    assert case.read_bytes() == before
    assert leftovers(case.parent) == []


def test_unwritable_location_is_reported(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(OutputError, match=r"cannot write .*file/case\.yaml"):
        replace_text(not_a_dir / "case.yaml", "video: x.mp4\n")
