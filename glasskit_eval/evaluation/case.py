"""Evaluate one case's selected samples with one evaluator.

Decoding runs on worker threads, a few frames ahead of the adapter calls through a
bounded queue (``_bridge``). In declaration order (the default) the targets are called one after the
other, in case-file order: at most ``concurrency`` calls of the current target are in
flight, and the next target starts once they have all finished; ``_ordering`` decides
which decode serves which target and keeps frames decoded before their turn. In time
order every decoded frame goes to every sample that wants it at once. Results come
back in declaration order whatever order the calls finish in.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..adapters.base import Frame, Sample, Target
from ..adapters.calls import Call, Caller
from ..errors import AdapterGone, SampleFailure
from ..plan.schedule import ScheduledSample
from ..results import SampleResult, Status
from ..support.tracebacks import last_frame
from ..video.damage import Warn
from ..video.frames import decode_at
from ._bridge import in_background
from ._clipframes import ClipItems, HeldFrames, clip_items
from ._judge import (
    Judge,
    Misjudged,
    Verdict,
    check_observation,
    describe,
    failed_call,
    failed_call_message,
    ignored_result,
    judge,
    make_result,
    traceback_of,
)
from ._ordering import DECLARATION, TIME, Decoder, Items, declaration_order_items, time_order_items
from .failures import FailureSaver


def _at(exc: BaseException) -> str:
    """`` (at file:line in function)`` of the adapter code that raised, for a fail-fast stop."""
    text = traceback_of(exc)
    where = last_frame(text) if text else None
    return f" (at {where})" if where else ""

#: Called with each finished result as soon as it is known (checkpoints, progress).
ResultSink = Callable[[SampleResult], None]

#: Called with the result of each adapter call, the image that call got and, for a clip sample, the
#: images of its clip (one per entry of ``result.clip``; empty otherwise), before they are closed
#: (HTML report thumbnails and filmstrips: no second decode). Must not raise, nor keep the images.
FrameKeeper = Callable[[SampleResult, Any, Sequence[Any]], None]

_SAVED = (Status.FAILED, Status.ERROR)

#: The ``(sample, frames)`` stream a case's calls consume, when it is not the case's own decode.
FrameSource = Callable[[], AsyncGenerator[tuple[ScheduledSample, HeldFrames], None]]


@dataclass(frozen=True)
class CaseWork:
    """One case's samples to evaluate in one trial, and what to do with each result."""

    samples: Sequence[ScheduledSample]
    video_path: Path
    judge: Judge = judge
    keep_frame: FrameKeeper | None = None
    #: Hears the one warning about a damaged video; called on the decoding thread.
    warn: Warn | None = None
    #: ``--save-failures``: the frame and record of every failed or errored result.
    saver: FailureSaver | None = None
    trial: int = 1
    #: The arm these calls are made for (its name is on every result); None without arms.
    arm: str | None = None
    #: Where the frames come from instead of a decode of this case's own (arms share one decode).
    frames: FrameSource | None = None

    def decoder(self) -> Decoder:
        return decode_at if self.warn is None else functools.partial(decode_at, warn=self.warn)

    async def finish(self, sample: ScheduledSample, held: HeldFrames, call: Call,
                     verdict: Verdict, record: Callable[[SampleResult], None]) -> None:
        """Make the sample's result, save its artifacts, show its frame, then record it.

        The images are still held: individual calls let go of them after this, batches when the
        target is done.
        """
        artifacts = None
        if self.saver is not None and verdict.status in _SAVED:
            artifacts = self.saver.artifacts(sample, self.trial, self.arm)
        result = make_result(sample, verdict, frame=held.anchor_frame, frames=held.frames, call=call,
                             artifacts=artifacts, arm=self.arm)
        if self.saver is not None and artifacts is not None:
            await asyncio.to_thread(self.saver.save, result, held.image, self.trial, held.frames)
        if self.keep_frame is not None:
            self.keep_frame(result, held.image, tuple(f.image for f in held.frames) if held.clip else ())
        record(result)


def target_of(sample: ScheduledSample) -> Target:
    t = sample.target
    return Target(id=t.id, index=t.index, label=t.label, config=t.config)


#: Frames decoded ahead of the adapter calls: enough to keep the decoder busy while
#: calls run, few enough that memory stays O(concurrency) frames. The decoding thread
#: holds one more while it waits for room, and a frame is taken from the queue only
#: once a call slot is free, so at most ``concurrency + FRAME_QUEUE_DEPTH + 1`` images
#: exist past the decoders (the frame store of declaration order has its own budget).
FRAME_QUEUE_DEPTH = 1


def _single_frames(items: Items) -> ClipItems:
    """Single-frame samples' items, each frame owned by its sample."""
    try:
        for sample, frame in items:
            yield sample, HeldFrames.single(sample.time, frame)
    finally:
        items.close()


def _make_sample(sample: ScheduledSample, held: HeldFrames, video_path: Path) -> Sample:
    frames = tuple(Frame(f.image, float(t), float(f.media_time), f.index) for f, t in zip(held.frames, held.times))
    return Sample(image=held.image, timestamp_s=sample.timestamp_s, frame_index=held.anchor_frame.index,
                  sample_index=sample.sample_index, video_path=str(video_path),
                  case_name=sample.case.name, frames=frames, is_clip=held.clip)


def _source(work: CaseWork, pending: Sequence[ScheduledSample],
            order: str) -> AsyncGenerator[tuple[ScheduledSample, HeldFrames], None]:
    return work.frames() if work.frames is not None else in_background(case_items(work, pending, order),
                                                                       FRAME_QUEUE_DEPTH)


