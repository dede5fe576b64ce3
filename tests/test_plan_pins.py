"""The frame-lock format and comparison, as pure functions."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from fractions import Fraction

import pytest

from glasskit_eval.cases.model import ClipSpec
from glasskit_eval.plan.pins import (
    MOVED,
    PIXELS,
    SLIGHT,
    TIME_EDITED,
    UNPINNED,
    ClipFramePin,
    ClipPin,
    Decoder,
    FramePin,
    LockFormatError,
    PinFile,
    compare,
    parse_pin_file,
    review_status,
)
from glasskit_eval.video.fingerprint import hash_distance

pytestmark = pytest.mark.frames

DECODER = Decoder("18.1.0", "8.1.2", "h264")
SHA = "a" * 64


def pin(target: str, index: int, time: str, frame: int, phash: str = "00000000000000ff") -> FramePin:
    t = Fraction(time)
    return FramePin(target, index, t, frame, Fraction(frame, 10), (128, 72), f"{frame:064x}", phash)


LOCK = PinFile("clip", "clip.mp4", SHA, DECODER, (pin("b", 2, "0.5", 5), pin("a", 0, "0", 0),
                                                    pin("a", 1, "1/2", 5)))


def test_render_sorts_and_round_trips() -> None:
    text = LOCK.render()
    lines = text.splitlines()
    assert len(lines) == 4 and '"frames_lock": 1' in lines[0]
    assert [line.split('"target": ')[1][:3] for line in lines[1:]] == ['"a"', '"a"', '"b"']
    assert parse_pin_file(text, "x.lock") == replace(LOCK, pins=tuple(sorted(LOCK.pins, key=lambda p: p.order)))


@pytest.mark.parametrize("text, where", [
    ("", "empty frame lock"), ("{}\n", "x.lock:1: not a frame lock"), ("[1]\n", "x.lock:1: damaged"),
    (LOCK.render() + '{"target": "a"}\n', "x.lock:5: damaged frame lock entry"),
    (LOCK.render().replace('"frame_index": 5', '"frame_index": true', 1), "x.lock:3: damaged"),
])
def test_damaged_locks_name_the_line(text: str, where: str) -> None:
    with pytest.raises(LockFormatError, match=where):
        parse_pin_file(text, "x.lock")


def test_damaged_lock_times_are_refused_at_once() -> None:
    # A JSON number beyond floats (read as inf) used to escape as an OverflowError traceback.
    text = LOCK.render().replace('"media_time": "0"', '"media_time": 1e999', 1)
    with pytest.raises(LockFormatError, match=r"x\.lock:2: damaged frame lock entry"):
        parse_pin_file(text, "x.lock")
    # Fraction("1e999999999") builds a 10**999999999 integer: minutes. Run apart, so a regression
    # fails on the timeout instead of stalling the suite.
    code = textwrap.dedent(f"""
        from glasskit_eval.plan.pins import LockFormatError, parse_pin_file
        text = {LOCK.render().replace('"time": "0"', '"time": "1e999999999"', 1)!r}
        try:
            parse_pin_file(text, "x.lock")
        except LockFormatError as exc:
            print(exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True)
    assert done.stdout.startswith("x.lock:2: damaged frame lock entry ('1e999999999' is out of range")


def test_compare_kinds_and_causes() -> None:
    current = [pin("a", 0, "0", 0), pin("a", 1, "0.5", 4), pin("b", 2, "0.5", 5, phash="00000000000000fe")]
    current[2] = replace(current[2], pixel_sha256="f" * 64)
    found = compare(LOCK, current, "b" * 64, DECODER)
    assert [f.kind for f in found] == [MOVED, SLIGHT]
    assert "re-encoded" in found[0].message and found[0].old is not None and found[0].old.frame_index == 5
    upgraded = Decoder("19.0.0", "8.2", "h264")
    found = compare(LOCK, [replace(current[2], phash="ffffffffffffff00")], SHA, upgraded)
    assert [f.kind for f in found] == [PIXELS] and "decoder changed (PyAV 18.1.0" in found[0].message
    assert found[0].problem


