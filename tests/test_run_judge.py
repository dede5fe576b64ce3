"""Judging observations into results (glasskit_eval.run.judge), and seed's variant."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import make_eval
from PIL import Image

from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters, ScheduledSample
from glasskit_eval.results import ErrorKind, Status, TimingMode
from glasskit_eval.run.judge import Misjudged, ignored_result, judge
from glasskit_eval.seed.proposals import extract_judge
from glasskit_eval.video.frames import DecodedFrame

CASE = """\
video: cfr_h264.mp4
targets:
  lamp:
    label: Lamp
    samples:
    - at: 0.5
      field: state.on
      expect: true
    - at: 1.0
      expect: 3
      compare: {mode: numeric, tolerance: 0.5}
    - at: 1.5
      ignore: blurred
"""


@pytest.fixture
def samples(tmp_path: Path) -> list[ScheduledSample]:
    plan = build_plan(make_eval(tmp_path, {"c": CASE}), Filters(), allow_empty=False, check_videos=False)
    return list(plan.cases[0].samples)


@pytest.fixture
def frame() -> DecodedFrame:
    return DecodedFrame(index=15, media_time=Fraction(1, 2), image=Image.new("RGB", (2, 2)))


def test_pass_and_fail_carry_the_frame_and_timing(samples: list[ScheduledSample], frame: DecodedFrame) -> None:
    passed = judge(samples[0], {"state": {"on": True}}, frame, 0.2, TimingMode.INDIVIDUAL)
    assert (passed.status, passed.reason, passed.observed_value, passed.frame_index) == (
        Status.PASSED, "matched", True, 15)
    assert passed.media_timestamp_s == 0.5 and passed.target_label == "Lamp" and passed.error_kind is None
    failed = judge(samples[1], 4, frame, 0.2, TimingMode.BATCH)
    assert failed.status is Status.FAILED and failed.evaluation_timing_mode is TimingMode.BATCH


def test_a_missing_field_is_a_failure(samples: list[ScheduledSample], frame: DecodedFrame) -> None:
    result = judge(samples[0], {"state": {}}, frame, 0.2, TimingMode.INDIVIDUAL)
    assert result.status is Status.FAILED and "state.on" in result.reason


def test_a_non_json_observation_is_an_adapter_error(samples: list[ScheduledSample], frame: DecodedFrame) -> None:
    with pytest.raises(Misjudged) as caught:
        judge(samples[0], {"state": math.nan}, frame, 0.2, TimingMode.INDIVIDUAL)
    error = caught.value.as_result(samples[0], frame, 0.2, TimingMode.INDIVIDUAL)
    assert error.status is Status.ERROR and error.error_kind is ErrorKind.ADAPTER
    assert error.reason.startswith("adapter_error: adapter returned a non-JSON-like observation")
    assert caught.value.stop_message() == error.reason.removeprefix("adapter_error: ")


def test_a_comparator_crash_is_a_comparison_error(samples: list[ScheduledSample], frame: DecodedFrame,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import glasskit_eval.run.judge as module

    def broken(*args: object) -> None:
        raise ZeroDivisionError("bad comparator")

    monkeypatch.setattr(module, "compare_values", broken)
    with pytest.raises(Misjudged) as caught:
        judge(samples[1], 3, frame, 0.2, TimingMode.INDIVIDUAL)
    error = caught.value.as_result(samples[1], frame, 0.2, TimingMode.INDIVIDUAL)
    assert error.error_kind is ErrorKind.COMPARISON and error.observed_value == 3 and error.judged
    assert error.reason == "comparison_error: ZeroDivisionError: bad comparator"


def test_ignored_results_say_why(samples: list[ScheduledSample]) -> None:
    result = ignored_result(samples[2])
    assert (result.status, result.reason, result.frame_index) == (Status.IGNORED, "blurred", None)


def test_seed_proposes_the_configured_field(samples: list[ScheduledSample], frame: DecodedFrame) -> None:
    proposed = extract_judge(samples[0], {"state": {"on": False}}, frame, 0.1, TimingMode.INDIVIDUAL)
    assert (proposed.status, proposed.observed_value) == (Status.PASSED, False)
    missing = extract_judge(samples[0], {"other": 1}, frame, 0.1, TimingMode.INDIVIDUAL)
    assert missing.status is Status.ERROR and missing.resumable_error
    assert missing.reason.startswith("field_error: ")
