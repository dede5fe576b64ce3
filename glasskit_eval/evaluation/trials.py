"""Run orchestration: trials, a fresh evaluator per trial, the call stack, gates and stability.

:func:`run_trials` reads as its phases: split each case into reused and pending samples,
open the trial's call stack (adapter, call policy, observation cache), evaluate case by
case, close, and gate. It knows only :class:`~.options.TrialOptions`, never the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol, cast

from ..adapters.base import AdapterSpec, Evaluator, FactoryConfig, StreamEvaluator
from ..adapters.calls import Caller, DirectCaller, DirectStreamCaller, StreamCaller
from ..adapters.resilient import RateLimiter, ResilientCaller, ResilientStreamCaller
from ..arms.perturb import chain_spec
from ..cases.model import TargetSpec
from ..errors import AdapterError, SampleFailure, UsageError
from ..plan.planning import CasePlan, Plan, undeclared_gate_targets
from ..plan.schedule import ScheduledSample
from ..results import Gate, SampleResult, Status, StreamResult, TimingMode, TrialResult
from ..summary import CaseHeader, RunResult
from ..support import allocator, threads
from ..video.damage import Warn
from .case import CaseWork, FrameKeeper, ResultSink, run_case
from .failures import FailureSaver
from .framestore import image_bytes
from .gates import CaseThresholds, evaluate_gates, run_gates
from .judge import Judge, ignored_result, judge
from .observation_cache import ObservationCache
from .options import TrialOptions
from .pacing import run_paced
from .streamcache import StreamCache, stream_cache
from .streamgates import CaseStreamGates, stream_gates
from .streams import StreamFrameKeeper, StreamWork, missing_on_frame, run_streams

if TYPE_CHECKING:
    from .fanout import Arm, ArmPlan


class RunListener(Protocol):
    def trial_started(self, trial: int, total: int) -> None: ...

    def case_started(self, case: CaseHeader, trial: int, total: int) -> None: ...

    def case_finished(self, case: CaseHeader, results: list[SampleResult], trial: int, total: int) -> None: ...

    def sample_finished(self, result: SampleResult, trial: int, total: int) -> None:
        """Each new result as soon as it is judged (before its case finishes)."""

    def stream_finished(self, result: StreamResult, trial: int, total: int) -> None:
        """Each stream once it is fed to the end (or stopped) and scored."""

    def stream_fed(self, case: str, fed: int, total: int) -> None:
        """Frames of ``case``'s streams fed (or dropped) so far, of ``total``: as they go out."""

    def tick(self) -> None:
        """Called every :data:`TICK_S` while a trial runs, so progress shows while calls are slow."""

    def notice(self, text: str) -> None:
        """A warning about the run as a whole (printed once, not per sample)."""


#: How often the listener's clock ticks while a trial runs.
TICK_S = 0.1


class ResultStore(Protocol):
    """Where finished results go (a checkpoint) and which ones an earlier attempt finished."""

    def reusable(self, trial: int, sample: ScheduledSample, arm: str | None = None) -> SampleResult | None:
        """The result an earlier attempt finished for ``sample`` (made by ``arm`` in a run with arms)."""

    def sink(self, trial: int) -> ResultSink: ...

    def reusable_stream(self, trial: int, case: str, spec: TargetSpec, clip_end: Fraction,
                        pace: float | None) -> StreamResult | None: ...

    def stream_sink(self, trial: int) -> Callable[[StreamResult], None]: ...


@dataclass(frozen=True)
class Engine:
    """What every trial of one run shares."""

    plan: Plan
    spec: AdapterSpec
    options: TrialOptions
    listener: RunListener
    store: ResultStore | None = None
    keep_frame: FrameKeeper | None = None
    saver: FailureSaver | None = None
    cache: ObservationCache | None = None
    judge: Judge = judge
    #: False for a shard: its gates are applied when the shards' reports are merged.
    gating: bool = True
    #: ``--arm``/``--perturb``: every case evaluated by each arm on one decode (see ``fanout``).
    arms: ArmPlan | None = None
    #: The HTML report's keeper of stream frames (misses and false alarms).
    stream_keeper: StreamFrameKeeper | None = None


