"""One lazy decode pass (``evaluation._ordering.DecodePass``) serves single frames and clips alike.

The same pass, on a real decode of the self-identifying B-frame fixture, asked for times out of
presentation order and more than once: each distinct time is decoded once whatever the store, a
frame decoded before its turn waits in the store until its last use, and only what a use gets
differs: a frame of its own from a :class:`FrameStore`, a share of one image from a
:class:`SharedStore`.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from framecode import read_frame_index
from test_evaluation_clipframes import Counts, planned

from glasskit_eval.evaluation._clipframes import SharedFrame, SharedStore, frame_times
from glasskit_eval.evaluation._framestore import FrameStore
from glasskit_eval.evaluation._ordering import DecodePass
from glasskit_eval.plan.schedule import ScheduledSample
from glasskit_eval.video.frames import DecodedFrame, decode_at

pytestmark = pytest.mark.frames


def asked(samples: list[ScheduledSample]) -> list[Fraction]:
    """Every use of every clip frame, declaration order: later times come first, and times repeat."""
    return [t for s in samples for t in sorted(set(frame_times(s)), reverse=True)]


def test_a_pass_decodes_each_time_once_and_keeps_early_frames_for_their_uses(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path, samples = planned(tmp_path)
    times = asked(samples)
    assert len(times) > 2 * len(set(times))  # every time is asked for more than twice on average
    for store in (FrameStore(), SharedStore()):
        counts = Counts(monkeypatch)
        got = []
        pass_ = DecodePass(0, path, samples, decode_at, store, frame_times)
        frames: list[DecodedFrame | SharedFrame] = [pass_.take(t) for t in times]
        for frame in frames:
            got.append((frame.index, read_frame_index(frame.image)))
        pass_.close()
        assert max(counts.decoded.values()) == 1 and max(counts.converted.values()) == 1
        # Each use got its time's frame (the pixels say so), and nothing is left kept.
        firsts = {t: f.index for t, f in reversed(list(zip(times, frames)))}
        assert [i for i, _p in got] == [firsts[t] for t in times] and all(i == p for i, p in got)
        assert not any((0, t) in store for t in set(times))
        by_time: dict[Fraction, set[int]] = {}
        for t, frame in zip(times, frames):
            by_time.setdefault(t, set()).add(id(frame.image))
        if isinstance(store, SharedStore):
            # One image per time, however many uses; released by each holder.
            assert all(len(ids) == 1 for ids in by_time.values())
            for frame in frames:
                assert isinstance(frame, SharedFrame)
                frame.release()
        else:
            # A frame of its own for every use.
            assert sum(len(ids) for ids in by_time.values()) == len(times)
            for frame in frames:
                frame.image.close()
        store.close()


def test_a_pass_that_loses_its_frame_reports_the_time(tmp_path: Path) -> None:
    path, samples = planned(tmp_path)
    pass_ = DecodePass(0, path, samples[:1], decode_at, FrameStore())
    with pytest.raises(AssertionError, match="never produced the frame for 99s"):
        pass_.take(Fraction(99))
    pass_.close()