def case_items(work: CaseWork, pending: Sequence[ScheduledSample], order: str) -> Callable[[], ClipItems]:
    """The case's samples with their frames, in call order: clips share their frames, others own theirs."""
    decoder = work.decoder()
    if any(s.clip is not None for s in pending):
        return lambda: clip_items(work.video_path, pending, decoder, order)
    if order == TIME:
        return lambda: _single_frames(time_order_items(work.video_path, pending, decoder))
    return lambda: _single_frames(declaration_order_items(work.video_path, pending, decoder))


async def run_case(work: CaseWork, caller: Caller, *, concurrency: int, keep_going: bool,
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
            record(ignored_result(sample, work.arm))
        else:
            pending.append(sample)
    if pending:
        if caller.batch:
            await _run_batches(work, pending, caller, keep_going, record)
        else:
            await _run_individual(work, pending, caller, concurrency, keep_going, record, order)
    return [results[s.sample_index] for s in work.samples]


async def _run_individual(work: CaseWork, pending: list[ScheduledSample],
                          caller: Caller, concurrency: int, keep_going: bool,
                          record: Callable[[SampleResult], None], order: str) -> None:
    slots = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()
    failure: list[SampleFailure] = []
    completed = 0

    async def call(sample: ScheduledSample, held: HeldFrames) -> None:
        try:
            await judged_call(sample, held)
        finally:
            # Let go after judging, not after the call: artifacts and a frame keeper may still need them.
            held.release()

    def stop(message: str, error: BaseException | None = None) -> None:
        if not failure:
            failure.append(_failure(message, completed, error))

    async def judged_call(sample: ScheduledSample, held: HeldFrames) -> None:
        nonlocal completed
        try:
            done = await caller.call(_make_sample(sample, held, work.video_path), target_of(sample))
        finally:
            slots.release()
        if done.error is not None:
            if _stops(done.error, keep_going):
                stop(failed_call_message(done.error, describe(sample)) + _at(done.error), done.error)
                return
            verdict = failed_call(done, describe(sample))
        else:
            try:
                verdict = work.judge(sample, await check_observation(sample, done.observation))
            except Misjudged as exc:
                # Non-JSON observations and comparator crashes abort a fail-fast run like adapter errors.
                if not keep_going:
                    stop(exc.stop_message())
                    return
                verdict = exc.verdict()
            completed += 1
        await work.finish(sample, held, done, verdict, record)

    async def settle() -> None:
        # Wait for the calls still in flight, but stop waiting at the first fail-fast
        # error: a call that never answers must not hold the run hostage.
        while tasks and not failure:
            await asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)

    current_target: str | None = None
    frames = _source(work, pending, order)
    try:
        while not failure:
            # A call slot first, then the frame: a frame waiting for a slot waits in the queue.
            await slots.acquire()
            try:
                sample, held = await anext(frames)
            except StopAsyncIteration:
                slots.release()
                break
            if order != TIME and sample.target.id != current_target:
                # The next target starts once every call of the current one has finished.
                slots.release()
                try:
                    await settle()
                    await slots.acquire()
                except BaseException:
                    held.release()
                    raise
                current_target = sample.target.id
            if failure:
                slots.release()
                held.release()
                break
            task = asyncio.create_task(call(sample, held))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await settle()
    finally:
        await frames.aclose()
        if tasks:
            if failure:
                await caller.cancel_pending()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*list(tasks), return_exceptions=True)
    if failure:
        raise failure[0]


async def _run_batches(work: CaseWork, pending: list[ScheduledSample], caller: Caller, keep_going: bool,
                       record: Callable[[SampleResult], None]) -> None:
    # evaluate_many needs a target's frames all at once: one target's are held at a time
    # (later targets' frames wait in the ordering's store, bounded in memory).
    items: list[tuple[ScheduledSample, HeldFrames]] = []
    try:
        async for sample, held in _source(work, pending, DECLARATION):
            if items and items[0][0].target.id != sample.target.id:
                batch, items = items, []
                try:
                    await _one_batch(batch, work, caller, keep_going, record)
                finally:
                    for _sample, done_with in batch:
                        done_with.release()
            items.append((sample, held))
        if items:
            await _one_batch(items, work, caller, keep_going, record)
    finally:
        for _sample, held in items:
            held.release()


async def _one_batch(items: list[tuple[ScheduledSample, HeldFrames]], work: CaseWork, caller: Caller,
                     keep_going: bool, record: Callable[[SampleResult], None]) -> None:
    first = items[0][0]
    target = target_of(first)
    what = f"evaluate_many for {first.case.name}/{target.id} ({len(items)} samples)"
    calls = await caller.call_many([_make_sample(s, held, work.video_path) for s, held in items], target)
    for done in calls:
        if done.error is not None and _stops(done.error, keep_going):
            raise _failure(failed_call_message(done.error, what) + _at(done.error), 0, done.error) from done.error
    for (sample, held), done in zip(items, calls):
        if done.error is not None:
            verdict = failed_call(done, what)
        else:
            try:
                verdict = work.judge(sample, await check_observation(sample, done.observation))
            except Misjudged as exc:
                if not keep_going:
                    raise SampleFailure(exc.stop_message(), 0) from None
                verdict = exc.verdict()
        await work.finish(sample, held, done, verdict, record)


def _failure(message: str, completed: int, error: BaseException | None) -> SampleFailure:
    return SampleFailure(message, completed, traceback=traceback_of(error) if error is not None else None,
                         keep_going_helps=not isinstance(error, AdapterGone))


def _stops(error: BaseException, keep_going: bool) -> bool:
    """Whether a failed call stops the run: fail-fast, or a dead adapter process (never recovers)."""
    return not keep_going or isinstance(error, AdapterGone)