@dataclass
class _CaseSplit:
    """One case in one trial: results an earlier attempt finished, and samples still to evaluate."""

    plan: CasePlan
    reused: dict[int, SampleResult]
    pending: list[ScheduledSample]
    #: Streams an earlier attempt finished, by target id (rescored from the checkpoint).
    streams_reused: dict[str, StreamResult] = dataclasses.field(default_factory=dict)

    @property
    def streams_pending(self) -> tuple[TargetSpec, ...]:
        return tuple(t for t in self.plan.streams if t.id not in self.streams_reused)

    def streams_in_order(self, fresh: Sequence[StreamResult]) -> list[StreamResult]:
        """Reused and fresh streams in the case's declaration order."""
        found = {**self.streams_reused, **{s.target: s for s in fresh}}
        return [found[t.id] for t in self.plan.streams if t.id in found]

    @property
    def shown(self) -> bool:
        """A case with nothing pending is not announced (a resume shows only the work it does)."""
        return bool(self.pending) or not self.reused

    def header(self) -> CaseHeader:
        case = self.plan.case
        video = self.plan.video_path.name if self.plan.video_path.name else case.video.describe()
        return CaseHeader(case.name, len(self.pending), video, tuple((t.id, t.label) for t in case.targets),
                          len(self.streams_pending))


async def run_trials(plan: Plan, spec: AdapterSpec, options: TrialOptions, listener: RunListener, *,
                     store: ResultStore | None = None, keep_frame: FrameKeeper | None = None,
                     saver: FailureSaver | None = None, cache: ObservationCache | None = None,
                     judge: Judge = judge, gating: bool = True,
                     stream_keeper: StreamFrameKeeper | None = None) -> RunResult:
    """Run every trial; with a ``store``, results already in it are reused, not re-evaluated.

    ``keep_frame`` sees each adapter call's result with the frame it got (HTML thumbnails);
    ``stream_keeper`` the frames of stream events' onsets and false alarms.
    A trial with nothing left to evaluate creates no evaluator.
    """
    # Sync adapter calls, decoder hand-offs and encoders run on abandonable daemon threads,
    # so an interrupted run can exit even if an adapter call never returns.
    threads.install()
    engine = Engine(plan, spec, options, listener, store, keep_frame, saver, cache, judge, gating,
                    stream_keeper=stream_keeper)
    started = time.perf_counter()
    # One limiter for the whole run: the provider's quota does not reset between trials.
    rate = options.call_policy.max_calls_per_second
    limiter = RateLimiter(rate) if rate else None
    trials = [await _trial(engine, trial, limiter) for trial in range(1, options.repeat + 1)]
    gates = run_gates(trials, options.gates, plan.eval_dir.config.thresholds) if gating else []
    return RunResult(eval_dir=str(plan.eval_dir.root), cases=tuple(c.case.name for c in plan.cases),
                     repeat=options.repeat, trials=tuple(trials), gates=tuple(gates),
                     duration_seconds=time.perf_counter() - started)


async def _trial(engine: Engine, trial: int, limiter: RateLimiter | None) -> TrialResult:
    options, listener = engine.options, engine.listener
    splits = _split(engine.plan, trial, engine.store, options.pace)
    if options.repeat > 1 and (any(s.pending for s in splits) or engine.plan.sample_count == 0):
        listener.trial_started(trial, options.repeat)
    started = time.perf_counter()
    evaluator: Evaluator | None = None
    caller: Caller | None = None
    stream_caller: StreamCaller | None = None
    streams_cached: StreamCache | None = None
    streamed = [(split.plan.case.name, t.id) for split in splits for t in split.streams_pending]
    if any(not s.ignored for split in splits for s in split.pending) or streamed:
        evaluator, caller = await _open(engine, trial, limiter, splits)
        refused = missing_on_frame(evaluator, streamed)
        if refused is not None:
            with contextlib.suppress(Exception):
                await evaluator.close()
            raise refused
        if streamed:
            stream_caller = ResilientStreamCaller(DirectStreamCaller(cast(StreamEvaluator, evaluator)),
                                                  options.call_policy, limiter)
            if engine.cache is not None and options.pace is None:
                # Paced emissions are timed by the wall clock: never read from or written to the cache.
                streams_cached = stream_cache(engine.cache, evaluator, dict(options.adapter_config), trial)
        if evaluator.batch and trial == 1:
            allocator.hold_frames()
            for line in batch_memory_notes(splits):
                listener.notice(line)
    sink = _announcing(engine.store.sink(trial) if engine.store is not None else None, listener, trial,
                       options.repeat)
    stream_sink = engine.store.stream_sink(trial) if engine.store is not None else None
    ticker = asyncio.create_task(_tick(listener))
    results: list[SampleResult] = []
    streams: list[StreamResult] = []
    try:
        for split in splits:
            results.extend(await _case(engine, split, trial, caller, sink))
            fresh: list[StreamResult] = []
            pending = split.streams_pending
            if pending and stream_caller is not None:
                mine = split.plan
                mine = CasePlan(mine.case, mine.samples, mine.video_path, mine.video, pending)
                work = StreamWork(mine, trial, options.keep_going, options.pace, _warner(listener),
                                  keep_frame=engine.stream_keeper,
                                  progress=functools.partial(listener.stream_fed, mine.case.name))
                if streams_cached is not None:
                    fresh = await streams_cached.run(work, stream_caller)
                else:
                    fresh = await (run_streams if work.pace is None else run_paced)(work, stream_caller)
                for result in fresh:
                    if stream_sink is not None:
                        stream_sink(result)
                    listener.stream_finished(result, trial, options.repeat)
            streams.extend(split.streams_in_order(fresh))
    except BaseException as exc:
        if evaluator is not None:
            if not isinstance(exc, SampleFailure):
                # Interrupted or broken: abandon calls still running in the adapter (a
                # fail-fast case has already done so).
                with contextlib.suppress(Exception):
                    await evaluator.cancel_pending()
            with contextlib.suppress(Exception):
                await evaluator.close()
        raise
    finally:
        ticker.cancel()
    if evaluator is not None:
        await _close(evaluator)
    gates = _trial_gates(engine, results) + _stream_gates(engine, streams) if engine.gating else []
    return TrialResult(trial=trial, results=tuple(results), gates=tuple(gates),
                       duration_seconds=time.perf_counter() - started,
                       timing_mode=_timing_mode(results, caller), streams=tuple(streams))


