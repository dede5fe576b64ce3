"""Evaluate one case's selected samples with one evaluator.

Decoding runs on worker threads, a few frames ahead of the adapter calls through a
bounded queue. In declaration order (the default) the targets are called one after the
other, in case-file order: at most ``concurrency`` calls of the current target are in
flight, and the next target starts once they have all finished; ``ordering`` decides
which decode serves which target and keeps frames decoded before their turn. In time
order every decoded frame goes to every sample that wants it at once. Results come
back in declaration order whatever order the calls finish in.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..adapters.base import Evaluator, Sample, Target
from ..errors import AdapterError, AdapterGone, SampleFailure
from ..plan.schedule import ScheduledSample
from ..results import ErrorKind, SampleResult, TimingMode
from ..support.tracebacks import adapter_traceback, last_frame
from ..video.damage import Warn
from ..video.frames import DecodedFrame, decode_at
from .judge import Judge, Misjudged, describe, error_result, exception_text, ignored_result, judge
from .ordering import DECLARATION, TIME, Decoder, Items, declaration_order_items, time_order_items

T = TypeVar("T")


def traceback_of(exc: BaseException) -> str | None:
    """What the adapter's code did: a Python exception's traceback, a command adapter's stack.

    Our own errors about the adapter (bad answers, a dead process) have no stack of its code.
    """
    if isinstance(exc, AdapterError) and exc.stack is None:
        return None
    return adapter_traceback(exc)


def _failed_call(exc: BaseException, what: str, started: float, keep_going: bool) -> tuple[str, float, bool]:
    """An adapter call that raised: its message, its duration, and whether the run stops.

    A dead adapter process is not one call's failure: it stops the run even with --keep-going.
    """
    message = f"adapter failed for {what}: {exception_text(exc)}"
    return message, time.perf_counter() - started, not keep_going or isinstance(exc, AdapterGone)


def _at(exc: BaseException) -> str:
    """`` (at file:line in function)`` of the adapter code that raised, for a fail-fast stop."""
    text = traceback_of(exc)
    where = last_frame(text) if text else None
    return f" (at {where})" if where else ""

#: Called with each finished result as soon as it is known (checkpoints, progress).
ResultSink = Callable[[SampleResult], None]

#: Called with the result of each adapter call and the image that call got, before the image is
#: closed (HTML report thumbnails: no second decode). Must not raise, and must not keep the image.
FrameKeeper = Callable[[SampleResult, Any], None]


@dataclass(frozen=True)
class CaseWork:
    samples: Sequence[ScheduledSample]
    video_path: Path
    judge: Judge = judge
    keep_frame: FrameKeeper | None = None
    #: Hears the one warning about a damaged video; called on the decoding thread.
    warn: Warn | None = None

    def decoder(self) -> Decoder:
        return decode_at if self.warn is None else functools.partial(decode_at, warn=self.warn)


def target_of(sample: ScheduledSample) -> Target:
    t = sample.target
    return Target(id=t.id, index=t.index, label=t.label, config=t.config)


#: Frames decoded ahead of the adapter calls: enough to keep the decoder busy while
#: calls run, few enough that memory stays O(concurrency) frames.
FRAME_QUEUE_DEPTH = 2


class _DecodeFailed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _frames(make_items: Callable[[], Items]) -> AsyncIterator[tuple[ScheduledSample, DecodedFrame]]:
    """Run an ``ordering`` generator on a worker thread, feeding a small bounded queue.

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
        gen = make_items()
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
                   sink: ResultSink | None = None, order: str = DECLARATION) -> list[SampleResult]:
    """Evaluate one case; returns results for every selected sample in declaration order.

    ``order`` is ``ordering.DECLARATION`` or ``ordering.TIME`` (batch adapters always get
    one call per target, in declaration order). Raises :class:`SampleFailure` on the
    first adapter error unless ``keep_going``.
    """
    results: dict[int, SampleResult] = {}

    def record(result: SampleResult) -> None:
        results[result.sample_index] = result
        if sink is not None:
            sink(result)

    pending: list[ScheduledSample] = []
    for sample in work.samples:
        if sample.ignored:
            record(ignored_result(sample))
        else:
            pending.append(sample)
    if pending:
        if evaluator.batch:
            await _run_batches(work, pending, evaluator, keep_going, record)
        else:
            await _run_individual(work, pending, evaluator, concurrency, keep_going, record, order)
    return [results[s.sample_index] for s in work.samples]


