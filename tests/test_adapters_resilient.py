"""Timeouts, retries, backoff and the rate limiter of adapters/resilient.py, on real asyncio calls.

Each call comes back as one :class:`~glasskit_eval.adapters.calls.Call` record.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from glasskit_eval import TransientError
from glasskit_eval.adapters.base import Sample, StreamInfo, Target
from glasskit_eval.adapters.calls import Call, DirectCaller, DirectStreamCaller
from glasskit_eval.adapters.resilient import (
    MAX_BACKOFF_S,
    CallPolicy,
    RateLimiter,
    ResilientCaller,
    ResilientStreamCaller,
    backoff_delay,
    stream_retryable,
    transient_info,
)
from glasskit_eval.errors import AdapterError, CallTimeout, HttpStatusError
from glasskit_eval.support import threads

TARGET = Target(id="t", index=0, label=None, config={})


def sample(index: int = 0) -> Sample:
    return Sample(image=None, timestamp_s=0.0, frame_index=0, sample_index=index,  # type: ignore[arg-type]
                  video_path="v.mp4", case_name="c")


class Flaky:
    """Fails with ``errors`` (one per call) before answering; counts calls."""

    batch = False

    def __init__(self, *errors: BaseException, hang: int = 0) -> None:
        self.errors = list(errors)
        self.hang = hang
        self.calls = 0
        self.cancelled = 0
        #: Monotonic start time of each call.
        self.starts: list[float] = []

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        self.calls += 1
        self.starts.append(time.monotonic())
        sample.report_usage(input_tokens=10, cost=0.5)
        if self.hang:
            self.hang -= 1
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if self.errors:
            raise self.errors.pop(0)
        return {"ok": True}

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        raise NotImplementedError

    async def cancel_pending(self) -> None:
        return None

    async def close(self) -> None:
        return None


class Waits:
    """Records the backoff waits a caller asks for, and waits them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(delay)


def wrapped(inner: Any, waits: Waits | None = None, **policy: Any) -> ResilientCaller:
    return ResilientCaller(DirectCaller(inner), CallPolicy(**policy), rng=random.Random(7),
                           sleep=waits or Waits())


def call(caller: ResilientCaller, index: int = 0) -> Call:
    return asyncio.run(caller.call(sample(index), TARGET))


def test_transient_forms() -> None:
    assert transient_info(TransientError("busy")) == (True, None)
    assert transient_info(TransientError("busy", retry_after=2)) == (True, 2.0)
    marked = RuntimeError("x")
    marked.transient = True  # type: ignore[attr-defined]
    assert transient_info(marked) == (True, None)
    after = RuntimeError("x")
    after.retry_after = 1.5  # type: ignore[attr-defined]
    assert transient_info(after) == (True, 1.5)
    marked_adapter = AdapterError("x")
    marked_adapter.retry_after = 3
    assert transient_info(marked_adapter) == (True, 3.0)
    assert transient_info(AdapterError("x")) == (False, None)
    assert transient_info(ValueError("bad")) == (False, None)
    assert transient_info(CallTimeout("slow")) == (True, None)


