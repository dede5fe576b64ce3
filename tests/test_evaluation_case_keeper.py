"""run_case's frame keeper: every adapter call's result with the open image that call got.

Real video, real Python adapters (individual with concurrency, and evaluate_many); the keeper
reads the frame code from the pixels, so it proves it saw the very frame, still open.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from evalkit import TESTS, make_eval
from framecode import read_frame_index

from glasskit_eval.adapters.base import FactoryConfig
from glasskit_eval.adapters.calls import DirectCaller
from glasskit_eval.adapters.choose import adapter_spec
from glasskit_eval.evaluation.case import CaseWork, run_case
from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters
from glasskit_eval.results import SampleResult, Status

pytestmark = pytest.mark.frames

CASE = """
video: cfr_h264.mp4
targets:
  a:
    samples:
    - range: [0.0, 1.0]
      every_s: 0.1
      expect: 0
  b:
    samples:
    - at: [0.3, 0.7]
      expect: 3
    - at: 0.9
      expect: 0
      ignore: not checked
"""

ADAPTER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from framecode import read_frame_index

def create_evaluator(config):
    return Reader()

class Reader:
    def {{signature}}:
        {{body}}
"""


@pytest.mark.parametrize("batch", [False, True])
def test_keeper_sees_each_called_sample_with_its_open_frame(tmp_path: Path, batch: bool) -> None:
    body = ("return [read_frame_index(s.image) for s in samples]" if batch
            else "return read_frame_index(sample.image)")
    signature = "evaluate_many(self, samples, target)" if batch else "evaluate(self, sample, target)"
    eval_dir = make_eval(tmp_path, {"clip": CASE}, adapter=ADAPTER.format(signature=signature, body=body))
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    (case_plan,) = plan.cases
    seen: list[tuple[SampleResult, int]] = []
    images: list[Any] = []

    def keeper(result: SampleResult, image: Any, frames: Sequence[Any]) -> None:
        assert frames == ()  # no clip
        seen.append((result, read_frame_index(image)))
        images.append(image)

    async def go() -> list[SampleResult]:
        spec = adapter_spec(None, None, eval_dir, io.StringIO())
        evaluator = await spec.create(FactoryConfig(eval_dir=eval_dir))
        try:
            return await run_case(CaseWork(case_plan.samples, case_plan.video_path, keep_frame=keeper),
                                  DirectCaller(evaluator), concurrency=3, keep_going=True)
        finally:
            await evaluator.close()

    results = asyncio.run(go())
    called = [r for r in results if r.status is not Status.IGNORED]
    assert sorted(r.key for r, _ in seen) == sorted(r.key for r in called) and len(called) == 12
    # The image the keeper saw is the result's frame, and it is closed once the keeper is done.
    assert all(frame == r.frame_index for r, frame in seen)
    assert {r.status for r, _ in seen} == {Status.PASSED, Status.FAILED}
    for image in images:
        with pytest.raises(ValueError):
            image.load()


CLIP_CASE = """
video: cfr_h264.mp4
sample_defaults:
  clip: {before_s: 0.4, every_s: 0.2}
targets:
  a:
    samples:
    - range: [0.5, 1.5]
      every_s: 0.25
      expect: 0
    - at: 1.6
      expect: 0
      clip: null
"""


@pytest.mark.parametrize("batch", [False, True])
def test_keeper_sees_every_clip_frame_the_call_got(tmp_path: Path, batch: bool) -> None:
    body = "return [0 for s in samples]" if batch else "return 0"
    signature = "evaluate_many(self, samples, target)" if batch else "evaluate(self, sample, target)"
    eval_dir = make_eval(tmp_path, {"clip": CLIP_CASE}, adapter=ADAPTER.format(signature=signature, body=body))
    plan = build_plan(eval_dir, Filters(), allow_empty=False)
    (case_plan,) = plan.cases
    seen: dict[float, tuple[int, list[int]]] = {}
    images: list[Any] = []

    def keeper(result: SampleResult, image: Any, frames: Sequence[Any]) -> None:
        seen[result.timestamp_s] = (read_frame_index(image), [read_frame_index(f) for f in frames])
        images.extend([image, *frames])
        if result.clip is not None:
            assert len(frames) == len(result.clip.frame_indexes)

    async def go() -> list[SampleResult]:
        spec = adapter_spec(None, None, eval_dir, io.StringIO())
        evaluator = await spec.create(FactoryConfig(eval_dir=eval_dir))
        try:
            return await run_case(CaseWork(case_plan.samples, case_plan.video_path, keep_frame=keeper),
                                  DirectCaller(evaluator), concurrency=3, keep_going=True)
        finally:
            await evaluator.close()

    results = asyncio.run(go())
    assert len(results) == 5 and len(seen) == 5
    for r in results:
        anchor, frames = seen[r.timestamp_s]
        assert anchor == r.frame_index
        # The clip's images in the result's order, by their pixels; none for a sample without a clip.
        assert frames == (list(r.clip.frame_indexes) if r.clip is not None else [])
    assert seen[1.6] == (16, [])  # the cleared sample
    assert seen[0.75] == (7, [3, 5, 7])  # 10 fps: 0.35 s ties 0.3 and 0.4 and takes the earlier
    for image in images:
        with pytest.raises(ValueError):
            image.load()
