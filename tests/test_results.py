"""Frozen results with enums (glasskit_eval.results): values, round trips, strict reading."""

from __future__ import annotations

import dataclasses
import json

import pytest

from glasskit_eval.results import (
    ErrorKind,
    ResultFormatError,
    SampleResult,
    Stability,
    Status,
    TimingMode,
    TrialResult,
    stability,
)

pytestmark = pytest.mark.frames


def result(status: Status = Status.PASSED, index: int = 0, **changes: object) -> SampleResult:
    base = SampleResult(case="c", target="t", target_label="Light", sample_index=index, timestamp_s=1.5,
                        source="at", status=status, expected=True, field=None, compare_mode=None,
                        reason="matched", observed={"on": True}, observed_value=True,
                        evaluation_duration_seconds=0.25, evaluation_timing_mode=TimingMode.INDIVIDUAL,
                        frame_index=45, media_timestamp_s=1.5)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_results_are_frozen() -> None:
    r = result()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = Status.FAILED  # type: ignore[misc]


def test_json_values_are_the_report_strings_and_round_trip() -> None:
    r = result(Status.ERROR, error_kind=ErrorKind.COMPARISON, evaluation_timing_mode=TimingMode.BATCH)
    data = r.to_json()
    assert (data["status"], data["error_kind"], data["evaluation_timing_mode"]) == (
        "error", "comparison", "batch_amortized")
    assert json.loads(json.dumps(data)) == data
    back = SampleResult.from_json(json.loads(json.dumps(data)))
    assert back == r and back.status is Status.ERROR and back.error_kind is ErrorKind.COMPARISON


def test_checkpoints_written_with_the_old_batch_spelling_still_read() -> None:
    data = result().to_json() | {"evaluation_timing_mode": "batch"}
    assert SampleResult.from_json(data).evaluation_timing_mode is TimingMode.BATCH


@pytest.mark.parametrize("change", [
    {"status": "maybe"}, {"error_kind": "cosmic"}, {"sample_index": "3"}, {"sample_index": True},
    {"timestamp_s": None}, {"reason": 7},
])
def test_damaged_records_are_refused(change: dict[str, object]) -> None:
    data = result().to_json() | change
    if change.get("timestamp_s", 0) is None:
        del data["timestamp_s"]
    with pytest.raises(ResultFormatError):
        SampleResult.from_json(data)


def test_resumable_and_judged_follow_the_error_kind() -> None:
    adapter = result(Status.ERROR, error_kind=ErrorKind.ADAPTER)
    comparison = result(Status.ERROR, error_kind=ErrorKind.COMPARISON)
    assert adapter.resumable_error and not adapter.judged
    assert not comparison.resumable_error and comparison.judged
    assert result(Status.FAILED).judged and not result(Status.IGNORED).judged


def test_stability_collects_statuses_across_trials() -> None:
    trials = [TrialResult(n, (result(s1, 0), result(s2, 1)), (), 1.0, TimingMode.INDIVIDUAL)
              for n, (s1, s2) in enumerate([(Status.PASSED, Status.FAILED), (Status.FAILED, Status.FAILED)], 1)]
    first, second = stability(trials)
    assert first.statuses == (Status.PASSED, Status.FAILED) and first.flaky
    assert second.consistently_failed and not second.flaky
    assert first.to_json()["statuses"] == ["passed", "failed"]
    assert Stability(result(Status.IGNORED), (Status.IGNORED,)).to_json()["pass_rate"] is None


def test_model_api_fields_are_optional_and_round_trip() -> None:
    plain = result().to_json()
    assert not {"attempts", "usage", "call_duration_seconds"} & set(plain)
    rich = result(attempts=3, usage={"input_tokens": 10, "cost": 0.5}, call_duration_seconds=1.5,
                  status=Status.ERROR, error_kind=ErrorKind.TIMEOUT)
    data = json.loads(json.dumps(rich.to_json()))
    assert data["attempts"] == 3 and data["usage"] == {"input_tokens": 10, "cost": 0.5}
    assert data["error_kind"] == "timeout"
    again = SampleResult.from_json(data)
    assert again == rich and again.resumable_error
    for bad in ({"usage": {"cost": "free"}}, {"usage": [1]}, {"attempts": "2"}):
        with pytest.raises(ResultFormatError):
            SampleResult.from_json({**data, **bad})
