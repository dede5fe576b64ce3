"""Evaluate one case's selected samples with one evaluator.

Decoding runs on worker threads, a few frames ahead of the adapter calls through a
bounded queue, and frames arrive in presentation order; each decoded frame is handed
to every selected sample that wants it, so a case is decoded once for all of its
targets. At most
``concurrency`` individual calls are in flight. Results come back in
declaration order whatever order the calls finish in.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

from ..adapters.base import Evaluator, Sample, Target
from ..compare.values import MissingField, compare_values, extract_field
from ..errors import AdapterError
from ..plan.schedule import ScheduledSample
from ..results import ADAPTER_ERROR, COMPARISON_ERROR, ERROR, FAILED, IGNORED, PASSED, SampleResult
from ..support.jsonvalues import json_problem, to_plain
from ..support.timevalues import format_time
from ..video.frames import DecodedFrame, decode_at

T = TypeVar("T")

#: Called with each finished result as soon as it is known (checkpoints, progress).
ResultSink = Callable[[SampleResult], None]


#: Turns (sample, observation, frame, duration, timing mode) into a result; ``run`` compares,
#: ``seed`` only extracts the configured field.
Judge = Callable[["ScheduledSample", Any, "DecodedFrame", float, str], "SampleResult"]


@dataclass(frozen=True)
class CaseWork:
    samples: Sequence[ScheduledSample]
    video_path: Path
    judge: Judge | None = None


class SampleFailure(AdapterError):
    """A fail-fast adapter error, naming the sample it happened on."""

    def __init__(self, message: str, completed: int) -> None:
        super().__init__(message)
        self.completed = completed


def target_of(sample: ScheduledSample) -> Target:
    t = sample.target
    return Target(id=t.id, index=t.index, label=t.label, config=t.config)


def base_result(sample: ScheduledSample, status: str, reason: str) -> SampleResult:
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
    )


def source_text(sample: ScheduledSample) -> str:
    block = sample.block
    if block.range is not None:
        # Upstream's spelling (`%g`), so reports compare equal across the two tools.
        return f"range [{float(block.range[0]):g}, {float(block.range[1]):g})"
    return "at"


def ignored_result(sample: ScheduledSample) -> SampleResult:
    return base_result(sample, IGNORED, sample.block.ignore or "ignored")


def observed_result(sample: ScheduledSample, observation: Any, frame: DecodedFrame, duration: float,
                    timing_mode: str, reason: str) -> SampleResult:
    """A result carrying the observation, or an adapter error if it is not JSON-like."""
    result = base_result(sample, PASSED, reason)
    result.frame_index = frame.index
    result.media_timestamp_s = float(frame.media_time)
    result.evaluation_duration_seconds = duration
    result.evaluation_timing_mode = timing_mode
    problem = json_problem(observation)
    if problem is not None:
        result.status, result.error_kind = ERROR, ADAPTER_ERROR
        result.reason = (f"adapter_error: adapter returned a non-JSON-like observation for "
                         f"{describe(sample)}: {problem}")
    else:
        result.observed = to_plain(observation)
    return result


def judge(sample: ScheduledSample, observation: Any, frame: DecodedFrame, duration: float,
          timing_mode: str) -> SampleResult:
    """Turn an observation into a passed/failed/error result (never raises)."""
    result = observed_result(sample, observation, frame, duration, timing_mode, "matched")
    if result.status == ERROR:
        return result
    try:
        value = extract_field(result.observed, sample.field)
    except MissingField as exc:
        result.status, result.reason = FAILED, str(exc)
        return result
    result.observed_value = value
    config = sample.compare
    assert config is not None
    try:
        outcome = compare_values(sample.expect, value, config)
    except Exception as exc:  # a comparator bug must not lose the run's other results
        result.status, result.error_kind = ERROR, COMPARISON_ERROR
        result.reason = f"comparison_error: {type(exc).__name__}: {exc}"
        return result
    if not outcome.passed:
        result.status = FAILED
        result.reason = outcome.reason or "did not match"
    return result


def error_result(sample: ScheduledSample, frame: DecodedFrame | None, message: str,
                 duration: float | None, timing_mode: str) -> SampleResult:
    result = base_result(sample, ERROR, f"adapter_error: {message}")
    result.error_kind = ADAPTER_ERROR
    result.evaluation_duration_seconds = duration
    result.evaluation_timing_mode = timing_mode
    if frame is not None:
        result.frame_index = frame.index
        result.media_timestamp_s = float(frame.media_time)
    return result


def describe(sample: ScheduledSample) -> str:
    return (f"{sample.case.name}/{sample.target.id} sample {sample.sample_index} "
            f"at {format_time(sample.time)}s")


def exception_text(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, AdapterError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: Frames decoded ahead of the adapter calls: enough to keep the decoder busy while
#: calls run, few enough that memory stays O(concurrency) frames.
FRAME_QUEUE_DEPTH = 2


class _DecodeFailed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _frames(path: Path, times: Sequence[Fraction]) -> AsyncIterator[tuple[Fraction, DecodedFrame]]:
    """Run ``decode_at`` on a worker thread, feeding a small bounded queue.

    Decoding (which releases the GIL) overlaps the adapter calls; the worker blocks
    when ``FRAME_QUEUE_DEPTH`` frames are waiting. Frames left when the consumer stops
    are closed.
    """
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue(maxsize=FRAME_QUEUE_DEPTH)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> bool:
        if stop.is_set():
            return False
        future = asyncio.run_coroutine_threadsafe(items.put(item), loop)
        while True:
            try:
                future.result(timeout=0.05)
                return True
            except concurrent.futures.TimeoutError:
                if stop.is_set():
                    future.cancel()
                    return False

    def produce() -> None:
        gen = decode_at(path, times)
        try:
            for item in gen:
                if not put(item):
                    item[1].image.close()
                    return
            put(done)
        except BaseException as exc:
            put(_DecodeFailed(exc))
        finally:
            gen.close()

    def drain() -> None:
        while not items.empty():
            item = items.get_nowait()
            if isinstance(item, tuple):
                item[1].image.close()

    producer = loop.run_in_executor(None, produce)
    try:
        while True:
            item = await items.get()
            if item is done:
                break
            if isinstance(item, _DecodeFailed):
                raise item.error
            yield item
    finally:
        stop.set()
        while not producer.done():
            drain()
            await asyncio.wait({producer}, timeout=0.05)
        drain()
        if not producer.cancelled():
            producer.exception()


def _make_sample(sample: ScheduledSample, frame: DecodedFrame, image: Any, video_path: Path) -> Sample:
    return Sample(image=image, timestamp_s=sample.timestamp_s, frame_index=frame.index,
                  sample_index=sample.sample_index, video_path=str(video_path),
                  case_name=sample.case.name)


async def run_case(work: CaseWork, evaluator: Evaluator, *, concurrency: int, keep_going: bool,
                   sink: ResultSink | None = None) -> list[SampleResult]:
    """Evaluate one case; returns results for every selected sample in declaration order.

    Raises :class:`SampleFailure` on the first adapter error unless ``keep_going``.
    """
    results: dict[int, SampleResult] = {}

    def record(result: SampleResult) -> None:
        results[result.sample_index] = result
        if sink is not None:
            sink(result)

    by_time: dict[Fraction, list[ScheduledSample]] = defaultdict(list)
    for sample in work.samples:
        if sample.ignored:
            record(ignored_result(sample))
        else:
            by_time[sample.time].append(sample)
    if by_time:
        if evaluator.batch:
            await _run_batches(work, by_time, evaluator, keep_going, record)
        else:
            await _run_individual(work, by_time, evaluator, concurrency, keep_going, record)
    return [results[s.sample_index] for s in work.samples]


async def _run_individual(work: CaseWork, by_time: dict[Fraction, list[ScheduledSample]],
                          evaluator: Evaluator, concurrency: int, keep_going: bool,
                          record: Callable[[SampleResult], None]) -> None:
    slots = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()
    failure: list[SampleFailure] = []
    completed = 0

    async def call(sample: ScheduledSample, frame: DecodedFrame, image: Any) -> None:
        nonlocal completed
        started = time.perf_counter()
        try:
            try:
                observation = await evaluator.evaluate(
                    _make_sample(sample, frame, image, work.video_path), target_of(sample))
            finally:
                image.close()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            duration = time.perf_counter() - started
            message = f"adapter failed for {describe(sample)}: {exception_text(exc)}"
            if keep_going:
                record(error_result(sample, frame, message, duration, "individual"))
            elif not failure:
                failure.append(SampleFailure(message, completed))
            return
        finally:
            slots.release()
        result = (work.judge or judge)(sample, observation, frame, time.perf_counter() - started,
                                       "individual")
        # Non-JSON observations and comparator crashes abort a fail-fast run like adapter errors.
        if result.status == ERROR and not keep_going:
            if not failure:
                failure.append(SampleFailure(result.reason.removeprefix("adapter_error: "), completed))
            return
        completed += 1
        record(result)

    try:
        async for want, frame in _frames(work.video_path, sorted(by_time)):
            samples = sorted(by_time[want], key=lambda s: s.sample_index)
            for i, sample in enumerate(samples):
                # The original goes to the last sample: an earlier call may finish (and
                # close its image) while this loop waits for a slot.
                last = i == len(samples) - 1
                image = frame.image if last else frame.image.copy()
                await slots.acquire()
                if failure:
                    slots.release()
                    image.close()
                    if not last:
                        frame.image.close()
                    break
                task = asyncio.create_task(call(sample, frame, image))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if failure:
                break
        # Wait for the calls still in flight, but stop waiting at the first fail-fast
        # error: a call that never answers must not hold the run hostage.
        while tasks and not failure:
            await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if tasks:
            if failure:
                await evaluator.cancel_pending()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*list(tasks), return_exceptions=True)
    if failure:
        raise failure[0]


async def _run_batches(work: CaseWork, by_time: dict[Fraction, list[ScheduledSample]],
                       evaluator: Evaluator, keep_going: bool,
                       record: Callable[[SampleResult], None]) -> None:
    # evaluate_many needs a target's frames all at once, so they are held per target.
    per_target: dict[str, list[tuple[ScheduledSample, DecodedFrame, Any]]] = defaultdict(list)
    try:
        async for want, frame in _frames(work.video_path, sorted(by_time)):
            samples = by_time[want]
            for i, sample in enumerate(samples):
                image = frame.image if i == 0 else frame.image.copy()
                per_target[sample.target.id].append((sample, frame, image))
        order = sorted(per_target.values(), key=lambda items: items[0][0].target.index)
        for items in order:
            items.sort(key=lambda item: item[0].sample_index)
            await _one_batch(items, work, evaluator, keep_going, record)
    finally:
        for items in per_target.values():
            for _sample, _frame, image in items:
                image.close()


async def _one_batch(items: list[tuple[ScheduledSample, DecodedFrame, Any]], work: CaseWork,
                     evaluator: Evaluator,
                     keep_going: bool, record: Callable[[SampleResult], None]) -> None:
    first = items[0][0]
    target = target_of(first)
    started = time.perf_counter()
    what = f"evaluate_many for {first.case.name}/{target.id} ({len(items)} samples)"
    try:
        observations = await evaluator.evaluate_many(
            [_make_sample(s, f, image, work.video_path) for s, f, image in items], target)
        if len(observations) != len(items):
            raise AdapterError(f"evaluate_many returned {len(observations)} observations for "
                               f"{len(items)} samples; return exactly one per sample, in order")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        duration = time.perf_counter() - started
        message = f"adapter failed for {what}: {exception_text(exc)}"
        if not keep_going:
            raise SampleFailure(message, 0) from exc
        for sample, frame, _image in items:
            record(error_result(sample, frame, message, duration / len(items), "batch"))
        return
    duration = (time.perf_counter() - started) / len(items)
    for (sample, frame, _image), observation in zip(items, observations):
        result = (work.judge or judge)(sample, observation, frame, duration, "batch")
        if result.status == ERROR and not keep_going:
            raise SampleFailure(result.reason.removeprefix("adapter_error: "), 0)
        record(result)
