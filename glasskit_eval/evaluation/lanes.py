"""The one door every adapter call goes through: a lane is an arm's evaluator and its stack of callers.

:func:`open_lanes` is the only place an evaluator is created, wrapped (observation cache, then
the call policy: timeout, retries, rate limit, then the call), checked (a one-frame function
adapter given clips, an adapter without ``on_frame`` given streams), cancelled and closed. ``run``
(plain or with arms), ``--jitter-frames`` and ``seed`` all open their evaluators here, so they
share one call policy and one teardown: on any error, every lane's calls still in flight are
abandoned and every evaluator is closed; on success each is closed and a failing close is an
:class:`~..errors.AdapterError`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ..adapters.base import AdapterSpec, Evaluator, FactoryConfig, StreamEvaluator
from ..adapters.calls import Caller, DirectCaller, DirectStreamCaller, StreamCaller
from ..adapters.resilient import CallPolicy, RateLimiter, ResilientCaller, ResilientStreamCaller
from ..arms.perturb import chain_spec
from ..arms.plan import Arm, ArmPlan
from ..errors import AdapterError, UsageError
from ..plan.schedule import ScheduledSample
from ._streamcache import StreamCache, stream_cache
from .observation_cache import ObservationCache
from .streams import missing_on_frame


@dataclass(frozen=True, slots=True)
class Door:
    """How a run opens its lanes: where, with which call policy, cache and rate limiters."""

    eval_dir: Path
    policy: CallPolicy
    artifacts_dir: Path | None = None
    verbose: bool = False
    cache: ObservationCache | None = None
    #: ``--pace``: paced streams are never cached (their emissions are timed by the wall clock).
    pace: float | None = None
    #: One limiter per arm, for the whole run: a provider's quota does not reset between trials.
    limiters: Mapping[str, RateLimiter | None] | None = None

    @classmethod
    def of(cls, eval_dir: Path, policy: CallPolicy, arms: ArmPlan, *, artifacts_dir: Path | None = None,
           verbose: bool = False, cache: ObservationCache | None = None, pace: float | None = None) -> Door:
        rate = policy.max_calls_per_second
        # Each arm is its own provider account as far as pacing goes.
        limiters = {arm.name: RateLimiter(rate) if rate else None for arm in arms.arms}
        return cls(eval_dir, policy, artifacts_dir, verbose, cache, pace, limiters)


@dataclass(frozen=True, slots=True)
class Needs:
    """What one lane will be asked to do in a trial: its pending samples and its streams (case, target)."""

    samples: Sequence[ScheduledSample] = ()
    streams: Sequence[tuple[str, str]] = ()

    @property
    def any(self) -> bool:
        return bool(self.streams) or any(not s.ignored for s in self.samples)


@dataclass(frozen=True, slots=True)
class Lane:
    """One arm's evaluator in one trial, behind its callers."""

    arm: Arm
    #: The arm's name on its results and records (None in a plain run).
    name: str | None
    evaluator: Evaluator
    caller: Caller
    stream_caller: StreamCaller | None = None
    #: Whole replay streams from the observation cache (``--cache``, replay, no perturbations).
    streams_cached: StreamCache | None = None


@contextlib.asynccontextmanager
async def open_lanes(door: Door, arms: ArmPlan, needs: Sequence[Needs], trial: int) -> AsyncIterator[list[Lane | None]]:
    """A lane per arm of ``arms`` that has something to do (None for the others), torn down as one.

    An arm with nothing to do opens no evaluator.
    """
    opened: list[Lane | None] = []
    try:
        for arm, need in zip(arms.arms, needs):
            opened.append(await _open(door, arms, arm, need, trial) if need.any else None)
        yield opened
    except BaseException:
        # Interrupted, broken or stopped by a fail-fast error: abandon calls still running in
        # every adapter, then close them all.
        for lane in opened:
            if lane is not None:
                with contextlib.suppress(Exception):
                    await lane.evaluator.cancel_pending()
                with contextlib.suppress(Exception):
                    await lane.evaluator.close()
        raise
    failed: list[AdapterError] = []
    for lane in opened:
        if lane is not None:
            try:
                await close_evaluator(lane.evaluator)
            except AdapterError as exc:
                failed.append(exc)
    if failed:
        raise failed[0]


async def _open(door: Door, arms: ArmPlan, arm: Arm, need: Needs, trial: int) -> Lane:
    name = arms.result_name(arm)
    config = FactoryConfig(eval_dir=door.eval_dir, config=dict(arm.adapter_config), artifacts_dir=door.artifacts_dir,
                           verbose=door.verbose)
    evaluator = await arm.spec.create(config)
    try:
        refusal = one_frame_adapter_problem(arm.spec, evaluator, need.samples)
        if refusal is not None:
            raise UsageError(refusal if name is None else f"arm {name!r}: {refusal}")
        refused = missing_on_frame(evaluator, need.streams)
        if refused is not None:
            raise refused if name is None else AdapterError(f"arm {name!r}: {refused}")
    except BaseException:
        with contextlib.suppress(Exception):
            await evaluator.close()
        raise
    limiter = door.limiters.get(arm.name) if door.limiters is not None else None
    caller: Caller = ResilientCaller(DirectCaller(evaluator), door.policy, limiter)
    if door.cache is not None:
        perturb = chain_spec(arm.perturb) if arm.perturb else None
        caller = door.cache.caller(caller, evaluator, config.config, trial, spec=arm.spec, perturb=perturb)
    stream_caller: StreamCaller | None = None
    cached: StreamCache | None = None
    if need.streams:
        stream_caller = ResilientStreamCaller(DirectStreamCaller(cast(StreamEvaluator, evaluator)), door.policy,
                                              limiter)
        # A cached stream is keyed on the decoded pixels: a perturbed arm's frames are not those.
        if door.cache is not None and door.pace is None and not arm.perturb:
            cached = stream_cache(door.cache, evaluator, dict(arm.adapter_config), trial)
    return Lane(arm, name, evaluator, caller, stream_caller, cached)


def one_frame_adapter_problem(spec: AdapterSpec, evaluator: Evaluator,
                              samples: Sequence[ScheduledSample]) -> str | None:
    """Why a function adapter that takes only ``image`` may not judge these samples: they have clips."""
    if not getattr(evaluator, "takes_image_only", False):
        return None
    clipped = next((s for s in samples if s.clip is not None and not s.ignored), None)
    if clipped is None:
        return None
    return (f"adapter {spec.describe()} is a function taking `image, target_id`, so it would see one frame, "
            f"but target {clipped.target.id!r} of case {clipped.case.name!r} has clip samples; "
            "take `sample, target` instead and read the clip from `sample.frames`")


async def close_evaluator(evaluator: Evaluator) -> None:
    try:
        await evaluator.close()
    except AdapterError:
        raise
    except Exception as exc:
        raise AdapterError(f"adapter close failed: {exc}") from exc