async def _run_individual(work: CaseWork, pending: list[ScheduledSample],
                          evaluator: Evaluator, concurrency: int, keep_going: bool,
                          record: Callable[[SampleResult], None], order: str) -> None:
    slots = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()
    failure: list[SampleFailure] = []
    completed = 0

    async def call(sample: ScheduledSample, frame: DecodedFrame, image: Any) -> None:
        try:
            await judged_call(sample, frame, image)
        finally:
            # Closed after judging, not after the call: a frame keeper may still need it.
            image.close()

    async def judged_call(sample: ScheduledSample, frame: DecodedFrame, image: Any) -> None:
        nonlocal completed
        started = time.perf_counter()
        try:
            observation = await evaluator.evaluate(
                _make_sample(sample, frame, image, work.video_path), target_of(sample))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message, duration, stops = _failed_call(exc, describe(sample), started, keep_going)
            if not stops:
                _keep(work, error_result(sample, ErrorKind.ADAPTER, message, frame=frame, duration=duration,
                                         timing_mode=TimingMode.INDIVIDUAL, traceback=traceback_of(exc)),
                      image, record)
            elif not failure:
                failure.append(SampleFailure(message + _at(exc), completed))
            return
        finally:
            slots.release()
        duration = time.perf_counter() - started
        try:
            result = work.judge(sample, observation, frame, duration, TimingMode.INDIVIDUAL)
        except Misjudged as exc:
            # Non-JSON observations and comparator crashes abort a fail-fast run like adapter errors.
            if not keep_going:
                if not failure:
                    failure.append(SampleFailure(exc.stop_message(), completed))
                return
            result = exc.as_result(sample, frame, duration, TimingMode.INDIVIDUAL)
        completed += 1
        _keep(work, result, image, record)

    async def settle() -> None:
        # Wait for the calls still in flight, but stop waiting at the first fail-fast
        # error: a call that never answers must not hold the run hostage.
        while tasks and not failure:
            await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)

    if order == TIME:
        def items() -> Items:
            return time_order_items(work.video_path, pending, work.decoder())
    else:
        def items() -> Items:
            return declaration_order_items(work.video_path, pending, work.decoder())

    current_target: str | None = None
    try:
        async for sample, frame in _frames(items):
            if order != TIME and sample.target.id != current_target:
                # The next target starts once every call of the current one has finished.
                await settle()
                current_target = sample.target.id
            await slots.acquire()
            if failure:
                slots.release()
                frame.image.close()
                break
            task = asyncio.create_task(call(sample, frame, frame.image))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await settle()
    finally:
        if tasks:
            if failure:
                await evaluator.cancel_pending()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*list(tasks), return_exceptions=True)
    if failure:
        raise failure[0]


async def _run_batches(work: CaseWork, pending: list[ScheduledSample],
                       evaluator: Evaluator, keep_going: bool,
                       record: Callable[[SampleResult], None]) -> None:
    # evaluate_many needs a target's frames all at once: one target's are held at a time
    # (later targets' frames wait in the ordering's store, bounded in memory).
    items: list[tuple[ScheduledSample, DecodedFrame, Any]] = []
    try:
        async for sample, frame in _frames(lambda: declaration_order_items(work.video_path, pending, work.decoder())):
            if items and items[0][0].target.id != sample.target.id:
                batch, items = items, []
                try:
                    await _one_batch(batch, work, evaluator, keep_going, record)
                finally:
                    for _sample, _frame, image in batch:
                        image.close()
            items.append((sample, frame, frame.image))
        if items:
            await _one_batch(items, work, evaluator, keep_going, record)
    finally:
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
        message, duration, stops = _failed_call(exc, what, started, keep_going)
        if stops:
            raise SampleFailure(message + _at(exc), 0) from exc
        stack = traceback_of(exc)
        for sample, frame, image in items:
            _keep(work, error_result(sample, ErrorKind.ADAPTER, message, frame=frame,
                                     duration=duration / len(items), timing_mode=TimingMode.BATCH,
                                     traceback=stack),
                  image, record)
        return
    duration = (time.perf_counter() - started) / len(items)
    for (sample, frame, image), observation in zip(items, observations):
        try:
            result = work.judge(sample, observation, frame, duration, TimingMode.BATCH)
        except Misjudged as exc:
            if not keep_going:
                raise SampleFailure(exc.stop_message(), 0) from None
            result = exc.as_result(sample, frame, duration, TimingMode.BATCH)
        _keep(work, result, image, record)


def _keep(work: CaseWork, result: SampleResult, image: Any, record: Callable[[SampleResult], None]) -> None:
    # The image is still open: individual calls close it after this, batches when the case is done.
    if work.keep_frame is not None:
        work.keep_frame(result, image)
    record(result)
