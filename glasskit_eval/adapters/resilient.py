"""Timeouts, retries and a run-wide rate limit around any :class:`~.calls.Caller`.

:class:`ResilientCaller` wraps the caller of a trial: each call it forwards waits for a token
of the run's :class:`RateLimiter`, runs under the per-call timeout, and is retried after a
full-jitter backoff when it failed transiently. The :class:`~.calls.Call` it returns is the
last attempt's, with the attempts counted and a timeout marked, so nothing about a call has
to be joined onto its result later.

A retry waits in its own task and holds its ``--concurrency`` slot (the engine's semaphore is
released only when the call returns) but never blocks other samples' calls.

:class:`ResilientStreamCaller` does the same for a stream's calls, with one difference: a stream
adapter keeps state, so a failed call is made again only when the failure shows the adapter did not
take the frame (:func:`stream_retryable`); otherwise a retry could feed it the same frame twice.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final, TypeVar

from ..errors import AdapterError, CallTimeout
from .base import Sample, StreamInfo, Target
from .calls import Call, Caller, StreamCaller

T = TypeVar("T")

#: Upper bound of one backoff wait before jitter (``--retry-backoff`` doubles up to it).
MAX_BACKOFF_S: Final = 60.0
#: A ``retry_after`` longer than this is treated as this: a run must not sleep for hours.
MAX_RETRY_AFTER_S: Final = 600.0
#: A batch call gets ``timeout x batch size``, but never more than this (or the timeout itself).
MAX_BATCH_TIMEOUT_S: Final = 600.0


@dataclass(frozen=True)
class CallPolicy:
    """The run options that shape each adapter call."""

    timeout_s: float | None = None
    retries: int = 0
    backoff_s: float = 1.0
    max_calls_per_second: float | None = None

    def batch_timeout(self, size: int) -> float | None:
        if self.timeout_s is None:
            return None
        return min(self.timeout_s * max(size, 1), max(self.timeout_s, MAX_BATCH_TIMEOUT_S))


def transient_info(exc: BaseException) -> tuple[bool, float | None]:
    """Whether ``exc`` is worth retrying, and the wait it asks for (``retry_after``, seconds)."""
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, bool) or not isinstance(retry_after, (int, float)) or not math.isfinite(retry_after):
        retry_after = None
    transient = getattr(exc, "transient", False) is True or retry_after is not None
    return transient, None if retry_after is None else min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)


def stream_retryable(exc: Exception) -> bool:
    """Whether a failed stream call can be made again without feeding the adapter its frame twice.

    Yes when the adapter itself said the failure is transient (it raised :class:`TransientError`,
    a command adapter answered ``transient``, an HTTP endpoint answered 408/425/429/503) or the
    request never left (an HTTP connection that could not be made). No for ``--timeout`` and for a
    failure after the request left with no answer saying it was not taken (a dropped connection,
    HTTP 500/502/504, a body that is not JSON): the adapter may have taken the frame.
    """
    return not isinstance(exc, CallTimeout) and not getattr(exc, "maybe_processed", False)


def backoff_delay(attempt: int, base_s: float, retry_after: float | None, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, base x 2^(attempt-1))], but at least ``retry_after``."""
    ceiling = min(MAX_BACKOFF_S, base_s * 2 ** (attempt - 1))
    delay = rng.uniform(0.0, ceiling)
    return max(delay, retry_after) if retry_after is not None else delay


