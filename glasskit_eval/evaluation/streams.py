"""Feed one case's stream targets: every stream's frames from one decode, in presentation order.

One stream per (case, target, trial). Each stream is fed strictly one frame at a time; streams of
different targets take the same decoded frame side by side, and the next frame goes out once every
stream has answered (replay). An emission's time is the media time of the frame it answered;
``end_stream``'s emissions are timed at the clip's end. The paced clock lives in :mod:`._pacing`.
Every call goes through a :class:`~..adapters.calls.StreamCaller` (timeout, retries, rate limit).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from ..adapters.base import Sample, StreamInfo, Target
from ..adapters.calls import StreamCaller
from ..cases.model import TargetSpec
from ..errors import AdapterError, AdapterGone, SampleFailure
from ..plan.feeds import FeedFrame, feed
from ..plan.planning import CasePlan
from ..results import Emission, StreamResult
from ..support.jsonvalues import json_problem, to_plain
from ..support.timevalues import format_time
from ..video.damage import Warn
from ..video.frames import DecodedFrame, decode_at
from ..video.frametable import frame_table
from ._judge import traceback_of
from ._streamscore import false_alarm_at, score_stream

#: A stream: (case, target, trial, arm; None in a plain run).
StreamKey = tuple[str, str, int, str | None]


class StreamFrameKeeper(Protocol):
    """Sees the frames the HTML report may show for a stream, before their images are closed (no second decode).

    Bounded by construction: ``onset`` gets one frame per event (the fed frame nearest its ``at``,
    ties to the earlier), ``false_alarm`` only the frames whose emissions are false alarms (outside
    every window, in quiet time: known when emitted, by the scorer's own rule), and ``finished``
    says which events were missed. None of them may raise or keep the image.
    """

    def onset(self, key: StreamKey, event: int, frame: FeedFrame, image: Any) -> None: ...

    def false_alarm(self, key: StreamKey, time: Fraction, frame: FeedFrame, image: Any) -> None: ...

    def finished(self, result: StreamResult) -> None: ...


class StreamTap(Protocol):
    """Sees a replay run's decoded frames and each stream's raw emissions (the stream cache's recorder).

    ``frame`` gets each decoded frame once (before its image is closed), whichever streams take it;
    ``finished`` each stream once it ended (or stopped), with every emission it made, scored or not.
    Neither may raise or keep the image.
    """

    def frame(self, frame: FeedFrame, image: Any) -> None: ...

    def finished(self, stream: Stream) -> None: ...


@dataclass(frozen=True)
class StreamWork:
    """One case's streams in one trial, and how to feed them."""

    plan: CasePlan
    trial: int = 1
    keep_going: bool = False
    #: ``--pace`` (None: replay).
    pace: float | None = None
    warn: Warn | None = None
    #: The HTML report's keeper of miss and false-alarm frames (None: nothing kept).
    keep_frame: StreamFrameKeeper | None = None
    #: The stream cache's recorder (replay only; None: nothing recorded).
    tap: StreamTap | None = None
    #: Told (frames fed or dropped so far, frames in all) as the case's streams go (a live display).
    progress: Callable[[int, int], None] | None = None
    #: The arm whose adapter is fed (on each result; None without arms).
    arm: str | None = None
    #: An arm's perturbations: ``(image, target id, media time)`` -> the image its adapter gets.
    perturb: Callable[[Any, str, Fraction], Any] | None = None


def adapter_target(spec: TargetSpec) -> Target:
    return Target(id=spec.id, index=spec.index, label=spec.label, config=spec.config)


def missing_on_frame(evaluator: object, targets: Sequence[tuple[str, str]]) -> AdapterError | None:
    """The error that stops a run whose adapter cannot be fed streams; ``targets`` are (case, target)."""
    if not targets or getattr(evaluator, "streams", False):
        return None
    case, target = targets[0]
    more = f" (and {len(targets) - 1} more)" if len(targets) > 1 else ""
    return AdapterError(f"target {target!r} of case {case!r}{more} is a stream target (it has `events`), but the "
                        "adapter has no on_frame(sample, target); add on_frame (returning None, one emission or "
                        "a list of them; onFrame with the Node helper, the `frame` capability for a command "
                        "adapter of your own) or give the target `samples`")


@dataclass
class Stream:
    """One stream's state while it is fed."""

    spec: TargetSpec
    target: Target
    frames: tuple[FeedFrame, ...]
    emissions: list[Emission] = field(default_factory=list)
    delivered: int = 0
    dropped: int = 0
    #: (answer time, frame media time) per answered frame: staleness on the paced clock.
    answers: list[tuple[Fraction, Fraction]] = field(default_factory=list)
    error: str | None = None
    #: Frame index -> the events whose onset frame it is (for the frame keeper).
    onsets: dict[int, list[int]] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.error is None


def onset_frames(frames: Sequence[FeedFrame], ats: Sequence[tuple[int, Fraction]]) -> dict[int, list[int]]:
    """Each event's fed frame nearest its onset (ties to the earlier frame), as frame index -> event indexes."""
    import bisect

    out: dict[int, list[int]] = {}
    if not frames:
        return out
    times = [f.media_time for f in frames]
    for event, at in ats:
        k = bisect.bisect_left(times, at)
        if k == len(times) or (k > 0 and at - times[k - 1] <= times[k] - at):
            k -= 1
        out.setdefault(frames[k].frame_index, []).append(event)
    return out


#: Emissions one answer may carry, and a whole stream: an app alerts a few times a minute, and a
#: stream that says something on every frame of 69 minutes at 60 fps stays under the second.
MAX_EMISSIONS_PER_CALL = 1_000
MAX_EMISSIONS_PER_STREAM = 250_000


def emissions_of(answer: Any, what: str, already: int = 0) -> list[Any]:
    """None, one JSON-like emission or a list of them, as a list; AdapterError for anything else,
    and for more emissions than a call (or a stream that made ``already``) may make."""
    if answer is None:
        return []
    items = list(answer) if isinstance(answer, (list, tuple)) else [answer]
    if len(items) > MAX_EMISSIONS_PER_CALL or already + len(items) > MAX_EMISSIONS_PER_STREAM:
        raise AdapterError(f"{what} returned {len(items)} emissions after {already}; a stream makes at most "
                           f"{MAX_EMISSIONS_PER_CALL:,} per call and {MAX_EMISSIONS_PER_STREAM:,} in all")
    for item in items:
        problem = json_problem(item)
        if problem is not None:
            raise AdapterError(f"{what} returned an emission that is not JSON-like: {problem}")
    return [to_plain(item) for item in items]


class StreamFeeder:
    """What both clocks share: opening, ending and scoring the streams of one case."""

    def __init__(self, work: StreamWork, caller: StreamCaller) -> None:
        self.work = work
        self.caller = caller
        plan = work.plan
        assert plan.video is not None
        self.end_time = plan.video.end_time
        table = frame_table(plan.video_path)
        self.streams = [Stream(spec, adapter_target(spec), feed(table, self.end_time, spec.stream.every_s))
                        for spec in plan.streams if spec.stream is not None]
        self.keeper = work.keep_frame
        self.total = sum(len(s.frames) for s in self.streams)
        if self.keeper is not None:
            for stream in self.streams:
                assert stream.spec.stream is not None
                stream.onsets = onset_frames(stream.frames, [(e.index, e.at) for e in stream.spec.stream.events])

    def key(self, stream: Stream) -> StreamKey:
        return (self.work.plan.case.name, stream.target.id, self.work.trial, self.work.arm)

    def decoded(self, stream: Stream, frame: FeedFrame, image: Any) -> None:
        """A frame of ``stream`` came out of the decode (fed or, paced, maybe dropped): keep it if an event's onset."""
        if self.keeper is not None:
            for event in stream.onsets.get(frame.frame_index, ()):
                self.keeper.onset(self.key(stream), event, frame, image)

    def emitted(self, stream: Stream, frame: FeedFrame, image: Any, time: Fraction, values: Sequence[Any]) -> None:
        """Record the emissions an answer to ``frame`` gave, timed at ``time``; keep the frame of a false alarm."""
        stream.emissions += [Emission(time, v) for v in values]
        spec = stream.spec.stream
        if self.keeper is not None and values and spec is not None and false_alarm_at(spec.events, spec.quiet, time):
            self.keeper.false_alarm(self.key(stream), time, frame, image)

    def describe(self, stream: Stream, frame: FeedFrame | None = None) -> str:
        where = f" at frame {frame.frame_index} ({format_time(frame.media_time)}s)" if frame is not None else ""
        return f"{self.work.plan.case.name}/{stream.target.id}{where}"

    def fail(self, stream: Stream, exc: Exception, what: str) -> None:
        """Record a stream's adapter error (``--keep-going``) or stop the run with it."""
        message = f"{what} for stream {self.describe(stream)} failed: {exc}"
        if not self.work.keep_going or isinstance(exc, AdapterGone):
            raise SampleFailure(message, 0, traceback=traceback_of(exc),
                                keep_going_helps=not isinstance(exc, AdapterGone)) from exc
        stream.error = message

    async def start(self) -> None:
        plan = self.work.plan
        if self.work.progress is not None:
            self.work.progress(0, self.total)

        async def one(stream: Stream) -> None:
            assert stream.spec.stream is not None
            every = stream.spec.stream.every_s
            info = StreamInfo(case=plan.case.name, video=str(plan.video_path),
                              every_s=None if every is None else float(every), pace=self.work.pace)
            call = await self.caller.start(stream.target, info)
            if call.error is not None:
                self.fail(stream, call.error, "start_stream")

        await asyncio.gather(*(one(s) for s in self.streams))

    async def frame(self, stream: Stream, frame: FeedFrame, image: Any) -> list[Any] | None:
        """One ``on_frame`` call; its emissions, or None when it failed (recorded or raised)."""
        given = image if self.work.perturb is None else self.work.perturb(image, stream.target.id, frame.media_time)
        sample = Sample(image=given, timestamp_s=float(frame.media_time), frame_index=frame.frame_index,
                        sample_index=stream.delivered, video_path=str(self.work.plan.video_path),
                        case_name=self.work.plan.case.name)
        stream.delivered += 1
        if self.work.progress is not None:
            self.work.progress(sum(s.delivered + s.dropped for s in self.streams), self.total)
        try:
            call = await self.caller.frame(sample, stream.target)
        finally:
            if given is not image:
                given.close()
        try:
            if call.error is not None:
                raise call.error
            # Most frames answer nothing: skip describing the frame for an error that cannot come.
            if call.observation is None:
                return []
            return emissions_of(call.observation, f"on_frame for {self.describe(stream, frame)}", len(stream.emissions))
        except Exception as exc:
            self.fail(stream, exc, f"on_frame at frame {frame.frame_index} ({format_time(frame.media_time)}s)")
            return None

    async def finish(self) -> list[StreamResult]:
        async def one(stream: Stream) -> None:
            if not stream.active:
                return
            call = await self.caller.end(stream.target)
            try:
                if call.error is not None:
                    raise call.error
                values = emissions_of(call.observation, f"end_stream for {self.describe(stream)}", len(stream.emissions))
            except Exception as exc:
                self.fail(stream, exc, "end_stream")
                return
            stream.emissions += [Emission(self.end_time, v) for v in values]

        await asyncio.gather(*(one(s) for s in self.streams))
        if self.work.tap is not None:
            for stream in self.streams:
                self.work.tap.finished(stream)
        results = [self.result(s) for s in self.streams]
        if self.keeper is not None:
            for result in results:
                self.keeper.finished(result)
        return results

    def result(self, stream: Stream) -> StreamResult:
        spec = stream.spec.stream
        assert spec is not None
        score = score_stream(spec.events, stream.emissions, clip_end=self.end_time, quiet=spec.quiet,
                             field=spec.field, compare=spec.compare)
        p50 = p95 = None
        if self.work.pace is not None and stream.answers:
            from ..statistics.descriptive import percentile

            stale = sorted(answered - media for answered, media in stream.answers)
            p50, p95 = percentile(stale, 50), percentile(stale, 95)
        return StreamResult(case=self.work.plan.case.name, target=stream.target.id, target_label=stream.target.label,
                            trial=self.work.trial, events=score.events, false_alarms=score.false_alarms,
                            repeats=score.repeats, metrics=score.metrics, pace=self.work.pace,
                            frames_delivered=stream.delivered, frames_dropped=stream.dropped,
                            staleness_p50=p50, staleness_p95=p95, error=stream.error, arm=self.work.arm)


async def decoded(work: StreamWork, times: Sequence[Fraction]) -> AsyncIterator[tuple[Fraction, DecodedFrame]]:
    """The frames at ``times`` (each a frame's own media time), decoded once on a worker thread, one ahead."""
    loop = asyncio.get_running_loop()
    # One decoder (frame-threaded on long spans): parallel segment decoders hand frames over in
    # order two at a time, so on a feed of every frame they take turns instead of overlapping,
    # each on one thread (about 1.5x the wall of one frame-threaded decoder on 720p).
    frames = decode_at(work.plan.video_path, times, warn=work.warn, workers=1)
    done = object()

    def pull() -> Any:
        return next(frames, done)

    pending = loop.run_in_executor(None, pull)
    try:
        while True:
            item = await pending
            if item is done:
                break
            pending = loop.run_in_executor(None, pull)
            yield item
    finally:
        # The generator may not be closed while a pull is running on it.
        with contextlib.suppress(BaseException):
            left = await asyncio.shield(pending)
            if isinstance(left, tuple):
                left[1].image.close()
        frames.close()


async def run_streams(work: StreamWork, caller: StreamCaller) -> list[StreamResult]:
    """Feed every stream of the case on the replay clock and score it (:mod:`._pacing` has the paced one)."""
    (results,) = await feed_together([(work, caller)])
    return results


async def feed_together(works: Sequence[tuple[StreamWork, StreamCaller]]) -> list[list[StreamResult]]:
    """Several feeds of one case's video (one per arm) on the replay clock, from one decode; each one's results.

    Each feed keeps its own streams' state; a decoded frame goes to every stream of every feed that
    takes it, side by side, and the next frame goes out once they have all answered.
    """
    feeders = [StreamFeeder(work, caller) for work, caller in works]
    await asyncio.gather(*(feeder.start() for feeder in feeders))
    takers: dict[Fraction, list[tuple[StreamFeeder, Stream, FeedFrame]]] = {}
    for feeder in feeders:
        for stream in feeder.streams:
            for frame in stream.frames:
                takers.setdefault(frame.media_time, []).append((feeder, stream, frame))

    async def give(feeder: StreamFeeder, stream: Stream, frame: FeedFrame, image: Any) -> None:
        feeder.decoded(stream, frame, image)
        values = await feeder.frame(stream, frame, image)
        if values:
            feeder.emitted(stream, frame, image, frame.media_time, values)

    async for want, decoded_frame in decoded(works[0][0], sorted(takers)):
        try:
            tapped: set[int] = set()
            for feeder, _stream, frame in takers[want]:
                tap = feeder.work.tap
                if tap is not None and id(feeder) not in tapped:
                    tapped.add(id(feeder))
                    tap.frame(frame, decoded_frame.image)
            await asyncio.gather(*(give(feeder, stream, frame, decoded_frame.image)
                                   for feeder, stream, frame in takers[want] if stream.active))
        finally:
            decoded_frame.image.close()
    return [await feeder.finish() for feeder in feeders]
