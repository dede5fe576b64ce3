"""Input fingerprints: what they record, what changes they name, and digests computed ahead."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from glasskit_eval.checkpoints.fingerprints import VideoDigests, describe_changes, fingerprint


def test_fingerprints_say_what_changed(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    case, other, video = tmp_path / "cases" / "a.yaml", tmp_path / "cases" / "b.yaml", tmp_path / "cases" / "v.mp4"
    case.write_text("one")
    video.write_bytes(b"0" * 100)
    before = fingerprint(tmp_path, [case], [video])
    assert describe_changes(before, fingerprint(tmp_path, [case], [video])) == []
    case.write_text("two")
    video.write_bytes(b"0" * 120)
    other.write_text("new")
    after = fingerprint(tmp_path, [case, other], [video])
    assert describe_changes(before, after) == [
        "file cases/a.yaml changed", "file cases/b.yaml was added",
        "video cases/v.mp4 changed (size 100 -> 120 bytes)"]
    video.unlink()
    assert "video cases/v.mp4 was removed" in describe_changes(before, fingerprint(tmp_path, [case], [video]))


def test_large_videos_are_fingerprinted_by_size_and_edges(tmp_path: Path) -> None:
    video = tmp_path / "big.mp4"
    video.write_bytes(b"a" * (9 << 20))
    first = fingerprint(tmp_path, [], [video])["videos"]["big.mp4"]
    assert first["sha256"].startswith("edges:") and first["size"] == 9 << 20
    with open(video, "r+b") as handle:
        handle.write(b"b")  # header byte changed, same size
    assert fingerprint(tmp_path, [], [video])["videos"]["big.mp4"] != first



def _video(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "v.mp4"
    path.write_bytes(data)
    return path


def test_digests_computed_ahead_are_the_plain_digests(tmp_path: Path) -> None:
    small, big = tmp_path / "small.mp4", tmp_path / "big.mp4"
    small.write_bytes(os.urandom(3000))
    big.write_bytes(os.urandom(9 << 20))
    digests = VideoDigests()
    digests.start(small)
    digests.start(big)
    digests.start(small)  # once per file
    assert fingerprint(tmp_path, [], [small, big], digests) == fingerprint(tmp_path, [], [small, big])
    assert fingerprint(tmp_path, [], [small], digests)["videos"]["small.mp4"]["sha256"] == \
        hashlib.sha256(small.read_bytes()).hexdigest()


def test_a_video_changed_after_it_was_queued_is_hashed_again(tmp_path: Path) -> None:
    video = _video(tmp_path, b"a" * 5000)
    digests = VideoDigests()
    digests.start(video)
    assert digests.digest(video, 5000) == hashlib.sha256(b"a" * 5000).hexdigest()
    video.write_bytes(b"b" * 5000)
    os.utime(video, ns=(1, 1))  # a different modification time, same size
    assert digests.digest(video, 5000) == hashlib.sha256(b"b" * 5000).hexdigest()


def test_each_video_is_read_once_per_run(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import glasskit_eval.checkpoints.fingerprints as module

    video = _video(tmp_path, b"c" * 4000)
    reads: list[Path] = []
    original = module.video_digest
    monkeypatch.setattr(module, "video_digest", lambda path, size: reads.append(path) or original(path, size))
    digests = VideoDigests()
    first = fingerprint(tmp_path, [], [video], digests)  # before planning (a resume's check)
    digests.start(video)  # planning meets the video
    assert fingerprint(tmp_path, [], [video], digests) == first
    assert reads == [video]


def test_missing_videos_are_recorded_and_the_worker_thread_ends(tmp_path: Path) -> None:
    digests = VideoDigests()
    digests.start(tmp_path / "gone.mp4")
    video = _video(tmp_path, b"d" * 10)
    digests.start(video)
    assert fingerprint(tmp_path, [], [tmp_path / "gone.mp4"], digests)["videos"] == {"gone.mp4": None}
    digests.digest(video, 10)
    for thread in threading.enumerate():
        if thread.name == "glasskit-digest":
            thread.join(timeout=5)
    assert not [t for t in threading.enumerate() if t.name == "glasskit-digest"]