def _split(plan: Plan, trial: int, store: ResultStore | None, pace: float | None = None,
           arm: str | None = None) -> list[_CaseSplit]:
    splits = []
    for case_plan in plan.cases:
        streams: dict[str, StreamResult] = {}
        if store is not None and case_plan.video is not None:
            for spec in case_plan.streams:
                found = store.reusable_stream(trial, case_plan.case.name, spec, case_plan.video.end_time, pace)
                if found is not None:
                    streams[spec.id] = found
        reused: dict[int, SampleResult] = {}
        pending: list[ScheduledSample] = []
        for sample in case_plan.samples:
            result = store.reusable(trial, sample, arm) if store is not None else None
            if result is None:
                pending.append(sample)
            else:
                reused[sample.sample_index] = result
        splits.append(_CaseSplit(case_plan, reused, pending, streams))
    return splits


async def _open(engine: Engine, trial: int, limiter: RateLimiter | None, splits: Sequence[_CaseSplit], *,
                arm: Arm | None = None) -> tuple[Evaluator, Caller]:
    """The trial's evaluator and the stack of callers around it: cache, then call policy, then the call.

    With ``arm``, that arm's adapter, config and perturbations instead of the run's.
    """
    options = engine.options
    spec = arm.spec if arm is not None else engine.spec
    config = FactoryConfig(eval_dir=engine.plan.eval_dir.root,
                           config=dict(arm.adapter_config if arm is not None else options.adapter_config),
                           artifacts_dir=options.artifacts_dir, verbose=options.verbose)
    evaluator = await spec.create(config)
    refusal = _one_frame_adapter_problem(spec, evaluator, splits)
    if refusal is not None:
        with contextlib.suppress(Exception):
            await evaluator.close()
        raise UsageError(refusal if arm is None else f"arm {arm.name!r}: {refusal}")
    caller: Caller = ResilientCaller(DirectCaller(evaluator), options.call_policy, limiter)
    if engine.cache is not None:
        perturb = chain_spec(arm.perturb) if arm is not None and arm.perturb else None
        caller = engine.cache.caller(caller, evaluator, config.config, trial, spec=spec, perturb=perturb)
    return evaluator, caller


async def _case(engine: Engine, split: _CaseSplit, trial: int, caller: Caller | None,
                sink: ResultSink) -> list[SampleResult]:
    """One case of one trial: its results in declaration order, reused ones included."""
    options, listener = engine.options, engine.listener
    header = split.header()
    new: list[SampleResult] = []
    if split.shown:
        listener.case_started(header, trial, options.repeat)
        if caller is not None and any(not s.ignored for s in split.pending):
            work = CaseWork(split.pending, split.plan.video_path, engine.judge, keep_frame=engine.keep_frame,
                            warn=_warner(listener), saver=engine.saver, trial=trial)
            new = await run_case(work, caller, concurrency=options.concurrency, keep_going=options.keep_going,
                                 sink=sink, order=options.order)
        else:
            new = [ignored_result(s) for s in split.pending]
            for result in new:
                sink(result)
    merged = {**split.reused, **{r.sample_index: r for r in new}}
    for line in missing_field_notes(new):
        listener.notice(line)
    if split.shown:
        listener.case_finished(header, [merged[s.sample_index] for s in split.pending or split.plan.samples],
                               trial, options.repeat)
    return [merged[s.sample_index] for s in split.plan.samples]


def _one_frame_adapter_problem(spec: AdapterSpec, evaluator: Evaluator, splits: Sequence[_CaseSplit]) -> str | None:
    """Why a function adapter that takes only ``image`` may not judge these samples: they have clips."""
    if not getattr(evaluator, "takes_image_only", False):
        return None
    clipped = next((s for split in splits for s in split.pending if s.clip is not None and not s.ignored), None)
    if clipped is None:
        return None
    return (f"adapter {spec.describe()} is a function taking `image, target_id`, so it would see one frame, "
            f"but target {clipped.target.id!r} of case {clipped.case.name!r} has clip samples; "
            "take `sample, target` instead and read the clip from `sample.frames`")


