"""Judging observations and making results from call records (glasskit_eval.evaluation._judge), and seed's variant."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest
from evalkit import make_eval
from PIL import Image

from glasskit_eval.adapters.calls import Call
from glasskit_eval.errors import AdapterError, CallTimeout
from glasskit_eval.evaluation._judge import (
    Artifacts,
    Misjudged,
    failed_call,
    ignored_result,
    judge,
    make_result,
)
from glasskit_eval.evaluation.proposals import extract_judge
from glasskit_eval.plan.planning import build_plan
from glasskit_eval.plan.schedule import Filters, ScheduledSample
from glasskit_eval.results import ErrorKind, Status, TimingMode
from glasskit_eval.video.frames import DecodedFrame

pytestmark = pytest.mark.frames

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
    call = Call({"state": {"on": True}}, seconds=0.2)
    passed = make_result(samples[0], judge(samples[0], call.observation), frame=frame, call=call)
    assert (passed.status, passed.reason, passed.observed_value, passed.frame_index) == (
        Status.PASSED, "matched", True, 15)
    assert passed.media_timestamp_s == 0.5 and passed.target_label == "Lamp" and passed.error_kind is None
    assert passed.evaluation_duration_seconds == 0.2 and passed.evaluation_timing_mode is TimingMode.INDIVIDUAL
    batch = Call(4, seconds=0.8, batch_size=4)
    failed = make_result(samples[1], judge(samples[1], 4), frame=frame, call=batch)
    assert failed.status is Status.FAILED and failed.evaluation_timing_mode is TimingMode.BATCH
    assert (failed.evaluation_duration_seconds, failed.call_duration_seconds) == (0.2, 0.8)


def test_the_call_record_is_on_the_result(samples: list[ScheduledSample], frame: DecodedFrame) -> None:
    call = Call({"state": {"on": True}}, seconds=0.1, attempts=3, usage={"cost": 1.5}, cached=True)
    result = make_result(samples[0], judge(samples[0], call.observation), frame=frame, call=call,
                         artifacts=Artifacts("a.jpg", "a.json"))
    assert (result.attempts, result.usage, result.cached) == (3, {"cost": 1.5}, True)
    assert (result.artifact_image, result.artifact_json) == ("a.jpg", "a.json")
    plain = make_result(samples[0], judge(samples[0], call.observation), frame=frame, call=Call(True))
    assert "attempts" not in plain.to_json() and "usage" not in plain.to_json() and "cached" not in plain.to_json()


def test_a_failed_call_is_an_adapter_error_and_a_timeout_says_so(samples: list[ScheduledSample],
                                                                 frame: DecodedFrame) -> None:
    call = Call(error=AdapterError("boom"), seconds=0.3)
    error = make_result(samples[0], failed_call(call, "c/lamp sample 0"), frame=frame, call=call)
    assert (error.status, error.error_kind, error.reason) == (
        Status.ERROR, ErrorKind.ADAPTER, "adapter_error: adapter failed for c/lamp sample 0: boom")
    late = Call(error=CallTimeout("evaluate timed out"), seconds=5.0, timed_out=True)
    timed_out = make_result(samples[0], failed_call(late, "x"), frame=frame, call=late)
    assert timed_out.error_kind is ErrorKind.TIMEOUT and timed_out.resumable_error
    crashed = Call(error=ValueError("bad"))
    assert "ValueError: bad" in failed_call(crashed, "x").reason and failed_call(crashed, "x").traceback


def test_a_missing_field_is_a_failure(samples: list[ScheduledSample]) -> None:
    verdict = judge(samples[0], {"state": {}})
    assert verdict.status is Status.FAILED and "state.on" in verdict.reason


def test_a_non_json_observation_is_an_adapter_error(samples: list[ScheduledSample], frame: DecodedFrame) -> None:
    with pytest.raises(Misjudged) as caught:
        judge(samples[0], {"state": math.nan})
    error = make_result(samples[0], caught.value.verdict(), frame=frame, call=Call(seconds=0.2))
    assert error.status is Status.ERROR and error.error_kind is ErrorKind.ADAPTER
    assert error.reason.startswith("adapter_error: adapter returned a non-JSON-like observation")
    assert caught.value.stop_message() == error.reason.removeprefix("adapter_error: ")


def test_a_comparator_crash_is_a_comparison_error(samples: list[ScheduledSample], frame: DecodedFrame,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import glasskit_eval.evaluation._judge as module

    def broken(*args: object) -> None:
        raise ZeroDivisionError("bad comparator")

    monkeypatch.setattr(module, "compare_values", broken)
    with pytest.raises(Misjudged) as caught:
        judge(samples[1], 3)
    error = make_result(samples[1], caught.value.verdict(), frame=frame, call=Call(seconds=0.2))
    assert error.error_kind is ErrorKind.COMPARISON and error.observed_value == 3 and error.judged
    assert error.reason == "comparison_error: ZeroDivisionError: bad comparator"


def test_ignored_results_say_why(samples: list[ScheduledSample]) -> None:
    result = ignored_result(samples[2])
    assert (result.status, result.reason, result.frame_index) == (Status.IGNORED, "blurred", None)


def test_seed_proposes_the_configured_field(samples: list[ScheduledSample]) -> None:
    proposed = extract_judge(samples[0], {"state": {"on": False}})
    assert (proposed.status, proposed.observed_value) == (Status.PASSED, False)
    missing = make_result(samples[0], extract_judge(samples[0], {"other": 1}))
    assert missing.status is Status.ERROR and missing.resumable_error
    assert missing.reason.startswith("field_error: ")
