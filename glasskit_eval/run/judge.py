"""From a scheduled sample and what the adapter did to its one :class:`SampleResult` (pure).

Every result of a run or a seed is made here, by :func:`make_result`. Judging never raises
for a bad observation: a non-JSON-like observation or a comparator crash is an error result
with its :class:`ErrorKind`; the caller decides whether that error stops the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..compare.values import MissingField, compare_values, extract_field
from ..errors import AdapterError
from ..plan.schedule import ScheduledSample
from ..results import ErrorKind, SampleResult, Status, TimingMode
from ..support.jsonvalues import json_problem, to_plain
from ..support.timevalues import format_time
from ..support.tracebacks import adapter_traceback
from ..video.frames import DecodedFrame

#: Turns (sample, observation, frame, duration, timing mode) into a result; ``run`` compares,
#: ``seed`` only extracts the configured field.
Judge = Callable[[ScheduledSample, Any, DecodedFrame, float, TimingMode], SampleResult]

#: Upstream's reason prefixes for error results, kept so reports read the same.
_PREFIX = {ErrorKind.ADAPTER: "adapter_error: ", ErrorKind.TIMEOUT: "adapter_error: ",
           ErrorKind.COMPARISON: "comparison_error: "}


def source_text(sample: ScheduledSample) -> str:
    block = sample.block
    if block.range is not None:
        # Upstream's spelling (`%g`), so reports compare equal across the two tools.
        return f"range [{float(block.range[0]):g}, {float(block.range[1]):g})"
    return "at"


def describe(sample: ScheduledSample) -> str:
    return (f"{sample.case.name}/{sample.target.id} sample {sample.sample_index} "
            f"at {format_time(sample.time)}s")


def make_result(sample: ScheduledSample, status: Status, reason: str, *, frame: DecodedFrame | None = None,
                duration: float | None = None, timing_mode: TimingMode | None = None,
                observed: Any = None, observed_value: Any = None,
                error_kind: ErrorKind | None = None, traceback: str | None = None) -> SampleResult:
    """The one constructor of results from a scheduled sample."""
    declared = sample.block.compare
    return SampleResult(
        case=sample.case.name,
        target=sample.target.id,
        target_label=sample.target.label,
        sample_index=sample.sample_index,
        timestamp_s=sample.timestamp_s,
        source=source_text(sample),
        status=status,
        expected=to_plain(sample.expect) if sample.block.has_expect else None,
        field=sample.field,
        compare_mode=declared.mode if declared is not None else None,
        reason=reason,
        observed=observed,
        observed_value=observed_value,
        evaluation_duration_seconds=duration,
        evaluation_timing_mode=timing_mode,
        frame_index=frame.index if frame is not None else None,
        media_timestamp_s=float(frame.media_time) if frame is not None else None,
        error_kind=error_kind,
        traceback=traceback,
    )


def ignored_result(sample: ScheduledSample) -> SampleResult:
    return make_result(sample, Status.IGNORED, sample.block.ignore or "ignored")


#: Longest error message kept in a result; an adapter can raise with megabytes of text.
MAX_MESSAGE = 4000


def bounded(message: str) -> str:
    """``message``, cut to :data:`MAX_MESSAGE` characters with a note saying how much was left out."""
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[:MAX_MESSAGE]}… ({len(message) - MAX_MESSAGE:,} more characters not shown)"


def error_result(sample: ScheduledSample, kind: ErrorKind, message: str, *, frame: DecodedFrame | None,
                 duration: float | None, timing_mode: TimingMode | None,
                 observed: Any = None, observed_value: Any = None,
                 traceback: str | None = None) -> SampleResult:
    return make_result(sample, Status.ERROR, _PREFIX[kind] + bounded(message), frame=frame, duration=duration,
                       timing_mode=timing_mode, observed=observed, observed_value=observed_value,
                       error_kind=kind, traceback=traceback)


class Misjudged(Exception):
    """Why an observation could not be judged; the caller records it or stops the run."""

    def __init__(self, kind: ErrorKind, message: str, observed: Any = None, observed_value: Any = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.observed = observed
        self.observed_value = observed_value

    def stop_message(self) -> str:
        """What a fail-fast stop says: adapter errors need no prefix, comparator crashes do."""
        return self.message if self.kind is ErrorKind.ADAPTER else _PREFIX[self.kind] + self.message

    def as_result(self, sample: ScheduledSample, frame: DecodedFrame | None, duration: float | None,
                  timing_mode: TimingMode | None) -> SampleResult:
        # A comparator crash shows where it crashed; a bad observation has no trace worth showing.
        cause = self.__cause__ if self.kind is ErrorKind.COMPARISON else None
        return error_result(sample, self.kind, self.message, frame=frame, duration=duration,
                            timing_mode=timing_mode, observed=self.observed,
                            observed_value=self.observed_value,
                            traceback=adapter_traceback(cause) if cause is not None else None)


def plain_observation(sample: ScheduledSample, observation: Any) -> Any:
    """The observation as plain JSON data; raises :class:`Misjudged` if it is not JSON-like."""
    problem = json_problem(observation)
    if problem is not None:
        raise Misjudged(ErrorKind.ADAPTER, f"adapter returned a non-JSON-like observation for "
                        f"{describe(sample)}: {problem}")
    return to_plain(observation)


def judge(sample: ScheduledSample, observation: Any, frame: DecodedFrame, duration: float,
          timing_mode: TimingMode) -> SampleResult:
    """Compare an observation with the sample's expectation: a passed or failed result.

    Raises :class:`Misjudged` for a non-JSON-like observation or a comparator crash.
    """
    observed = plain_observation(sample, observation)
    try:
        value = extract_field(observed, sample.field)
    except MissingField as exc:
        return make_result(sample, Status.FAILED, str(exc), frame=frame, duration=duration,
                           timing_mode=timing_mode, observed=observed)
    config = sample.compare
    assert config is not None
    try:
        outcome = compare_values(sample.expect, value, config)
    except Exception as exc:  # a comparator bug must not lose the run's other results
        raise Misjudged(ErrorKind.COMPARISON, f"{type(exc).__name__}: {exc}", observed, value) from exc
    status = Status.PASSED if outcome.passed else Status.FAILED
    reason = "matched" if outcome.passed else outcome.reason or "did not match"
    return make_result(sample, status, reason, frame=frame, duration=duration, timing_mode=timing_mode,
                       observed=observed, observed_value=value)


def exception_text(exc: BaseException) -> str:
    """How an adapter's exception reads in a result; never raises, whatever its ``__str__`` does."""
    try:
        text = bounded(str(exc))
    except Exception as inner:  # an adapter's exception class can be broken too
        text = f"<its message could not be read: {type(inner).__name__}>"
    if isinstance(exc, AdapterError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
