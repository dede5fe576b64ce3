"""Arms side by side: one decode per case, every frame handed to every arm's own evaluator.

A run with arms opens one evaluator per arm per trial, each behind its own call policy, rate
limiter, ``--concurrency`` budget and (``--cache``) observation cache, and evaluates each case
for all arms at once. The case's frames (a clip sample's every frame too) are decoded (and
oriented, and converted) once, on one worker thread, by the same generators a plain run uses;
:class:`FrameTee` hands each sample's frames to every arm that evaluates it through a small
bounded queue per arm: plain arms share the images, an arm with perturbations gets its own
perturbed copies made on that thread, each frame seeded by the run's seed, the sample's case
and target, the frame's requested time and the arm. A slow arm holds the decoder back only
once its queue is full, so the others run ahead of it by at most that many frames.

Each arm resumes on its own: a checkpoint's records name their arm, and an arm evaluates only
the samples it has no reusable record of (an arm with nothing left opens no evaluator).

Results carry their arm. Gates apply per arm (named ``<arm>/<gate>``) unless one arm is gated.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..adapters.base import AdapterSpec, Evaluator
from ..adapters.calls import Caller
from ..adapters.resilient import RateLimiter
from ..arms.perturb import Perturbation, apply_chain, frame_seed
from ..plan.schedule import ScheduledSample
from ..results import Gate, SampleResult, TrialResult
from ..summary import RunResult
from ..support import threads
from ..video.frames import DecodedFrame
from .case import FRAME_QUEUE_DEPTH, CaseWork, FrameSource, ResultSink, case_items, run_case
from .clipframes import ClipItems, HeldFrames
from .gates import run_gates
from .judge import ignored_result, judge
from .ordering import DECLARATION

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


def _countdown(held: HeldFrames, holders: int) -> Callable[[], None]:
    """A release that lets go of ``held`` once all ``holders`` have released theirs."""
    left = [holders]
    lock = threading.Lock()

    def release() -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            held.release()

    return release


def _perturbed(sample: ScheduledSample, held: HeldFrames, arm: Arm, seed: int) -> HeldFrames:
    """The arm's own copy of every frame of ``held``, each seeded by its requested time."""
    frames: list[DecodedFrame] = []
    try:
        for frame, time_ in zip(held.frames, held.times):
            image = apply_chain(frame.image, arm.perturb,
                                frame_seed(seed, sample.case.name, sample.target.id, time_, arm.name))
            if image is frame.image:
                image = image.copy()  # never close the shared original
            frames.append(DecodedFrame(frame.index, frame.media_time, image))
    except BaseException:
        for made in frames:
            made.image.close()
        raise
    images = [f.image for f in frames]

    def release() -> None:
        for image in images:
            image.close()

    return HeldFrames(tuple(frames), held.times, held.anchor, held.clip, release)