def missing_field_notes(results: Sequence[SampleResult]) -> list[str]:
    """A target whose ``field`` is missing from most observations: the path is likely wrong, so say what is there."""
    from ..compare.values import MissingField, what_is_there

    missing = MissingField("").reason
    by_target: dict[tuple[str, str], list[SampleResult]] = {}
    for r in results:
        if r.evaluated and r.field is not None and not (r.status is Status.ERROR and r.observed is None):
            by_target.setdefault((r.target, r.field), []).append(r)
    notes = []
    for (target, field), mine in by_target.items():
        lacking = [r for r in mine if r.reason.startswith(missing)]
        if 2 * len(lacking) > len(mine):
            count = f"{len(mine)} sample{'s' if len(mine) != 1 else ''}"
            share = "every observation" if len(lacking) == len(mine) else f"{len(lacking)} of {len(mine)} observations"
            notes.append(f"field `{field}` is missing from {share} of {lacking[0].case}/{target} ({count}): "
                         f"{what_is_there(lacking[0].observed, field)}")
    return notes


async def _close(evaluator: Evaluator) -> None:
    try:
        await evaluator.close()
    except AdapterError:
        raise
    except Exception as exc:
        raise AdapterError(f"adapter close failed: {exc}") from exc


def _trial_gates(engine: Engine, results: Sequence[SampleResult]) -> list[Gate]:
    plan = engine.plan
    return evaluate_gates(results, options=engine.options.gates, eval_thresholds=plan.eval_dir.config.thresholds,
                          cases=[CaseThresholds(c.case.name, c.case.thresholds) for c in plan.cases],
                          undeclared=undeclared_gate_targets(plan, engine.options.filters))


def _stream_gates(engine: Engine, streams: Sequence[StreamResult]) -> list[Gate]:
    plan = engine.plan
    return stream_gates(streams, options=engine.options.gates.streams, eval_thresholds=plan.eval_dir.config.thresholds,
                        cases=[CaseStreamGates(c.case.name, c.case.thresholds) for c in plan.cases])


def _warner(listener: RunListener) -> Warn:
    loop = asyncio.get_running_loop()

    def warn(message: str) -> None:
        # From the decoding thread: printed by the loop, above the live progress line.
        loop.call_soon_threadsafe(listener.notice, message)

    return warn


def _announcing(sink: ResultSink | None, listener: RunListener, trial: int, trials: int) -> ResultSink:
    """The store's sink, then the listener: a result is on record before anyone is told of it."""

    def record(result: SampleResult) -> None:
        if sink is not None:
            sink(result)
        listener.sample_finished(result, trial, trials)

    return record


async def _tick(listener: RunListener) -> None:
    while True:
        await asyncio.sleep(TICK_S)
        listener.tick()


#: Above this, holding one target's frames for ``evaluate_many`` is worth a warning.
BATCH_MEMORY_WARN_BYTES = 1 << 30


def batch_memory_notes(splits: Sequence[_CaseSplit]) -> list[str]:
    """One line per target whose ``evaluate_many`` call needs more frame memory than the budget.

    A batch holds an image per sample of its target at once (samples at the same time get
    copies), each as Pillow keeps RGB: 4 bytes a pixel. Measured against the process's RSS
    in ``tests/test_evaluation_trials.py``.
    """
    notes = []
    for split in splits:
        info = split.plan.video
        if info is None:
            continue
        frame_bytes = image_bytes(info.width, info.height)
        counts: dict[str, int] = {}
        for s in split.pending:
            if not s.ignored:
                counts[s.target.id] = counts.get(s.target.id, 0) + 1
        for target, count in counts.items():
            need = count * frame_bytes
            if need > BATCH_MEMORY_WARN_BYTES:
                notes.append(f"evaluate_many for {split.plan.case.name}/{target} gets {count} frames of "
                             f"{info.width}x{info.height} at once: about {need / (1 << 20):,.0f} MiB "
                             "while the call runs; split the target or use evaluate for long ranges")
    return notes


def _timing_mode(results: list[SampleResult], caller: Caller | None) -> TimingMode | None:
    """How the trial's durations were measured; None (upstream: null) when nothing was evaluated."""
    if not any(r.evaluated for r in results):
        return None
    if caller is not None:
        return TimingMode.BATCH if caller.batch else TimingMode.INDIVIDUAL
    # Everything was reused from a checkpoint: the mode those results were measured in.
    return next((r.evaluation_timing_mode for r in results if r.evaluation_timing_mode is not None),
                TimingMode.INDIVIDUAL)
