"""Timeouts, retries, backoff and the rate limiter of adapters/resilient.py, on real asyncio calls."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from glasskit_eval import TransientError
from glasskit_eval.adapters.base import Sample, Target
from glasskit_eval.adapters.resilient import (
    MAX_BACKOFF_S,
    CallLedger,
    CallPolicy,
    CallTimeout,
    RateLimiter,
    ResilientEvaluator,
    backoff_delay,
    transient_info,
)
from glasskit_eval.errors import AdapterError
from glasskit_eval.results import ErrorKind, SampleResult, Status, TimingMode
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

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        self.calls += 1
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


def wrapped(inner: Any, **policy: Any) -> tuple[ResilientEvaluator, CallLedger]:
    ledger = CallLedger(record_attempts=True)
    return ResilientEvaluator(inner, CallPolicy(**policy), ledger, rng=random.Random(7)), ledger


def result(status: Status = Status.ERROR, kind: ErrorKind | None = ErrorKind.ADAPTER) -> SampleResult:
    return SampleResult(case="c", target="t", target_label=None, sample_index=0, timestamp_s=0.0, source="at",
                        status=status, expected=True, field=None, compare_mode=None, reason="x",
                        evaluation_duration_seconds=99.0, evaluation_timing_mode=TimingMode.INDIVIDUAL,
                        error_kind=kind)


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
    evaluator, ledger = wrapped(inner, retries=3, backoff_s=0.001)
    assert asyncio.run(evaluator.evaluate(sample(), TARGET)) == {"ok": True}
    record = ledger.records[("c", "t", 0)]
    assert inner.calls == 3 and record.attempts == 3
    # The second wait honoured retry_after (checked on the recorded start times).
    assert record.started[2] - record.started[1] >= 0.05
    annotated = ledger.annotate(result(Status.PASSED, None))
    assert annotated.attempts == 3
    assert annotated.usage == {"input_tokens": 30, "cost": 1.5}  # every attempt was paid for
    assert annotated.evaluation_duration_seconds is not None and annotated.evaluation_duration_seconds < 99


def test_permanent_errors_are_not_retried() -> None:
    inner = Flaky(ValueError("bad request"))
    evaluator, ledger = wrapped(inner, retries=5, backoff_s=0)
    with pytest.raises(ValueError, match="bad request"):
        asyncio.run(evaluator.evaluate(sample(), TARGET))
    assert inner.calls == 1


def test_gives_up_after_the_retries_with_the_last_error() -> None:
    inner = Flaky(*(TransientError(f"busy {i}") for i in range(5)))
    evaluator, ledger = wrapped(inner, retries=2, backoff_s=0)
    with pytest.raises(AdapterError, match=r"busy 2 \(gave up after 3 attempts\)"):
        asyncio.run(evaluator.evaluate(sample(), TARGET))
    assert inner.calls == 3


def test_timeout_cancels_an_async_call_and_marks_the_result() -> None:
    inner = Flaky(hang=1)
    evaluator, ledger = wrapped(inner, timeout_s=0.05)
    with pytest.raises(CallTimeout, match=r"timed out after 0\.05s"):
        asyncio.run(evaluator.evaluate(sample(), TARGET))
    assert inner.cancelled == 1
    annotated = ledger.annotate(result())
    assert annotated.error_kind is ErrorKind.TIMEOUT and annotated.resumable_error


def test_timeout_is_retried() -> None:
    inner = Flaky(hang=2)
    evaluator, ledger = wrapped(inner, timeout_s=0.05, retries=2, backoff_s=0)
    assert asyncio.run(evaluator.evaluate(sample(), TARGET)) == {"ok": True}
    assert inner.cancelled == 2
    assert ledger.annotate(result(Status.PASSED, None)).error_kind is None


def test_timeout_abandons_a_sync_call_on_its_thread() -> None:
    release = threading.Event()

    class Blocking(Flaky):
        async def evaluate(self, sample: Sample, target: Target) -> Any:
            return await asyncio.to_thread(release.wait)

    async def go() -> None:
        threads.install()  # as run_trials does: an abandoned call must not keep the loop open
        await evaluator.evaluate(sample(), TARGET)

    evaluator, _ledger = wrapped(Blocking(), timeout_s=0.05)
    try:
        with pytest.raises(CallTimeout):
            asyncio.run(go())
    finally:
        release.set()


def test_an_adapters_own_timeout_error_is_not_a_timeout() -> None:
    evaluator, ledger = wrapped(Flaky(TimeoutError("upstream said so")), timeout_s=5)
    with pytest.raises(TimeoutError, match="upstream said so"):
        asyncio.run(evaluator.evaluate(sample(), TARGET))
    assert ledger.annotate(result()).error_kind is ErrorKind.ADAPTER


def test_rate_limit_spaces_attempt_starts() -> None:
    async def go() -> CallLedger:
        ledger = CallLedger(record_attempts=False)
        evaluator = ResilientEvaluator(Flaky(), CallPolicy(max_calls_per_second=50), ledger,
                                       RateLimiter(50))
        await asyncio.gather(*(evaluator.evaluate(sample(i), TARGET) for i in range(10)))
        return ledger

    ledger = asyncio.run(go())
    starts = sorted(r.started[0] for r in ledger.records.values())
    # 10 starts at 50/s span at least 9 intervals: the average rate holds.
    assert starts[-1] - starts[0] >= 9 / 50 - 1e-3


def test_batch_timeout_scales_and_is_capped() -> None:
    policy = CallPolicy(timeout_s=2)
    assert policy.batch_timeout(10) == 20
    assert policy.batch_timeout(10_000) == 600
    assert CallPolicy(timeout_s=900).batch_timeout(3) == 900
    assert CallPolicy().batch_timeout(3) is None


def test_annotate_leaves_upstream_keys_without_retries() -> None:
    ledger = CallLedger(record_attempts=False)
    ledger.record(("c", "t", 0)).attempts = 1
    assert ledger.annotate(result(Status.PASSED, None)).attempts is None
    assert "attempts" not in ledger.annotate(result(Status.PASSED, None)).to_json()