class FrameTee:
    """One decode's ``(sample, frames)`` items, delivered to every arm that wants them, exactly once.

    Plain arms get the same images (released when the last of them lets go: adapters must not
    change images in place); an arm with perturbations gets its own perturbed copies, made on
    the decoding thread. ``wants[i]`` is the sample indexes arm ``i`` still evaluates (a resumed
    arm may have fewer than the others).
    """

    def __init__(self, make_items: Callable[[], ClipItems], arms: Sequence[Arm], seed: int, depth: int,
                 wants: Sequence[frozenset[int]] | None = None) -> None:
        self.make_items = make_items
        self.arms = arms
        self.seed = seed
        self.depth = depth
        self.wants = wants
        self._queues: list[asyncio.Queue[Any]] = []
        self._stop = threading.Event()
        self._producer: asyncio.Future[None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._queues = [asyncio.Queue(maxsize=self.depth) for _ in self.arms]
        self._producer = loop.run_in_executor(None, self._produce, loop)

    def source(self, index: int) -> FrameSource:
        """Arm ``index``'s frame stream, in the form :class:`~.case.CaseWork` takes (its factory is not used)."""

        def frames() -> AsyncGenerator[tuple[ScheduledSample, HeldFrames], None]:
            return self._consume(index)

        return frames

    def _handout(self, sample: ScheduledSample, held: HeldFrames) -> list[HeldFrames | None]:
        """Per arm, its frames of ``sample`` (None for an arm that does not evaluate it)."""
        wanted = [self.wants is None or sample.sample_index in self.wants[i] for i in range(len(self.arms))]
        out: list[HeldFrames | None] = [None] * len(self.arms)
        try:
            for i, arm in enumerate(self.arms):
                if wanted[i] and arm.perturb:
                    out[i] = _perturbed(sample, held, arm, self.seed)
        except BaseException:
            for made in out:
                if made is not None:
                    made.release()
            held.release()
            raise
        plain = [i for i, arm in enumerate(self.arms) if wanted[i] and not arm.perturb]
        if not plain:
            held.release()
            return out
        release = _countdown(held, len(plain))
        for i in plain:
            out[i] = HeldFrames(held.frames, held.times, held.anchor, held.clip, release)
        return out

    def _produce(self, loop: asyncio.AbstractEventLoop) -> None:
        gen = self.make_items()
        try:
            for sample, held in gen:
                frames = self._handout(sample, held)
                for position, (queue, mine) in enumerate(zip(self._queues, frames)):
                    if mine is None:
                        continue
                    if not self._put(loop, queue, (sample, mine)):
                        for rest in frames[position:]:
                            if rest is not None:
                                rest.release()
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

    async def _consume(self, index: int) -> AsyncGenerator[tuple[ScheduledSample, HeldFrames], None]:
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
                yield item
        finally:
            if not finished:
                # An arm that stops early stops the case: every arm's run is abandoned with it.
                self._stop.set()

    async def close(self) -> None:
        """Stop the producer and release every frame no arm took."""
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
                    item[1].release()


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


def _active(split: _CaseSplit) -> bool:
    return any(not s.ignored for s in split.pending)


async def _trial(engine: Engine, plan: ArmPlan, trial: int, limiters: Mapping[str, RateLimiter | None]) -> TrialResult:
    from .trials import _announcing, _close, _open, _split, _tick, _timing_mode

    options, listener = engine.options, engine.listener
    # Each arm resumes on its own: the samples a checkpoint holds for it are reused, the rest run.
    by_arm = [_split(engine.plan, trial, engine.store, arm=arm.name) for arm in plan.arms]
    if options.repeat > 1 and (any(s.pending for splits in by_arm for s in splits) or engine.plan.sample_count == 0):
        listener.trial_started(trial, options.repeat)
    started = time.perf_counter()
    opened: dict[int, tuple[Evaluator, Caller]] = {}
    sink = _announcing(engine.store.sink(trial) if engine.store is not None else None, listener, trial,
                       options.repeat)
    ticker = asyncio.create_task(_tick(listener))
    results: list[SampleResult] = []
    try:
        for index, arm in enumerate(plan.arms):
            if any(_active(split) for split in by_arm[index]):
                opened[index] = await _open(engine, trial, limiters[arm.name], by_arm[index], arm=arm)
        callers = [opened[i][1] if i in opened else None for i in range(len(plan.arms))]
        for case_index in range(len(engine.plan.cases)):
            results.extend(await _case(engine, plan, [splits[case_index] for splits in by_arm], trial, callers,
                                       sink))
    except BaseException:
        for evaluator, _caller in opened.values():
            with contextlib.suppress(Exception):
                await evaluator.cancel_pending()
            with contextlib.suppress(Exception):
                await evaluator.close()
        raise
    finally:
        ticker.cancel()
    for evaluator, _caller in opened.values():
        await _close(evaluator)
    gates = arm_trial_gates(engine, plan, results) if engine.gating else []
    first = next(iter(opened.values()), None)
    return TrialResult(trial=trial, results=tuple(results), gates=tuple(gates),
                       duration_seconds=time.perf_counter() - started,
                       timing_mode=_timing_mode(results, first[1] if first is not None else None))


async def _case(engine: Engine, plan: ArmPlan, splits: Sequence[_CaseSplit], trial: int,
                callers: Sequence[Caller | None], sink: ResultSink) -> list[SampleResult]:
    """One case for every arm: results arm by arm, each arm's in declaration order (reused ones included)."""
    from .trials import _CaseSplit, _warner, missing_field_notes

    options, listener = engine.options, engine.listener
    case_plan = splits[0].plan
    pending_indexes = {s.sample_index for split in splits for s in split.pending}
    union = _CaseSplit(case_plan, {}, [s for s in case_plan.samples if s.sample_index in pending_indexes])
    shown = bool(union.pending) or not any(split.reused for split in splits)
    header = union.header()
    if shown:
        listener.case_started(header, trial, options.repeat)
    lanes = [i for i, split in enumerate(splits) if callers[i] is not None and _active(split)]
    new: dict[int, list[SampleResult]] = {}
    if lanes:
        made = await fan_out_case(engine, plan, [(i, splits[i], callers[i]) for i in lanes], trial, sink,
                                  _warner(listener))
        new.update(zip(lanes, made))
    for i, split in enumerate(splits):
        if i not in new:
            new[i] = [ignored_result(s, plan.arms[i].name) for s in split.pending]
            for result in new[i]:
                sink(result)
    every: list[SampleResult] = []
    fresh: list[SampleResult] = []
    for i, split in enumerate(splits):
        merged = {**split.reused, **{r.sample_index: r for r in new[i]}}
        every.extend(merged[s.sample_index] for s in case_plan.samples)
        fresh.extend(new[i])
    for line in missing_field_notes(fresh):
        listener.notice(line)
    if shown:
        listener.case_finished(header, [r for r in every if r.sample_index in pending_indexes] or every, trial,
                               options.repeat)
    return every


Lane = tuple[int, "_CaseSplit", "Caller | None"]


async def fan_out_case(engine: Engine, plan: ArmPlan, lanes: Sequence[Lane], trial: int, sink: ResultSink,
                       warn: Callable[[str], None] | None = None) -> list[list[SampleResult]]:
    """Decode the case's pending frames once and run each lane's arm on them; each lane's results in order.

    A lane is an arm (by position), its part of the case and its caller. The first arm to stop
    the run (a fail-fast error) cancels the others.
    """
    options = engine.options
    case_plan = lanes[0][1].plan
    wants = [frozenset(s.sample_index for s in split.pending if not s.ignored) for _i, split, _c in lanes]
    every = frozenset().union(*wants)
    wanted = [s for s in case_plan.samples if s.sample_index in every]
    callers = [c for _i, _s, c in lanes]
    assert all(c is not None for c in callers)
    probe = CaseWork(wanted, case_plan.video_path, engine.judge, warn=warn, trial=trial)
    # One decode serves every arm, so all take frames in one order: a batch arm needs its
    # target's frames together (declaration order); time order is kept when no arm batches.
    order = DECLARATION if any(c is not None and c.batch for c in callers) else options.order
    arms = [plan.arms[i] for i, _s, _c in lanes]
    tee = FrameTee(case_items(probe, wanted, order), arms, plan.seed, ARM_QUEUE_DEPTH + options.concurrency,
                   wants)
    tee.start()
    tasks = []
    for position, (arm, (_i, split, caller)) in enumerate(zip(arms, lanes)):
        assert caller is not None
        work = CaseWork(split.pending, case_plan.video_path, engine.judge, keep_frame=engine.keep_frame, warn=warn,
                        saver=engine.saver, trial=trial, arm=arm.name, frames=tee.source(position))
        tasks.append(asyncio.create_task(run_case(work, caller, concurrency=options.concurrency,
                                                  keep_going=options.keep_going, sink=sink, order=order)))
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = next((t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None), None)
        if failed is not None:
            error = failed.exception()
            assert error is not None
            for caller in callers:
                if caller is not None:
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
    from .gates import robustness_gate

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