class RateLimiter:
    """At most ``rate`` call starts per second across the run, evenly spaced (a burst of one).

    Each caller reserves the next free slot, so waiting callers are served in arrival order and
    the long-run average never exceeds ``rate`` however many calls are in flight.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError("rate must be positive")
        self.interval = 1.0 / rate
        self._clock = clock
        self._next = -math.inf

    def reserve(self) -> float:
        """Reserve the next slot; returns how long to wait for it."""
        now = self._clock()
        slot = max(now, self._next)
        self._next = slot + self.interval
        return slot - now

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)


class _Attempts:
    """The attempt loop both resilient callers share: rate limit, timeout, retries with backoff."""

    def __init__(self, policy: CallPolicy, limiter: RateLimiter | None = None, rng: random.Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.policy = policy
        self.limiter = limiter
        self._rng = rng or random.Random()
        #: Waits between attempts (a seam for tests of the backoff).
        self._sleep = sleep

    async def _attempts(self, call: Callable[[], Awaitable[list[Call]]], samples: Sequence[Sample | None],
                        timeout: float | None, what: str, batch_size: int | None,
                        retryable: Callable[[Exception], bool] | None = None) -> list[Call]:
        policy = self.policy
        attempt = 0
        while True:
            attempt += 1
            if self.limiter is not None:
                await self.limiter.acquire()
            started = time.perf_counter()
            try:
                calls = await self._once(call, timeout, what)
            except CallTimeout as exc:
                seconds = time.perf_counter() - started
                calls = [Call(error=exc, seconds=seconds, usage=dict(s.usage) if s is not None else {},
                              timed_out=True, batch_size=batch_size) for s in samples]
            failure = calls[0].error
            transient, retry_after = transient_info(failure) if failure is not None else (False, None)
            refused = failure is not None and transient and retryable is not None and not retryable(failure)
            if failure is None or not transient or refused or attempt > policy.retries:
                attempts = attempt if policy.retries > 0 or attempt > 1 else None
                error = _after_attempts(failure, attempt) if failure is not None and attempt > 1 else failure
                if refused and policy.retries > 0 and error is not None:
                    error = _not_retried(error)
                return [replace(c, attempts=attempts, error=error if c.error is not None else None)
                        for c in calls]
            await self._sleep(backoff_delay(attempt, policy.backoff_s, retry_after, self._rng))

    async def _once(self, call: Callable[[], Awaitable[T]], timeout: float | None, what: str) -> T:
        if timeout is None:
            return await call()
        # A timer that cancels this task (what asyncio.timeout does on 3.11+, also on 3.10):
        # a timer handle per call costs a tenth of a task with asyncio.wait, and an
        # adapter's own TimeoutError stays its error.
        task = asyncio.current_task()
        assert task is not None
        fired = False

        def expire() -> None:
            nonlocal fired
            fired = True
            task.cancel()

        handle = asyncio.get_running_loop().call_later(timeout, expire)
        try:
            return await call()
        except asyncio.CancelledError:
            # Cancelling ends an async call, abandons a sync one on its daemon thread and makes
            # a command adapter send `cancel` (its late answer is dropped).
            if not fired:
                raise
            uncancel = getattr(task, "uncancel", None)
            if uncancel is not None and uncancel() > 0:
                raise  # cancelled from outside too (fail-fast, interrupt): that wins
            raise CallTimeout(f"{what} timed out after {timeout:g}s (--timeout) and was cancelled") from None
        finally:
            handle.cancel()


class ResilientCaller(_Attempts):
    """A :class:`~.calls.Caller` applying a :class:`CallPolicy` to the one it wraps."""

    def __init__(self, inner: Caller, policy: CallPolicy, limiter: RateLimiter | None = None,
                 rng: random.Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        super().__init__(policy, limiter, rng, sleep)
        self.inner = inner

    @property
    def batch(self) -> bool:
        return self.inner.batch

    async def call(self, sample: Sample, target: Target) -> Call:
        (found,) = await self._attempts(lambda: self._one(sample, target), [sample], self.policy.timeout_s,
                                        "evaluate", None)
        return found

    async def call_many(self, samples: Sequence[Sample], target: Target) -> list[Call]:
        return await self._attempts(lambda: self.inner.call_many(samples, target), samples,
                                    self.policy.batch_timeout(len(samples)), "evaluate_many", len(samples))

    async def cancel_pending(self) -> None:
        await self.inner.cancel_pending()

    async def _one(self, sample: Sample, target: Target) -> list[Call]:
        return [await self.inner.call(sample, target)]


class ResilientStreamCaller(_Attempts):
    """A :class:`~.calls.StreamCaller` applying a :class:`CallPolicy` to the one it wraps.

    Each call takes a rate-limit token and runs under ``--timeout``; ``--retries`` retries only
    what :func:`stream_retryable` allows.
    """

    def __init__(self, inner: StreamCaller, policy: CallPolicy, limiter: RateLimiter | None = None,
                 rng: random.Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        super().__init__(policy, limiter, rng, sleep)
        self.inner = inner

    async def start(self, target: Target, stream: StreamInfo) -> Call:
        return await self._one(lambda: self.inner.start(target, stream), None, "start_stream")

    async def frame(self, sample: Sample, target: Target) -> Call:
        return await self._one(lambda: self.inner.frame(sample, target), sample, "on_frame")

    async def end(self, target: Target) -> Call:
        return await self._one(lambda: self.inner.end(target), None, "end_stream")

    async def _one(self, call: Callable[[], Awaitable[Call]], sample: Sample | None, what: str) -> Call:
        async def listed() -> list[Call]:
            return [await call()]

        (found,) = await self._attempts(listed, [sample], self.policy.timeout_s, what, None, stream_retryable)
        return found


def _not_retried(failure: Exception) -> AdapterError:
    error = CallTimeout if isinstance(failure, CallTimeout) else AdapterError
    return error(f"{failure} (not retried: the stream adapter may already have acted on this call, and must "
                 "not be fed anything twice)")


def _after_attempts(failure: Exception, attempts: int) -> AdapterError:
    text = str(failure)
    if not isinstance(failure, AdapterError):
        text = f"{type(failure).__name__}: {text}" if text else type(failure).__name__
    error = CallTimeout if isinstance(failure, CallTimeout) else AdapterError
    return error(f"{text} (gave up after {attempts} attempts)")