def test_full_jitter_backoff_is_bounded_and_honours_retry_after() -> None:
    rng = random.Random(1)
    for attempt in range(1, 12):
        ceiling = min(MAX_BACKOFF_S, 0.5 * 2 ** (attempt - 1))
        delays = [backoff_delay(attempt, 0.5, None, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2  # jitter spreads over the whole range
    assert all(backoff_delay(1, 0.01, 3.0, rng) == 3.0 for _ in range(20))


def test_rate_limiter_spaces_reservations_evenly() -> None:
    now = [100.0]
    limiter = RateLimiter(4.0, clock=lambda: now[0])
    waits = [limiter.reserve() for _ in range(8)]
    assert waits == pytest.approx([0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75])
    now[0] = 110.0  # idle time is not saved up into a burst
    assert limiter.reserve() == 0
    assert limiter.reserve() == pytest.approx(0.25)


def test_transient_errors_are_retried_and_attempts_recorded() -> None:
    inner = Flaky(TransientError("429"), TransientError("503", retry_after=0.05))
    waits = Waits()
    done = call(wrapped(inner, waits, retries=3, backoff_s=0.001))
    assert done.observation == {"ok": True} and done.error is None
    assert inner.calls == 3 and done.attempts == 3
    # The second wait honoured retry_after.
    assert len(waits.delays) == 2 and waits.delays[1] >= 0.05
    assert done.usage == {"input_tokens": 30, "cost": 1.5}  # every attempt was paid for
    assert 0 <= done.seconds < 1 and not done.timed_out and not done.cached


def test_permanent_errors_are_not_retried() -> None:
    inner = Flaky(ValueError("bad request"))
    done = call(wrapped(inner, retries=5, backoff_s=0))
    assert isinstance(done.error, ValueError) and str(done.error) == "bad request"
    assert inner.calls == 1 and done.attempts == 1


def test_gives_up_after_the_retries_with_the_last_error() -> None:
    inner = Flaky(*(TransientError(f"busy {i}") for i in range(5)))
    done = call(wrapped(inner, retries=2, backoff_s=0))
    assert isinstance(done.error, AdapterError) and str(done.error).endswith("busy 2 (gave up after 3 attempts)")
    assert inner.calls == 3 and done.attempts == 3


def test_timeout_cancels_an_async_call_and_marks_the_record() -> None:
    inner = Flaky(hang=1)
    done = call(wrapped(inner, timeout_s=0.05))
    assert isinstance(done.error, CallTimeout) and "timed out after 0.05s" in str(done.error)
    assert inner.cancelled == 1 and done.timed_out


def test_timeout_is_retried() -> None:
    inner = Flaky(hang=2)
    done = call(wrapped(inner, timeout_s=0.05, retries=2, backoff_s=0))
    assert done.observation == {"ok": True} and inner.cancelled == 2
    assert not done.timed_out and done.attempts == 3


def test_timeout_abandons_a_sync_call_on_its_thread() -> None:
    release = threading.Event()

    class Blocking(Flaky):
        async def evaluate(self, sample: Sample, target: Target) -> Any:
            return await asyncio.to_thread(release.wait)

    async def go() -> Call:
        threads.install()  # as run_trials does: an abandoned call must not keep the loop open
        return await caller.call(sample(), TARGET)

    caller = wrapped(Blocking(), timeout_s=0.05)
    try:
        assert asyncio.run(go()).timed_out
    finally:
        release.set()


def test_an_adapters_own_timeout_error_is_not_a_timeout() -> None:
    done = call(wrapped(Flaky(TimeoutError("upstream said so")), timeout_s=5))
    assert isinstance(done.error, TimeoutError) and not done.timed_out


def test_rate_limit_spaces_attempt_starts() -> None:
    inner = Flaky()

    async def go() -> None:
        caller = ResilientCaller(DirectCaller(inner), CallPolicy(max_calls_per_second=50), RateLimiter(50))
        await asyncio.gather(*(caller.call(sample(i), TARGET) for i in range(10)))

    asyncio.run(go())
    starts = sorted(inner.starts)
    # 10 starts at 50/s span at least 9 intervals: the average rate holds.
    assert starts[-1] - starts[0] >= 9 / 50 - 1e-3


def test_batch_timeout_scales_and_is_capped() -> None:
    policy = CallPolicy(timeout_s=2)
    assert policy.batch_timeout(10) == 20
    assert policy.batch_timeout(10_000) == 600
    assert CallPolicy(timeout_s=900).batch_timeout(3) == 900
    assert CallPolicy().batch_timeout(3) is None


def test_attempts_are_left_out_without_retries() -> None:
    # Reports of runs without --retries keep upstream's keys.
    assert call(wrapped(Flaky())).attempts is None
    assert call(wrapped(Flaky(TransientError("x")), retries=1, backoff_s=0)).attempts == 2


def test_a_batch_call_is_one_record_per_sample() -> None:
    class Batch(Flaky):
        batch = True

        async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
            self.calls += 1
            if self.calls == 1:
                raise TransientError("busy")
            return [s.sample_index for s in samples]

    inner = Batch()
    caller = wrapped(inner, retries=1, backoff_s=0)
    done = asyncio.run(caller.call_many([sample(0), sample(1), sample(2)], TARGET))
    assert [d.observation for d in done] == [0, 1, 2] and inner.calls == 2
    assert {(d.batch_size, d.attempts) for d in done} == {(3, 2)}
    short = asyncio.run(DirectCaller(Batch()).call_many([sample(0)], TARGET))
    assert isinstance(short[0].error, TransientError)


class Stateful:
    """A stream adapter that keeps what it took; each error in ``errors`` is raised once, ``taken``
    saying whether the frame was taken before (the adapter's state moved) or not."""

    streams = True

    def __init__(self, *errors: tuple[BaseException, bool], hang: int = 0) -> None:
        self.errors = list(errors)
        self.hang = hang
        self.taken: list[int] = []
        self.attempts = 0
        self.started: list[str] = []
        self.ended = 0

    async def start_stream(self, target: Target, stream: StreamInfo) -> None:
        self.started.append(stream.case)

    async def on_frame(self, sample: Sample, target: Target) -> Any:
        self.attempts += 1
        if self.hang:
            self.hang -= 1
            self.taken.append(sample.sample_index)
            await asyncio.Event().wait()
        if self.errors:
            error, taken = self.errors.pop(0)
            if taken:
                self.taken.append(sample.sample_index)
            raise error
        self.taken.append(sample.sample_index)
        return {"frame": sample.sample_index}

    async def end_stream(self, target: Target) -> Any:
        self.ended += 1
        return [1, 2]


def fed(adapter: Stateful, frames: int = 3, limiter: RateLimiter | None = None, **policy: Any) -> list[Call]:
    caller = ResilientStreamCaller(DirectStreamCaller(adapter), CallPolicy(**policy), limiter,
                                   rng=random.Random(7), sleep=Waits())

    async def go() -> list[Call]:
        start = await caller.start(TARGET, StreamInfo("c", "v.mp4", None))
        frames_called = [await caller.frame(sample(i), TARGET) for i in range(frames)]
        return [start, *frames_called, await caller.end(TARGET)]

    return asyncio.run(go())


def test_stream_calls_are_records_with_the_answers() -> None:
    adapter = Stateful()
    start, *frames, end = fed(adapter)
    assert start.error is None and start.observation is None and adapter.started == ["c"]
    assert [c.observation for c in frames] == [{"frame": 0}, {"frame": 1}, {"frame": 2}]
    assert end.observation == [1, 2] and adapter.ended == 1 and adapter.taken == [0, 1, 2]


def test_a_frame_the_adapter_declined_transiently_is_fed_again() -> None:
    adapter = Stateful((TransientError("busy"), False))
    _start, *frames, _end = fed(adapter, retries=2, backoff_s=0)
    assert adapter.taken == [0, 1, 2] and adapter.attempts == 4
    assert [c.attempts for c in frames] == [2, 1, 1] and all(c.error is None for c in frames)


def test_a_timed_out_frame_is_not_fed_again() -> None:
    adapter = Stateful(hang=1)
    _start, first, *_rest = fed(adapter, retries=3, backoff_s=0, timeout_s=0.05)
    assert isinstance(first.error, CallTimeout) and first.timed_out
    assert "not retried" in str(first.error) and "on_frame timed out" in str(first.error)
    # The adapter took frame 0 once: it was neither retried nor fed twice.
    assert adapter.taken == [0, 1, 2] and adapter.attempts == 3


@pytest.mark.parametrize(("status", "retried"), [(503, True), (429, True), (500, False), (502, False),
                                                 (504, False)])
def test_http_statuses_that_may_have_been_acted_on_are_not_retried(status: int, retried: bool) -> None:
    error = HttpStatusError(f"answered {status}", status, transient=True, retry_after=None)
    error.maybe_processed = status not in (408, 425, 429, 503)
    assert stream_retryable(error) is retried
    adapter = Stateful((error, not retried))
    _start, first, *_rest = fed(adapter, retries=2, backoff_s=0)
    assert (first.error is None) is retried
    assert adapter.taken == [0, 1, 2]
    if not retried:
        assert first.attempts == 1 and "not retried" in str(first.error)


def test_stream_calls_take_a_rate_limit_token_per_attempt() -> None:
    class Counting(RateLimiter):
        taken = 0

        def reserve(self) -> float:
            self.taken += 1
            return 0.0

    limiter = Counting(1000)
    fed(Stateful((TransientError("busy"), False)), limiter=limiter, retries=1, backoff_s=0)
    # start, three frames (one of them twice), end.
    assert limiter.taken == 6
