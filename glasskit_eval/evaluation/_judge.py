"""From a scheduled sample, its frame and its adapter call's record to its one :class:`SampleResult`.

Every result of a run or a seed is made here, by :func:`make_result`, once: the call record
(:class:`~glasskit_eval.adapters.calls.Call`) already says how long the call took, how many
attempts it needed, what it reported and whether the cache answered, and the artifact paths
are known before the result exists. Judging never raises for a bad observation: a non-JSON-like
observation or a comparator crash is :class:`Misjudged`, which the caller records as an error
result or lets stop the run. Pure: no I/O.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..adapters.calls import Call
from ..compare.values import MissingField, compare_values, extract_field
from ..errors import AdapterError
from ..plan.schedule import ScheduledSample
from ..results import ClipFrames, ErrorKind, SampleResult, Status, TimingMode
from ..support.jsonvalues import checked_plain, checked_steps, to_plain, walk_step
from ..support.outside import inline
from ..support.secretvalues import SECRETS
from ..support.timevalues import format_time
from ..support.tracebacks import adapter_traceback
from ..video.frames import DecodedFrame

#: Upstream's reason prefixes for error results, kept so reports read the same.
_PREFIX = {ErrorKind.ADAPTER: "adapter_error: ", ErrorKind.TIMEOUT: "adapter_error: ",
           ErrorKind.COMPARISON: "comparison_error: "}

#: Longest error message kept in a result; an adapter can raise with megabytes of text.
MAX_MESSAGE = 4000
#: A traceback's first characters are kept (its frames; the message that follows is in ``reason``).
MAX_TRACEBACK = 20_000
#: An observation (or observed value) longer than this as JSON is kept as the start of that text.
MAX_OBSERVATION = 256 * 1024


@dataclass(frozen=True, slots=True)
class Verdict:
    """What judging one observation (or one failed call) decided."""

    status: Status
    reason: str
    observed: Any = None
    observed_value: Any = None
    error_kind: ErrorKind | None = None
    traceback: str | None = None


#: Turns (sample, observation) into a verdict; ``run`` compares, ``seed`` only extracts the
#: configured field. Raises :class:`Misjudged` for what cannot be judged.
Judge = Callable[[ScheduledSample, Any], Verdict]


@dataclass(frozen=True, slots=True)
class Artifacts:
    """Where ``--save-failures`` puts a result's frame and record (chosen before the result exists)."""

    image: str
    record: str


def source_text(sample: ScheduledSample) -> str:
    block = sample.block
    if block.range is not None:
        # Upstream's spelling (`%g`), so reports compare equal across the two tools.
        return f"range [{float(block.range[0]):g}, {float(block.range[1]):g})"
    return "at"


def describe(sample: ScheduledSample) -> str:
    return (f"{sample.case.name}/{sample.target.id} sample {sample.sample_index} "
            f"at {format_time(sample.time)}s")


def make_result(sample: ScheduledSample, verdict: Verdict, *, frame: DecodedFrame | None = None,
                frames: Sequence[DecodedFrame] | None = None, call: Call | None = None,
                artifacts: Artifacts | None = None, arm: str | None = None) -> SampleResult:
    """The one constructor of results: a sample, what was decided, and the call it was decided on.

    ``frame`` is the anchor frame the adapter got; ``frames`` all of a clip sample's frames (a
    clip sample without them, an ignored one, reports its planned frames). Known secrets are
    cut from its text here, so no report or checkpoint made from it shows them.
    """
    declared = sample.block.compare
    batch = call is not None and call.batch_size is not None
    duration = None
    if call is not None:
        duration = call.seconds / call.batch_size if call.batch_size else call.seconds
    return SampleResult(
        case=sample.case.name,
        target=sample.target.id,
        target_label=sample.target.label,
        sample_index=sample.sample_index,
        timestamp_s=sample.timestamp_s,
        source=source_text(sample),
        status=verdict.status,
        expected=to_plain(sample.expect) if sample.block.has_expect else None,
        field=sample.field,
        compare_mode=declared.mode if declared is not None else None,
        reason=SECRETS.redact(verdict.reason),
        observed=SECRETS.redact_data(bounded_data(verdict.observed)),
        observed_value=SECRETS.redact_data(bounded_data(verdict.observed_value)),
        evaluation_duration_seconds=duration,
        evaluation_timing_mode=None if call is None else TimingMode.BATCH if batch else TimingMode.INDIVIDUAL,
        frame_index=frame.index if frame is not None else None,
        media_timestamp_s=float(frame.media_time) if frame is not None else None,
        error_kind=verdict.error_kind,
        artifact_image=artifacts.image if artifacts is not None else None,
        artifact_json=artifacts.record if artifacts is not None else None,
        traceback=SECRETS.redact(bounded(verdict.traceback, MAX_TRACEBACK)) if verdict.traceback is not None else None,
        cached=call is not None and call.cached,
        attempts=call.attempts if call is not None else None,
        usage=dict(call.usage) if call is not None and call.usage else None,
        call_duration_seconds=call.seconds if call is not None and batch else None,
        arm=arm,
        clip=clip_frames(sample, frames),
    )


