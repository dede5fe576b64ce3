"""Arms side by side: one decode per case, every frame handed to every arm's own evaluator.

A run with arms opens one evaluator per arm per trial, each behind its own call policy, rate
limiter and ``--concurrency`` budget, and evaluates each case for all arms at once. The case's
frames are decoded (and oriented, and converted) once, on one worker thread, by the same
``ordering`` generators a plain run uses; :class:`FrameTee` hands each frame to every arm
through a small bounded queue per arm, as a copy (the last plain arm gets the original), or,
for an arm with perturbations, as the perturbed copy made on that thread, seeded by the run's
seed, the sample's case, target and time and the arm. A slow arm holds the decoder back only
once its queue is full, so the others run ahead of it by at most that many frames.

Results carry their arm. Gates apply per arm (named ``<arm>/<gate>``) unless one arm is gated.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..adapters.base import AdapterSpec, Evaluator, FactoryConfig
from ..adapters.calls import Caller, DirectCaller
from ..adapters.resilient import RateLimiter, ResilientCaller
from ..arms.perturb import Perturbation, apply_chain, frame_seed
from ..plan.schedule import ScheduledSample
from ..results import Gate, SampleResult, TrialResult
from ..summary import RunResult
from ..support import threads
from ..video.frames import DecodedFrame
from .case import FRAME_QUEUE_DEPTH, CaseWork, FrameSource, ResultSink, run_case
from .clipframes import HeldFrames
from .gates import run_gates
from .judge import ignored_result, judge
from .ordering import DECLARATION, Items, declaration_order_items, time_order_items

if TYPE_CHECKING:
    from ..plan.planning import Plan
    from .case import FrameKeeper
    from .failures import FailureSaver
    from .observation_cache import ObservationCache
    from .options import TrialOptions
    from .trials import Engine, ResultStore, RunListener, _CaseSplit


@dataclass(frozen=True)
class Arm:
    """One arm as the engine runs it."""

    name: str
    spec: AdapterSpec
    adapter_config: Mapping[str, Any]
    perturb: tuple[Perturbation, ...] = ()
    #: What the arm changes, for the report (``arms.<name>.spec``).
    description: Mapping[str, Any] | None = None
    #: Only image conditions differ from the plain adapter (the robustness gate's arms).
    perturbation_only: bool = False


@dataclass(frozen=True)
class ArmPlan:
    """The arms of a run, in order, the one the others are compared with, and who is gated."""

    arms: tuple[Arm, ...]
    control: str
    seed: int = 0
    #: ``--gate-arm``: only this arm's gates; None: every arm's.
    gate_arm: str | None = None
    #: ``--max-robustness-drop`` and the test's level.
    max_robustness_drop: float | None = None
    alpha: float = 0.05

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arms)

    def gated(self, name: str) -> bool:
        return self.gate_arm is None or self.gate_arm == name


#: Frames waiting for one arm beyond its calls in flight.
ARM_QUEUE_DEPTH = FRAME_QUEUE_DEPTH + 2


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class FrameTee:
    """One ``ordering`` generator's frames, delivered to every arm (perturbed per arm) exactly once."""

    def __init__(self, make_items: Callable[[], Items], arms: Sequence[Arm], seed: int, depth: int) -> None:
        self.make_items = make_items
        self.arms = arms
        self.seed = seed
        self.depth = depth
        self._queues: list[asyncio.Queue[Any]] = []
        self._stop = threading.Event()
        self._producer: asyncio.Future[None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._queues = [asyncio.Queue(maxsize=self.depth) for _ in self.arms]
        self._producer = loop.run_in_executor(None, self._produce, loop)

    def source(self, index: int) -> FrameSource:
        """Arm ``index``'s frame stream, in the form :class:`~.case.CaseWork` takes (its factory is not used)."""

        def frames() -> AsyncIterator[tuple[ScheduledSample, HeldFrames]]:
            return self._consume(index)

        return frames

    def _handout(self, sample: ScheduledSample, frame: DecodedFrame) -> list[DecodedFrame]:
        """One frame per arm: perturbed copies, plain copies, and the original for the last plain arm."""
        images: list[Any] = [None] * len(self.arms)
        plain = [i for i, arm in enumerate(self.arms) if not arm.perturb]
        for i, arm in enumerate(self.arms):
            if arm.perturb:
                seed = frame_seed(self.seed, sample.case.name, sample.target.id, sample.time, arm.name)
                images[i] = apply_chain(frame.image, arm.perturb, seed)
        for i in plain[:-1]:
            images[i] = frame.image.copy()
        if plain:
            images[plain[-1]] = frame.image
        else:
            frame.image.close()
        return [DecodedFrame(frame.index, frame.media_time, image) for image in images]

    def _produce(self, loop: asyncio.AbstractEventLoop) -> None:
        gen = self.make_items()
        try:
            for sample, frame in gen:
                frames = self._handout(sample, frame)
                for position, (queue, mine) in enumerate(zip(self._queues, frames)):
                    if not self._put(loop, queue, (sample, mine)):
                        for rest in frames[position:]:
                            rest.image.close()
                        return
            for queue in self._queues:
                self._put(loop, queue, None)
        except BaseException as exc:
            for queue in self._queues:
                self._put(loop, queue, _Failed(exc))
        finally:
            gen.close()

    def _put(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], item: Any) -> bool:
        if self._stop.is_set():
            return False
        future = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
        while True:
            try:
                future.result(timeout=0.05)
                return True
            except concurrent.futures.TimeoutError:
                if self._stop.is_set():
                    future.cancel()
                    return False

    async def _consume(self, index: int) -> AsyncIterator[tuple[ScheduledSample, HeldFrames]]:
        queue = self._queues[index]
        finished = False
        try:
            while True:
                item = await queue.get()
                if item is None:
                    finished = True
                    return
                if isinstance(item, _Failed):
                    raise item.error
                sample, frame = item
                yield sample, HeldFrames.single(sample.time, frame)
        finally:
            if not finished:
                # An arm that stops early stops the case: every arm's run is abandoned with it.
                self._stop.set()

    async def close(self) -> None:
        """Stop the producer and close every frame no arm took."""
        self._stop.set()
        producer = self._producer
        while producer is not None and not producer.done():
            self._drain()
            await asyncio.wait({producer}, timeout=0.05)
        self._drain()
        if producer is not None and not producer.cancelled():
            producer.exception()

    def _drain(self) -> None:
        for queue in self._queues:
            while not queue.empty():
                item = queue.get_nowait()
                if isinstance(item, tuple):
                    item[1].image.close()


