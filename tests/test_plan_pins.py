"""The frame-lock format and comparison, as pure functions."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from fractions import Fraction

import pytest

from glasskit_eval.plan.pins import (
    MOVED,
    PIXELS,
    SLIGHT,
    TIME_EDITED,
    UNPINNED,
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