def clip_frames(sample: ScheduledSample, frames: Sequence[DecodedFrame] | None) -> ClipFrames | None:
    """The clip part of a result: the requested times, and the frames delivered for them."""
    clip = sample.clip
    if clip is None:
        return None
    indexes = tuple(f.index for f in frames) if frames is not None else clip.frame_indexes
    return ClipFrames(tuple(float(t) for t in clip.times), indexes)


def ignored_result(sample: ScheduledSample, arm: str | None = None) -> SampleResult:
    return make_result(sample, Verdict(Status.IGNORED, sample.block.ignore or "ignored"), arm=arm)


def bounded(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message``, cut to ``limit`` characters with a note saying how much was left out."""
    if len(message) <= limit:
        return message
    return f"{message[:limit]}… ({len(message) - limit:,} more characters not shown)"


def bounded_data(value: Any) -> Any:
    """A JSON-plain value, or the start of its JSON text with a note when that is too long to keep.

    Judging has seen the whole value; what is cut is only what every report repeats.
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str) and len(value) <= MAX_OBSERVATION // 6:
        return value  # short enough however it is escaped
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= MAX_OBSERVATION:
        return value
    return bounded(text, MAX_OBSERVATION)


def traceback_of(exc: BaseException) -> str | None:
    """What the adapter's code did: a Python exception's traceback, a command adapter's stack.

    Our own errors about the adapter (bad answers, a dead process) have no stack of its code.
    """
    if isinstance(exc, AdapterError) and exc.stack is None:
        return None
    return adapter_traceback(exc)


def failed_call_message(exc: BaseException, what: str) -> str:
    return f"adapter failed for {what}: {exception_text(exc)}"


def failed_call(call: Call, what: str) -> Verdict:
    """The verdict on a call that raised (``what`` names the sample, or the batch call)."""
    assert call.error is not None
    kind = ErrorKind.TIMEOUT if call.timed_out else ErrorKind.ADAPTER
    return Verdict(Status.ERROR, _PREFIX[kind] + bounded(failed_call_message(call.error, what)),
                   error_kind=kind, traceback=traceback_of(call.error))


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

    def verdict(self) -> Verdict:
        # A comparator crash shows where it crashed; a bad observation has no trace worth showing.
        cause = self.__cause__ if self.kind is ErrorKind.COMPARISON else None
        return Verdict(Status.ERROR, _PREFIX[self.kind] + bounded(self.message), self.observed,
                       self.observed_value, self.kind, adapter_traceback(cause) if cause is not None else None)


@dataclass(frozen=True, slots=True)
class Checked:
    """An observation already checked and copied as plain JSON data (by :func:`check_observation`)."""

    plain: Any


def _not_json_like(sample: ScheduledSample, problem: str) -> Misjudged:
    return Misjudged(ErrorKind.ADAPTER, f"adapter returned a non-JSON-like observation for "
                     f"{describe(sample)}: {problem}")


def plain_observation(sample: ScheduledSample, observation: Any) -> Any:
    """The observation as plain JSON data; raises :class:`Misjudged` if it is not JSON-like."""
    if isinstance(observation, Checked):
        return observation.plain
    problem, plain = checked_plain(observation)
    if problem is not None:
        raise _not_json_like(sample, problem)
    return plain


async def check_observation(sample: ScheduledSample, observation: Any) -> Checked:
    """:func:`plain_observation` for the event loop: the loop runs between slices of the walk.

    An adapter can return hundreds of megabytes; checking them takes seconds, during which
    the first Ctrl+C (and every other call) must still be heard. Raises :class:`Misjudged`.
    """
    problem, plain = await walk_on_loop(checked_steps(observation, copy=True))
    if problem is not None:
        raise _not_json_like(sample, problem)
    return Checked(plain)


async def walk_on_loop(steps: Generator[None, None, tuple[str | None, Any]]) -> tuple[str | None, Any]:
    """Run a :func:`~glasskit_eval.support.jsonvalues.checked_steps` walk, letting the loop run at each pause."""
    while (result := walk_step(steps)) is None:
        await asyncio.sleep(0)
    return result


def judge(sample: ScheduledSample, observation: Any) -> Verdict:
    """Compare an observation with the sample's expectation: passed or failed.

    Raises :class:`Misjudged` for a non-JSON-like observation or a comparator crash.
    """
    observed = plain_observation(sample, observation)
    try:
        value = extract_field(observed, sample.field)
    except MissingField as exc:
        return Verdict(Status.FAILED, str(exc), observed)
    config = sample.compare
    assert config is not None
    try:
        outcome = compare_values(sample.expect, value, config)
    except Exception as exc:  # a comparator bug must not lose the run's other results
        raise Misjudged(ErrorKind.COMPARISON, f"{type(exc).__name__}: {exc}", observed, value) from exc
    if outcome.passed:
        return Verdict(Status.PASSED, "matched", observed, value)
    return Verdict(Status.FAILED, outcome.reason or "did not match", observed, value)


def exception_text(exc: BaseException) -> str:
    """How an adapter's exception reads in a result; never raises, whatever its ``__str__`` does."""
    try:
        text = bounded(str(exc)) if isinstance(exc, AdapterError) else inline(bounded(str(exc)))
    except Exception as inner:  # an adapter's exception class can be broken too
        text = f"<its message could not be read: {type(inner).__name__}>"
    if isinstance(exc, AdapterError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