async def run_arm_trials(plan: Plan, spec: AdapterSpec, options: TrialOptions, listener: RunListener, *,
                         arms: ArmPlan, store: ResultStore | None = None, keep_frame: FrameKeeper | None = None,
                         saver: FailureSaver | None = None, cache: ObservationCache | None = None,
                         gating: bool = True) -> RunResult:
    """:func:`~.trials.run_trials` for a run with arms: every case evaluated by each arm on one decode."""
    from .trials import Engine

    threads.install()
    return await _run_arms(Engine(plan, spec, options, listener, store, keep_frame, saver, cache, judge, gating,
                                  arms))


async def _run_arms(engine: Engine) -> RunResult:
    plan = engine.arms
    assert plan is not None
    started = time.perf_counter()
    rate = engine.options.call_policy.max_calls_per_second
    # Each arm is its own provider account as far as pacing goes: one limiter per arm, run-wide.
    limiters = {arm.name: RateLimiter(rate) if rate else None for arm in plan.arms}
    trials = [await _trial(engine, plan, trial, limiters) for trial in range(1, engine.options.repeat + 1)]
    gates: list[Gate] = []
    if engine.gating:
        gates = arm_run_gates(engine, plan, trials)
    return RunResult(eval_dir=str(engine.plan.eval_dir.root), cases=tuple(c.case.name for c in engine.plan.cases),
                     repeat=engine.options.repeat, trials=tuple(trials), gates=tuple(gates),
                     duration_seconds=time.perf_counter() - started)


async def _open(engine: Engine, arm: Arm, limiter: RateLimiter | None) -> tuple[Evaluator, Caller]:
    options = engine.options
    config = FactoryConfig(eval_dir=engine.plan.eval_dir.root, config=dict(arm.adapter_config),
                           artifacts_dir=options.artifacts_dir, verbose=options.verbose)
    evaluator = await arm.spec.create(config)
    return evaluator, ResilientCaller(DirectCaller(evaluator), options.call_policy, limiter)


async def _trial(engine: Engine, plan: ArmPlan, trial: int, limiters: Mapping[str, RateLimiter | None]) -> TrialResult:
    from .trials import _announcing, _close, _split, _tick, _timing_mode

    options, listener = engine.options, engine.listener
    # No reuse: a checkpoint's records do not say which arm made them.
    splits = _split(engine.plan, trial, None)
    if options.repeat > 1:
        listener.trial_started(trial, options.repeat)
    started = time.perf_counter()
    opened: list[tuple[Evaluator, Caller]] = []
    sink = _announcing(engine.store.sink(trial) if engine.store is not None else None, listener, trial,
                       options.repeat)
    ticker = asyncio.create_task(_tick(listener))
    results: list[SampleResult] = []
    try:
        if any(not s.ignored for split in splits for s in split.pending):
            for arm in plan.arms:
                opened.append(await _open(engine, arm, limiters[arm.name]))
        for split in splits:
            results.extend(await _case(engine, plan, split, trial, [c for _e, c in opened], sink))
    except BaseException:
        for evaluator, _caller in opened:
            with contextlib.suppress(Exception):
                await evaluator.cancel_pending()
            with contextlib.suppress(Exception):
                await evaluator.close()
        raise
    finally:
        ticker.cancel()
    for evaluator, _caller in opened:
        await _close(evaluator)
    gates = arm_trial_gates(engine, plan, results) if engine.gating else []
    return TrialResult(trial=trial, results=tuple(results), gates=tuple(gates),
                       duration_seconds=time.perf_counter() - started,
                       timing_mode=_timing_mode(results, opened[0][1] if opened else None))


