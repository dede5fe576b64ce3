"""One record per adapter call, and the caller that makes it from an evaluator.

A :class:`Call` says what one ``evaluate`` call did, or one sample's share of an
``evaluate_many`` call: the observation or the exception, how long the call took, the
attempts it needed, the usage the adapter reported, whether it timed out and whether the
observation cache answered it. Callers pass records up instead of bare observations
(:class:`DirectCaller` here; retries and timeouts in :mod:`.resilient`; the observation cache
in ``evaluation``), so the engine makes each result once, from (sample, frame, call), and no
side table joins facts back. Stream targets' calls (``start_stream``, ``on_frame``, ``end_stream``)
go through a :class:`StreamCaller` stack of their own, so ``--timeout``, ``--retries`` and the rate
limit apply to them too. This module knows no results, reports or video.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import AdapterError
from .base import Evaluator, Sample, StreamEvaluator, StreamInfo, Target


@dataclass(frozen=True, slots=True)
class Call:
    observation: Any = None
    #: What the call raised; None when it returned an observation.
    error: Exception | None = None
    #: The call itself (its last attempt, without backoff or rate-limit waits); for a batch, the
    #: whole ``evaluate_many`` call.
    seconds: float = 0.0
    #: Attempts made; None when retries are off (reports then keep upstream's keys).
    attempts: int | None = None
    #: What the adapter reported through ``sample.report_usage``, every attempt's added up.
    usage: Mapping[str, float] = field(default_factory=dict)
    timed_out: bool = False
    #: Answered by the observation cache: no adapter call was made.
    cached: bool = False
    #: The number of samples in the ``evaluate_many`` call; None for ``evaluate``.
    batch_size: int | None = None


class Caller(Protocol):
    """Turns samples into :class:`Call` records; never raises for an adapter's exception."""

    @property
    def batch(self) -> bool: ...

    async def call(self, sample: Sample, target: Target) -> Call: ...

    async def call_many(self, samples: Sequence[Sample], target: Target) -> list[Call]: ...

    async def cancel_pending(self) -> None:
        """Abandon calls still in flight (a fail-fast error or an interrupt)."""


class DirectCaller:
    """One evaluator call per request, timed, with its exception or observation recorded."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    @property
    def batch(self) -> bool:
        return self.evaluator.batch

    async def call(self, sample: Sample, target: Target) -> Call:
        started = time.perf_counter()
        try:
            observation = await self.evaluator.evaluate(sample, target)
        except Exception as exc:
            return Call(error=exc, seconds=time.perf_counter() - started, usage=dict(sample.usage))
        return Call(observation, seconds=time.perf_counter() - started, usage=dict(sample.usage))

    async def call_many(self, samples: Sequence[Sample], target: Target) -> list[Call]:
        size = len(samples)
        started = time.perf_counter()
        try:
            observations = await self.evaluator.evaluate_many(samples, target)
            if len(observations) != size:
                raise AdapterError(f"evaluate_many returned {len(observations)} observations for "
                                   f"{size} samples; return exactly one per sample, in order")
        except Exception as exc:
            seconds = time.perf_counter() - started
            return [Call(error=exc, seconds=seconds, usage=dict(s.usage), batch_size=size) for s in samples]
        seconds = time.perf_counter() - started
        return [Call(observation, seconds=seconds, usage=dict(s.usage), batch_size=size)
                for s, observation in zip(samples, observations)]

    async def cancel_pending(self) -> None:
        await self.evaluator.cancel_pending()


class StreamCaller(Protocol):
    """Turns a stream's calls into :class:`Call` records (the answer as ``observation``); never raises
    for an adapter's exception."""

    async def start(self, target: Target, stream: StreamInfo) -> Call: ...

    async def frame(self, sample: Sample, target: Target) -> Call: ...

    async def end(self, target: Target) -> Call: ...


class DirectStreamCaller:
    """One stream evaluator call per request, timed, with its exception or answer recorded."""

    def __init__(self, evaluator: StreamEvaluator) -> None:
        self.evaluator = evaluator

    async def start(self, target: Target, stream: StreamInfo) -> Call:
        return await _timed(self.evaluator.start_stream(target, stream), None)

    async def frame(self, sample: Sample, target: Target) -> Call:
        return await _timed(self.evaluator.on_frame(sample, target), sample)

    async def end(self, target: Target) -> Call:
        return await _timed(self.evaluator.end_stream(target), None)


async def _timed(answer: Awaitable[Any], sample: Sample | None) -> Call:
    started = time.perf_counter()
    try:
        value = await answer
    except Exception as exc:
        return Call(error=exc, seconds=time.perf_counter() - started, usage=_usage(sample))
    return Call(value, seconds=time.perf_counter() - started, usage=_usage(sample))


def _usage(sample: Sample | None) -> dict[str, float]:
    return {} if sample is None else dict(sample.usage)
