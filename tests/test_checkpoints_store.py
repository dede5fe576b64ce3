"""The checkpoint store: layout, permissions, durability, torn tails, refusal of bad files."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from glasskit_eval.checkpoints.store import (
    COMPLETE,
    FORMAT_VERSION,
    MANIFEST_NAME,
    RECORDS_NAME,
    Checkpoint,
    CheckpointError,
    decode_records,
    encode_record,
    read_manifest,
    resolve,
)


def _create(tmp_path: Path, kind: str = "run") -> Checkpoint:
    return Checkpoint.create(tmp_path, kind, {"adapter": "a.py:f"}, {"files": {}, "videos": {}}, total=3)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_layout_and_owner_only_permissions(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    cp.close()
    assert cp.path.parent == tmp_path / "runs" / "checkpoints"
    assert cp.path.name.startswith("run-") and cp.id == cp.path.name
    assert _mode(cp.path) == 0o700 and _mode(cp.path.parent) == 0o700
    assert _mode(cp.path / MANIFEST_NAME) == 0o600 and _mode(cp.path / RECORDS_NAME) == 0o600
    manifest = json.loads((cp.path / MANIFEST_NAME).read_text())
    assert manifest["format_version"] == FORMAT_VERSION and manifest["kind"] == "run"
    assert manifest["status"] == "in_progress" and manifest["invocation"] == {"adapter": "a.py:f"}


def test_records_round_trip_and_later_records_supersede(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    cp.append((1, "c", "t", 0, None), {"status": "error"}, completed=False)
    cp.append((1, "c", "t", 1, None), {"status": "passed", "observed": {"ü": [1.5, None]}}, completed=True)
    cp.append((1, "c", "t", 0, None), {"status": "passed"}, completed=True)
    cp.wait()
    assert cp.durable_completed == 2
    cp.close()
    again = Checkpoint.open(cp.path, "run")
    try:
        assert again.resumed and again.manifest.resumes == 1
        assert again.previous == {(1, "c", "t", 0, None): {"status": "passed"},
                                  (1, "c", "t", 1, None): {"status": "passed", "observed": {"ü": [1.5, None]}}}
    finally:
        again.close()


def test_records_of_arms_are_keyed_by_their_arm_and_plain_records_keep_four_elements(tmp_path: Path) -> None:
    from glasskit_eval.checkpoints.framing import decode_records

    cp = _create(tmp_path)
    cp.append((1, "c", "t", 0, None), {"status": "passed"}, completed=True)
    cp.append((1, "c", "t", 0, "small"), {"status": "failed", "arm": "small"}, completed=True)
    cp.append((1, "c", "t", 0, "jpeg:30"), {"status": "passed", "arm": "jpeg:30"}, completed=True)
    cp.close()
    keys = [r["key"] for r in decode_records((cp.path / RECORDS_NAME).read_bytes(), cp.path).records]
    assert keys == [[1, "c", "t", 0], [1, "c", "t", 0, "small"], [1, "c", "t", 0, "jpeg:30"]]
    again = Checkpoint.open(cp.path, "run")
    try:
        # One sample, three records: none supersedes another.
        assert again.previous == {(1, "c", "t", 0, None): {"status": "passed"},
                                  (1, "c", "t", 0, "small"): {"status": "failed", "arm": "small"},
                                  (1, "c", "t", 0, "jpeg:30"): {"status": "passed", "arm": "jpeg:30"}}
    finally:
        again.close()


def test_flush_waits_until_records_are_on_disk(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    for i in range(50):
        cp.append((1, "c", "t", i, None), {"i": i}, completed=True)
    asyncio.run(cp.flush())
    # Everything appended before flush() is readable by another process now.
    decoded = decode_records((cp.path / RECORDS_NAME).read_bytes(), cp.path)
    assert [r["payload"]["i"] for r in decoded.records] == list(range(50))
    cp.close()


@pytest.mark.parametrize("tail", [
    b"0000",                                   # cut inside the checksum
    b"1234abcd {\"key\":[1,\"c\",\"t\",9],\"pay",  # cut inside the JSON
    b"\x00" * 300,                             # zeroed blocks after power loss
    b"deadbeef {\"key\":[1,\"c\",\"t\",9],\"payload\":{}}\n",  # whole line, wrong checksum
    b"garbage\n\x00\x00\n",                    # several bad lines, none good after them
])
def test_torn_tail_is_ignored_and_cut_before_appending(tmp_path: Path, tail: bytes) -> None:
    cp = _create(tmp_path)
    cp.append((1, "c", "t", 0, None), {"n": 0}, completed=True)
    cp.close()
    records = cp.path / RECORDS_NAME
    intact = records.read_bytes()
    with open(records, "ab") as handle:
        handle.write(tail)
    again = Checkpoint.open(cp.path, "run")
    assert again.previous == {(1, "c", "t", 0, None): {"n": 0}}
    assert records.read_bytes() == intact  # the torn bytes are gone
    again.append((1, "c", "t", 1, None), {"n": 1}, completed=True)
    again.close()
    third = Checkpoint.open(cp.path, "run")
    third.close()
    assert set(third.previous) == {(1, "c", "t", 0, None), (1, "c", "t", 1, None)}


def test_damage_before_intact_records_is_refused(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    for i in range(3):
        cp.append((1, "c", "t", i, None), {"n": i}, completed=True)
    cp.close()
    records = cp.path / RECORDS_NAME
    lines = records.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"n":1', b'"n":7')  # bit rot in the middle: checksum no longer matches
    records.write_bytes(b"\n".join(lines))
    with pytest.raises(CheckpointError, match="damaged at line 3"):
        Checkpoint.open(cp.path, "run")


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    cp.close()
    manifest = json.loads((cp.path / MANIFEST_NAME).read_text())
    manifest["format_version"] = FORMAT_VERSION + 1
    (cp.path / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=r"newer glasskit_eval.*upgrade"):
        Checkpoint.open(cp.path, "run")


@pytest.mark.parametrize("text, message", [
    ("not json", "not valid JSON"),
    ('{"hello": 1}', "not a glasskit_eval checkpoint"),
    ('{"format": "glasskit_eval-checkpoint", "format_version": 1}', "incomplete or damaged"),
    ('{"format": "glasskit_eval-checkpoint", "format_version": "1"}', "not an integer"),
])
def test_foreign_or_damaged_manifests_are_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / MANIFEST_NAME).write_text(text)
    with pytest.raises(CheckpointError, match=message):
        read_manifest(tmp_path)


def test_missing_manifest_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"could not read checkpoint manifest .*manifest\.json"):
        Checkpoint.open(tmp_path / "nothere", "run")


def test_records_of_another_checkpoint_are_refused(tmp_path: Path) -> None:
    first, second = _create(tmp_path), _create(tmp_path)
    first.close()
    second.close()
    (first.path / RECORDS_NAME).write_bytes((second.path / RECORDS_NAME).read_bytes())
    with pytest.raises(CheckpointError, match="does not belong to checkpoint"):
        Checkpoint.open(first.path, "run")


def test_kind_and_status_are_checked(tmp_path: Path) -> None:
    seed = _create(tmp_path, kind="seed")
    seed.close()
    assert seed.path.name.startswith("seed-")
    with pytest.raises(CheckpointError, match="'seed' checkpoint, not a 'run' one"):
        Checkpoint.open(seed.path, "run")
    done = _create(tmp_path)
    done.close()
    done.set_status(COMPLETE)
    with pytest.raises(CheckpointError, match="already complete"):
        Checkpoint.open(done.path, "run")


@pytest.mark.skipif(sys.platform == "win32", reason="advisory locks are POSIX-only")
def test_a_checkpoint_in_use_cannot_be_opened_twice(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    try:
        with pytest.raises(CheckpointError, match="in use by another"):
            Checkpoint.open(cp.path, "run")
    finally:
        cp.close()
    Checkpoint.open(cp.path, "run").close()


def test_discard_removes_the_directory(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    cp.append((1, "c", "t", 0, None), {}, completed=False)
    cp.discard()
    assert not cp.path.exists()


def test_record_framing_is_crc_then_compact_json() -> None:
    line = encode_record({"key": [1, "c", "t", 0], "payload": {"x": "é"}})
    crc, _, body = line.rstrip(b"\n").partition(b" ")
    assert len(crc) == 8 and json.loads(body) == {"key": [1, "c", "t", 0], "payload": {"x": "é"}}
    decoded = decode_records(encode_record({"format": "h"}) + line + line[:5], Path("x"))
    assert decoded.header == {"format": "h"} and len(decoded.records) == 1 and decoded.torn


def test_resume_value_is_a_path_or_an_id(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    cp.close()
    assert resolve(str(cp.path), Path("elsewhere")) == cp.path.resolve()
    assert resolve(cp.id, tmp_path) == cp.path.resolve()


# -- hand-edited checkpoints and full disks ---------------------------------


@pytest.mark.parametrize(("field", "value", "message"), [
    ("total", -3, "total is missing or not a non-negative integer"),
    ("total", "5", "total is missing or not a non-negative integer"),
    ("total", True, "total is missing or not a non-negative integer"),
    ("total", 1.5, "total is missing or not a non-negative integer"),
    ("resumes", -1, "resumes is not a non-negative integer"),
    ("status", "done", "status is neither"),
    ("status", 7, "status is not a non-empty string"),
    ("id", "", "id is not a non-empty string"),
    ("eval_dir", ["/x"], "eval_dir is not a non-empty string"),
    ("invocation", [["adapter", "a.py:f"]], "invocation is missing or not an object"),
    ("invocation", "adapter", "invocation is missing or not an object"),
    ("fingerprints", None, "fingerprints is missing or not an object"),
    ("fingerprints", {"files": 5}, "fingerprints.files is not an object"),
    ("fingerprints", {"videos": ["a.mp4"]}, "fingerprints.videos is not an object"),
    ("created_at", None, "created_at is not a non-empty string"),
    ("kind", "r\ud800n", "lone surrogate"),
])
def test_hand_edited_manifest_fields_are_refused(tmp_path: Path, field: str, value: object, message: str) -> None:
    cp = _create(tmp_path)
    cp.close()
    where = cp.path / MANIFEST_NAME
    manifest = json.loads(where.read_text())
    manifest[field] = value
    where.write_text(json.dumps(manifest))  # ensure_ascii: the surrogate is written as \ud800
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.open(cp.path, "run")


@pytest.mark.parametrize("record", [
    {"key": [1, "c", "t"], "payload": {}},
    {"key": ["1", "c", "t", 0], "payload": {}},
    {"key": [0, "c", "t", 0], "payload": {}},
    {"key": [1, "c", "t", -1], "payload": {}},
    {"key": [1, "c", "t", True], "payload": {}},
    {"key": [1, 5, "t", 0], "payload": {}},
    {"key": "1/c/t/0", "payload": {}},
    {"key": [1, "c", "t", 0], "payload": []},
    {"key": [1, "c", "t", 0], "payload": {"reason": "x\udc80"}},
    {"payload": {}},
    {"key": [1, "c", "t", 0, ""], "payload": {"arm": ""}},
    {"key": [1, "c", "t", 0, 3], "payload": {"arm": 3}},
    {"key": [1, "c", "t", 0, "small"], "payload": {"arm": "large"}},
    {"key": [1, "c", "t", 0], "payload": {"arm": "small"}},
    {"key": [1, "c", "t", 0, "small", 1], "payload": {"arm": "small"}},
])
def test_hand_edited_records_are_refused(tmp_path: Path, record: dict[str, object]) -> None:
    cp = _create(tmp_path)
    cp.append((1, "c", "t", 0, None), {"n": 0}, completed=True)
    cp.close()
    body = json.dumps(record, separators=(",", ":")).encode()  # ensure_ascii keeps it encodable
    import zlib
    with (cp.path / RECORDS_NAME).open("ab") as handle:
        handle.write(b"%08x %s\n" % (zlib.crc32(body), body))  # a valid checksum: edited, not torn
    with pytest.raises(CheckpointError, match="record 3 passes its checksum but is not a record"):
        Checkpoint.open(cp.path, "run")


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on a real, full file system (a tiny tmpfs) or, where mounting is not
    allowed, one where writes fail with ENOSPC (the only fault we cannot cause otherwise)."""
    import errno
    import os
    import subprocess

    mount = tmp_path / "full"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)],
                             capture_output=True).returncode == 0 if os.geteuid() == 0 else False
    try:
        if mounted:
            with (mount / "filler").open("wb", buffering=0) as filler, pytest.raises(OSError):
                while True:
                    filler.write(b"x" * 4096)
        else:
            from glasskit_eval.checkpoints import store

            def no_space(fd: int, data: object) -> int:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            monkeypatch.setattr(store.os, "write", no_space)
        yield mount
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], check=True)


def test_disk_full_while_creating_a_checkpoint_is_an_output_error(full_disk: Path, tmp_path: Path) -> None:
    from glasskit_eval.errors import OutputError

    with pytest.raises(OutputError, match=r"cannot create checkpoint under .*No space left on device; free disk"):
        Checkpoint.create(tmp_path, "run", {"adapter": "a.py:f"}, {"files": {}}, total=3, root=full_disk / "cp")
    assert list((full_disk / "cp").iterdir()) == []  # nothing half-made is left
