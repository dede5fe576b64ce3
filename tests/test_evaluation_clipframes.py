"""Clip samples' frames (``evaluation._clipframes``): each distinct frame decoded and converted once,
shared by reference between overlapping clips, spilled past the memory budget, and right.

Decodes and RGB conversions are counted at the frame engine's own hooks (``_segments.located``
runs once per frame the decoder outputs, ``_segments.to_display_image`` once per conversion) on
real decodes of the self-identifying B-frame fixture, whose pixels say which frame they are.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from evalkit import make_eval
from framecode import read_frame_index

from glasskit_eval.evaluation._clipframes import (
    HeldFrames,
    SharedFrame,
    SharedStore,
    clip_items,
    frame_times,
)
from glasskit_eval.evaluation._ordering import DECLARATION, TIME
from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters, ScheduledSample
from glasskit_eval.video import _segments as segments
from glasskit_eval.video.frames import decode_at

pytestmark = pytest.mark.frames

VIDEO = "bframes_h264.mp4"

#: Sliding clips: a sample every 0.08 s, each the 0.48 s before it every 0.08 s (B-frames, 25 fps):
#: every frame of a clip is in up to six other clips. A second block repeats some anchors
#: out of time order, and a sample without a clip shares its frame with the clips.
CASE = """\
video: bframes_h264.mp4
sampling: {every_s: 0.08}
targets:
  motion:
    sample_defaults:
      clip: {before_s: 0.48, every_s: 0.08}
    samples:
    - range: [0.48, 1.9]
      expect: null
  still:
    samples:
    - at: [1.2, 0.6]
      clip: {before_s: 0.24}
      expect: null
    - at: 1.0
      expect: null
"""


def planned(tmp_path: Path, case: str = CASE) -> tuple[Path, list[ScheduledSample]]:
    eval_dir = make_eval(tmp_path, {"c": case}, videos=(VIDEO,))
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    return plan.cases[0].video_path, list(plan.cases[0].samples)


class Counts:
    """Decodes and conversions per frame index, at the engine's hooks."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.decoded: Counter[int] = Counter()
        self.converted: Counter[int] = Counter()
        locate, convert = segments.located, segments.to_display_image

        def located(frame: Any, table: Any) -> int | None:
            index = locate(frame, table)
            if index is not None:
                self.decoded[index] += 1
            return index

        def to_display_image(frame: Any, table: Any) -> Any:
            index = table.index_of(frame.pts)
            self.converted[index] += 1
            return convert(frame, table)

        monkeypatch.setattr(segments, "located", located)
        monkeypatch.setattr(segments, "to_display_image", to_display_image)


def consume(path: Path, samples: list[ScheduledSample], order: str, store: SharedStore | None = None,
            hold: int = 1) -> list[tuple[ScheduledSample, list[int], list[int]]]:
    """Run the items as the engine does, ``hold`` samples in flight; per sample: frame indexes, pixel indexes."""
    seen = []
    flight: list[HeldFrames] = []
    for sample, held in clip_items(path, samples, decode_at, order, store):
        seen.append((sample, [f.index for f in held.frames], [read_frame_index(f.image) for f in held.frames]))
        assert held.image is held.frames[held.anchor].image
        flight.append(held)
        if len(flight) > hold:
            flight.pop(0).release()
    for held in flight:
        held.release()
    return seen


@pytest.mark.parametrize("order", [DECLARATION, TIME])
def test_overlapping_clips_decode_and_convert_each_frame_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              order: str) -> None:
    path, samples = planned(tmp_path)
    counts = Counts(monkeypatch)
    seen = consume(path, samples, order, hold=3)
    assert sorted(s.sample_index for s, _i, _p in seen) == sorted(s.sample_index for s in samples)
    wanted = Counter(i for s in samples for i in (s.clip.frame_indexes if s.clip is not None else ()))
    # Every clip frame is used several times over, yet decoded and converted once.
    assert max(wanted.values()) >= 5
    assert set(counts.converted) >= set(wanted)
    assert max(counts.converted.values()) == 1
    assert max(counts.decoded.values()) == 1
    for sample, indexes, pixels in seen:
        expected = list(sample.clip.frame_indexes) if sample.clip is not None else [pixels[0]]
        assert indexes == pixels == expected, sample.location()


def test_time_order_hands_each_clip_over_once_its_last_frame_is_decoded(tmp_path: Path) -> None:
    path, samples = planned(tmp_path)
    seen = consume(path, samples, TIME)
    last = [max(frame_times(s)) for s, _i, _p in seen]
    assert last == sorted(last)


def test_a_clip_store_without_memory_spills_and_reads_every_frame_back(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path, samples = planned(tmp_path)
    counts = Counts(monkeypatch)
    store = SharedStore(memory_budget=0)
    spills: list[int] = []
    close = store.close

    def closing() -> None:
        spills.append(store.spilled_frames)
        close()

    monkeypatch.setattr(store, "close", closing)
    seen = consume(path, samples, DECLARATION, store)
    assert spills and spills[0] > 0
    assert max(counts.converted.values()) == 1
    for sample, indexes, pixels in seen:
        assert indexes == pixels, sample.location()


def test_shared_frames_are_closed_by_their_last_holder() -> None:
    from PIL import Image

    image = Image.new("RGB", (4, 2))
    frame = SharedFrame(3, segments_time(), image)
    store = SharedStore()
    store.share("k", frame, 2)
    frame.release()  # the maker lets go; the store still holds it
    first, second = store.take("k"), store.take("k")
    assert first is second is frame and "k" not in store and store.in_memory == 0
    first.release()
    image.load()  # still open: the second holder has it
    second.release()
    with pytest.raises(ValueError):
        image.load()


def segments_time() -> Any:
    from fractions import Fraction

    return Fraction(3, 25)


def test_a_case_without_clips_keeps_the_single_frame_path(tmp_path: Path) -> None:
    """``frame_times`` of a single-frame sample is its own time, as the single-frame orderings ask."""
    case = textwrap.dedent("""\
        video: bframes_h264.mp4
        targets:
          t:
            samples:
            - at: [0.5, 0.3]
              expect: null
        """)
    _path, samples = planned(tmp_path, case)
    assert [frame_times(s) for s in samples] == [(s.time,) for s in samples]