def test_edited_times_and_unpinned_samples() -> None:
    # Sample 1 moved from 0.5 s to 0.6 s (frame 6): an edit. A new sample at 0.9 s: unpinned.
    current = [pin("a", 1, "0.6", 6), pin("a", 3, "0.9", 9)]
    found = compare(LOCK, current, SHA, DECODER)
    assert [(f.kind, f.sample_index) for f in found] == [(TIME_EDITED, 1), (UNPINNED, 3)]
    assert "time edited from 0.5s; now frame 6 at 0.6s (pinned: frame 5 at 0.5s)" in found[0].message
    assert not found[1].problem
    # The pinned time is still used by another sample: that pin is not this sample's.
    found = compare(LOCK, [pin("a", 1, "0.6", 6)], SHA, DECODER, [("a", Fraction(1, 2)), ("a", Fraction(6, 10))])
    assert [f.kind for f in found] == [UNPINNED]


def test_review_status() -> None:
    ok = review_status(LOCK, pin("a", 1, "0.5", 5), video_sha256=SHA, decoder=DECODER)
    assert ok == {"status": "ok", "problem": False, "message": "pinned: frame 5 at 0.5s"}
    moved = review_status(LOCK, pin("a", 1, "0.5", 4), video_sha256="c" * 64, decoder=DECODER)
    assert moved["status"] == "moved" and moved["problem"] is True
    assert review_status(None, pin("a", 1, "0.5", 4), video_sha256=SHA, decoder=DECODER)["status"] == "no_lock"


def test_updated_replaces_keeps_and_drops() -> None:
    lock = LOCK.updated([pin("a", 1, "0.5", 4)], keep={("a", 1), ("b", 2)})
    assert [(p.target, p.sample_index, p.frame_index) for p in lock.pins] == [("a", 1, 4), ("b", 2, 5)]


def test_hash_distance() -> None:
    assert hash_distance("00", "ff") == 8 and hash_distance("zz", "00") == 64


# -- clip samples ------------------------------------------------------------------------------

def clip_pin(index: int, time: str, frames: list[tuple[str, int]], spec: ClipSpec | None = None,
             sha: str | None = None) -> FramePin:
    """A clip sample's pin: ``frames`` are (requested time, frame index) pairs; hashes follow the index."""
    spec = spec or ClipSpec(before_s=Fraction(1, 5), every_s=Fraction(1, 10))
    clip = ClipPin(spec, tuple(ClipFramePin(Fraction(t), i, Fraction(i, 10), sha or f"{i:064x}", "00000000000000ff")
                               for t, i in frames))
    return replace(pin("a", index, time, frames[-1][1]), clip=clip)


def test_a_single_frame_line_is_as_before_clips() -> None:
    assert PinFile("c", "c.mp4", SHA, DECODER, (pin("a", 0, "1/2", 5),)).render().splitlines()[1] == (
        '{"display_size": [128, 72], "frame_index": 5, "media_time": "1/2", "media_timestamp_s": 0.5, '
        '"phash": "00000000000000ff", "pixel_sha256": "' + f"{5:064x}" + '", "sample_index": 0, '
        '"target": "a", "time": "1/2", "timestamp_s": 0.5}')


