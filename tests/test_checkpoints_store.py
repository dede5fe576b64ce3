"""The checkpoint store: layout, permissions, durability, torn tails, refusal of bad files."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
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
    cp.append((1, "c", "t", 0), {"status": "error"}, completed=False)
    cp.append((1, "c", "t", 1), {"status": "passed", "observed": {"ü": [1.5, None]}}, completed=True)
    cp.append((1, "c", "t", 0), {"status": "passed"}, completed=True)
    cp.wait()
    assert cp.durable_completed == 2
    cp.close()
    again = Checkpoint.open(cp.path, "run")
    try:
        assert again.resumed and again.manifest.resumes == 1
        assert again.previous == {(1, "c", "t", 0): {"status": "passed"},
                                  (1, "c", "t", 1): {"status": "passed", "observed": {"ü": [1.5, None]}}}
    finally:
        again.close()


def test_flush_waits_until_records_are_on_disk(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    for i in range(50):
        cp.append((1, "c", "t", i), {"i": i}, completed=True)
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
    cp.append((1, "c", "t", 0), {"n": 0}, completed=True)
    cp.close()
    records = cp.path / RECORDS_NAME
    intact = records.read_bytes()
    with open(records, "ab") as handle:
        handle.write(tail)
    again = Checkpoint.open(cp.path, "run")
    assert again.previous == {(1, "c", "t", 0): {"n": 0}}
    assert records.read_bytes() == intact  # the torn bytes are gone
    again.append((1, "c", "t", 1), {"n": 1}, completed=True)
    again.close()
    third = Checkpoint.open(cp.path, "run")
    third.close()
    assert set(third.previous) == {(1, "c", "t", 0), (1, "c", "t", 1)}


def test_damage_before_intact_records_is_refused(tmp_path: Path) -> None:
    cp = _create(tmp_path)
    for i in range(3):
        cp.append((1, "c", "t", i), {"n": i}, completed=True)
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
    cp.append((1, "c", "t", 0), {}, completed=False)
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
