"""Timeouts, retries and a run-wide rate limit around any :class:`~.base.Evaluator`.

:class:`ResilientEvaluator` wraps the real evaluator of a trial, so the runner's scheduling
(``run/case.py``) is untouched: each ``evaluate``/``evaluate_many`` call it forwards waits for
a token of the run's :class:`RateLimiter`, runs under the per-call timeout, and is retried
after a full-jitter backoff when it failed transiently. What happened to each sample
(attempts, whether the last one timed out, the usage it reported, the last call's duration)
goes into a :class:`CallLedger`; :meth:`CallLedger.annotate` puts it on the sample's result.

A retry waits in its own task and holds its ``--concurrency`` slot (the runner's semaphore is
released only when ``evaluate`` returns) but never blocks other samples' calls.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar

from ..errors import AdapterError
from ..results import ErrorKind, SampleResult, Status, TimingMode
from .base import Evaluator, Sample, Target

T = TypeVar("T")

#: Upper bound of one backoff wait before jitter (``--retry-backoff`` doubles up to it).
MAX_BACKOFF_S: Final = 60.0
#: A ``retry_after`` longer than this is treated as this: a run must not sleep for hours.
MAX_RETRY_AFTER_S: Final = 600.0
#: A batch call gets ``timeout x batch size``, but never more than this (or the timeout itself).
MAX_BATCH_TIMEOUT_S: Final = 600.0

Key = tuple[str, str, int]


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


class CallTimeout(AdapterError):
    """An adapter call ran past ``--timeout`` and was cancelled."""

    transient = True
    retry_after: float | None = None


def transient_info(exc: BaseException) -> tuple[bool, float | None]:
    """Whether ``exc`` is worth retrying, and the wait it asks for (``retry_after``, seconds)."""
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, bool) or not isinstance(retry_after, (int, float)) or not math.isfinite(retry_after):
        retry_after = None
    transient = getattr(exc, "transient", False) is True or retry_after is not None
    return transient, None if retry_after is None else min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)


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


@dataclass
class CallRecord:
    """What the calls for one sample did, across its attempts."""

    attempts: int = 0
    timed_out: bool = False
    #: Monotonic start time of each attempt (lets tests check the backoff without timing).
    started: list[float] = field(default_factory=list)
    #: Duration of the last attempt's call (a batch: the call's, not divided).
    call_seconds: float | None = None
    batch_size: int = 1
    usage: dict[str, float] = field(default_factory=dict)


class CallLedger:
    """Per-sample call records of one trial, keyed like results: (case, target, sample index)."""

    def __init__(self, *, record_attempts: bool) -> None:
        self.records: dict[Key, CallRecord] = {}
        #: With retries off every attempt count is 1; results then keep upstream's keys.
        self.record_attempts = record_attempts

    def record(self, key: Key) -> CallRecord:
        entry = self.records.get(key)
        if entry is None:
            entry = self.records[key] = CallRecord()
        return entry

    def annotate(self, result: SampleResult) -> SampleResult:
        """``result`` with its attempts, usage, timeout kind and call duration filled in."""
        entry = self.records.get(result.key)
        if entry is None or entry.attempts == 0:
            return result
        changes: dict[str, Any] = {}
        if self.record_attempts or entry.attempts > 1:
            changes["attempts"] = entry.attempts
        if entry.usage:
            changes["usage"] = dict(entry.usage)
        if entry.timed_out and result.status is Status.ERROR and result.error_kind is ErrorKind.ADAPTER:
            changes["error_kind"] = ErrorKind.TIMEOUT
        if entry.call_seconds is not None and result.evaluation_duration_seconds is not None:
            # The call itself, without backoff or rate-limit waits: what latency figures mean.
            batch = result.evaluation_timing_mode is TimingMode.BATCH
            changes["evaluation_duration_seconds"] = (
                entry.call_seconds / entry.batch_size if batch else entry.call_seconds)
            if batch:
                changes["call_duration_seconds"] = entry.call_seconds
        return replace(result, **changes) if changes else result

    def annotating(self, sink: Callable[[SampleResult], None]) -> Callable[[SampleResult], None]:
        def annotated(result: SampleResult) -> None:
            sink(self.annotate(result))

        return annotated


def sample_key(sample: Sample, target: Target) -> Key:
    return (sample.case_name, target.id, sample.sample_index)


class ResilientEvaluator:
    """An :class:`~.base.Evaluator` applying a :class:`CallPolicy` to the one it wraps."""

    def __init__(self, inner: Evaluator, policy: CallPolicy, ledger: CallLedger,
                 limiter: RateLimiter | None = None, rng: random.Random | None = None) -> None:
        self.inner = inner
        self.policy = policy
        self.ledger = ledger
        self.limiter = limiter
        self._rng = rng or random.Random()

    @property
    def batch(self) -> bool:
        return self.inner.batch

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        records = [self.ledger.record(sample_key(sample, target))]
        return await self._attempts(lambda: self.inner.evaluate(sample, target), records,
                                    [sample], self.policy.timeout_s, "evaluate")

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        records = [self.ledger.record(sample_key(s, target)) for s in samples]
        for entry in records:
            entry.batch_size = len(samples)
        return await self._attempts(lambda: self.inner.evaluate_many(samples, target), records,
                                    samples, self.policy.batch_timeout(len(samples)), "evaluate_many")

    async def cancel_pending(self) -> None:
        await self.inner.cancel_pending()

    async def close(self) -> None:
        await self.inner.close()

    async def _attempts(self, call: Callable[[], Awaitable[T]], records: list[CallRecord],
                        samples: Sequence[Sample], timeout: float | None, what: str) -> T:
        policy = self.policy
        attempt = 0
        while True:
            attempt += 1
            if self.limiter is not None:
                await self.limiter.acquire()
            started = time.monotonic()
            for entry in records:
                entry.attempts = attempt
                entry.started.append(started)
            try:
                result = await self._once(call, timeout, what)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure: Exception = exc
            else:
                self._finish(records, samples, started, timed_out=False)
                return result
            timed_out = isinstance(failure, CallTimeout)
            self._finish(records, samples, started, timed_out=timed_out)
            transient, retry_after = transient_info(failure)
            if not transient or attempt > policy.retries:
                if attempt > 1:
                    raise _after_attempts(failure, attempt) from failure
                raise failure
            await asyncio.sleep(backoff_delay(attempt, policy.backoff_s, retry_after, self._rng))

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

    @staticmethod
    def _finish(records: list[CallRecord], samples: Sequence[Sample], started: float, *, timed_out: bool) -> None:
        elapsed = time.monotonic() - started
        for entry, sample in zip(records, samples):
            entry.timed_out = timed_out
            entry.call_seconds = elapsed
            # The adapter reports into the sample; every attempt's report counts (it was paid for).
            entry.usage = dict(sample.usage)


def _after_attempts(failure: Exception, attempts: int) -> AdapterError:
    text = str(failure)
    if not isinstance(failure, AdapterError):
        text = f"{type(failure).__name__}: {text}" if text else type(failure).__name__
    error = CallTimeout if isinstance(failure, CallTimeout) else AdapterError
    return error(f"{text} (gave up after {attempts} attempts)")


def wrap(inner: Evaluator, policy: CallPolicy, ledger: CallLedger, limiter: RateLimiter | None) -> Evaluator:
    return ResilientEvaluator(inner, policy, ledger, limiter)