def test_a_clip_line_holds_its_setting_and_every_frame_and_round_trips() -> None:
    clipped = clip_pin(0, "0.5", [("0.3", 3), ("0.4", 4), ("0.5", 5)])
    lock = PinFile("c", "c.mp4", SHA, DECODER, (clipped, pin("a", 1, "1", 10)))
    line = json.loads(lock.render().splitlines()[1])
    assert line["clip"]["before_s"] == "1/5" and line["clip"]["every_s"] == "1/10"
    assert line["clip"]["edge"] == "error" and line["clip"]["after_s"] == "0"
    assert [(f["time"], f["frame_index"]) for f in line["clip"]["frames"]] == [("3/10", 3), ("2/5", 4), ("1/2", 5)]
    assert "clip" not in json.loads(lock.render().splitlines()[2])
    assert parse_pin_file(lock.render(), "x.lock") == lock
    damaged = lock.render().replace('"frame_index": 4', '"frame_index": "4"', 1)
    with pytest.raises(LockFormatError, match=r"x\.lock:2: damaged"):
        parse_pin_file(damaged, "x.lock")


def test_clip_frames_that_moved_are_problems_and_edits_are_named() -> None:
    old = clip_pin(0, "0.5", [("0.3", 3), ("0.4", 4), ("0.5", 5)])
    lock = PinFile("c", "c.mp4", SHA, DECODER, (old,))
    assert compare(lock, [old], SHA, DECODER) == []
    # One clip frame moved; the anchor did not.
    moved = clip_pin(0, "0.5", [("0.3", 2), ("0.4", 4), ("0.5", 5)])
    [found] = compare(lock, [moved], "b" * 64, DECODER)
    assert found.kind == MOVED and found.problem
    assert found.message == ("a sample 0 at 0.5s: clip frame at 0.3s now resolves to frame 2 at 0.2s (pinned: "
                             "frame 3 at 0.3s); 1 of 3 clip frames moved; the video was re-encoded or replaced "
                             "(its SHA-256 differs from the lock's)")
    assert review_status(lock, moved, video_sha256=SHA, decoder=DECODER)["status"] == MOVED
    # A longer clip of the same setting (an every-frame clip of a re-timed video).
    longer = clip_pin(0, "0.5", [("0.2", 2), ("0.3", 3), ("0.4", 4), ("0.5", 5)])
    [found] = compare(lock, [longer], SHA, DECODER)
    assert found.kind == MOVED and "its clip now holds 4 frames, 2..5" in found.message
    # The setting was edited: the label saw other frames.
    edited = clip_pin(0, "0.5", [("0.4", 4), ("0.5", 5)], ClipSpec(before_s=Fraction(1, 10), every_s=Fraction(1, 10)))
    [found] = compare(lock, [edited], SHA, DECODER)
    assert found.kind == TIME_EDITED and found.problem
    assert "clip edited from [t-0.2, t+0.0] every 0.1s to [t-0.1, t+0.0] every 0.1s" in found.message
    # Pixels of one clip frame: beyond tolerance is a problem, within it a note.
    changed = replace(old, clip=replace(old.clip, frames=(*old.clip.frames[:2], replace(  # type: ignore[union-attr]
        old.clip.frames[2], pixel_sha256="f" * 64, phash="ffffffffffffffff"))))  # type: ignore[union-attr]
    [found] = compare(lock, [changed], SHA, DECODER)
    assert found.kind == PIXELS and "pixels of clip frame 5 at 0.5s changed beyond tolerance" in found.message
    slight = replace(changed, clip=replace(changed.clip, frames=(*old.clip.frames[:2], replace(  # type: ignore[union-attr]
        old.clip.frames[2], pixel_sha256="f" * 64))))  # type: ignore[union-attr]
    [found] = compare(lock, [slight], SHA, DECODER)
    assert found.kind == SLIGHT and not found.problem


def test_a_clip_added_after_pinning_is_a_note() -> None:
    lock = PinFile("c", "c.mp4", SHA, DECODER, (pin("a", 0, "0.5", 5),))
    now = clip_pin(0, "0.5", [("0.3", 3), ("0.4", 4), ("0.5", 5)])
    [found] = compare(lock, [now], SHA, DECODER)
    assert found.kind == UNPINNED and not found.problem
    assert found.message == "a sample 0 at 0.5s: its clip of 3 frames is not pinned; run `validate --pin` to pin it"