async def _case(engine: Engine, plan: ArmPlan, split: _CaseSplit, trial: int, callers: Sequence[Caller],
                sink: ResultSink) -> list[SampleResult]:
    """One case for every arm: results arm by arm, each arm's in declaration order."""
    from .trials import _warner, missing_field_notes

    options, listener = engine.options, engine.listener
    header = split.header()
    listener.case_started(header, trial, options.repeat)
    by_arm: list[list[SampleResult]] = []
    if callers and any(not s.ignored for s in split.pending):
        by_arm = await fan_out_case(engine, plan, split, trial, callers, sink, _warner(listener))
    else:
        for arm in plan.arms:
            mine = [ignored_result(s, arm.name) for s in split.pending]
            for result in mine:
                sink(result)
            by_arm.append(mine)
    every = [r for mine in by_arm for r in mine]
    for line in missing_field_notes(every):
        listener.notice(line)
    listener.case_finished(header, every, trial, options.repeat)
    return every


async def fan_out_case(engine: Engine, plan: ArmPlan, split: _CaseSplit, trial: int, callers: Sequence[Caller],
                       sink: ResultSink, warn: Callable[[str], None] | None = None) -> list[list[SampleResult]]:
    """Decode the case's pending frames once and run every arm on them; each arm's results in order.

    The first arm to stop the run (a fail-fast error) cancels the others.
    """
    options = engine.options
    pending = split.pending
    probe = CaseWork(pending, split.plan.video_path, engine.judge, warn=warn, trial=trial)
    decoder = probe.decoder()
    wanted = [s for s in pending if not s.ignored]
    # One decode serves every arm, so all take frames in one order: a batch arm needs its
    # target's frames together (declaration order); time order is kept when no arm batches.
    if options.order == DECLARATION or any(c.batch for c in callers):
        def items() -> Items:
            return declaration_order_items(split.plan.video_path, wanted, decoder)
    else:
        def items() -> Items:
            return time_order_items(split.plan.video_path, wanted, decoder)

    tee = FrameTee(items, plan.arms, plan.seed, ARM_QUEUE_DEPTH + options.concurrency)
    tee.start()
    tasks = []
    for index, (arm, caller) in enumerate(zip(plan.arms, callers)):
        work = CaseWork(pending, split.plan.video_path, engine.judge, keep_frame=engine.keep_frame, warn=warn,
                        trial=trial, arm=arm.name, frames=tee.source(index))
        tasks.append(asyncio.create_task(run_case(work, caller, concurrency=options.concurrency,
                                                  keep_going=options.keep_going, sink=sink, order=options.order)))
    try:
        done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None)
        if failed is not None:
            error = failed.exception()
            assert error is not None
            for caller in callers:
                with contextlib.suppress(Exception):
                    await caller.cancel_pending()
            raise error
        return [t.result() for t in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await tee.close()


# --- gates ------------------------------------------------------------------------------------


def _renamed(arm: str, gates: Sequence[Gate]) -> list[Gate]:
    return [Gate(f"{arm}/{g.name}", g.passed, g.message) for g in gates]


def arm_trial_gates(engine: Engine, plan: ArmPlan, results: Sequence[SampleResult]) -> list[Gate]:
    """Every trial gate of every gated arm, over that arm's results alone."""
    from .trials import _trial_gates

    gates: list[Gate] = []
    for arm in plan.arms:
        if plan.gated(arm.name):
            gates += _renamed(arm.name, _trial_gates(engine, [r for r in results if r.arm == arm.name]))
    return gates


def arm_run_gates(engine: Engine, plan: ArmPlan, trials: Sequence[TrialResult]) -> list[Gate]:
    """The run-level gates per gated arm, then the robustness gate of each perturbation arm."""
    from ..arms.compare import robustness_gate

    gates: list[Gate] = []
    thresholds = engine.plan.eval_dir.config.thresholds
    for arm in plan.arms:
        if plan.gated(arm.name):
            mine = [TrialResult(t.trial, tuple(r for r in t.results if r.arm == arm.name), (), t.duration_seconds,
                                t.timing_mode) for t in trials]
            gates += _renamed(arm.name, run_gates(mine, engine.options.gates, thresholds))
    if plan.max_robustness_drop is not None:
        every = [r for t in trials for r in t.results]
        for arm in plan.arms:
            if arm.perturbation_only and arm.name != plan.control:
                gates.append(robustness_gate(every, plan.control, arm.name, plan.max_robustness_drop, plan.alpha))
    return gates
