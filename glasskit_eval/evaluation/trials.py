"""Run orchestration: the one trial loop, over lanes, whatever the number of arms it plays.

:func:`run_trials` reads as its phases: split each case into reused and pending work per arm,
open the trial's lanes (one per arm with work; a plain run is one arm, ``arms.plan.ArmPlan.single``),
evaluate case by case (every lane from one decode, then each lane's streams), tear the lanes down
as one, and gate (per arm, named ``<arm>/<gate>``, unless the run is plain). Each arm resumes on
its own: a checkpoint's records name their arm, and an arm evaluates only what it has no reusable
record of. It knows only :class:`~.options.TrialOptions`, never the command line.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Sequence

from ..adapters.base import AdapterSpec
from ..arms.plan import ArmPlan
from ..compare.values import MissingField, what_is_there
from ..plan.planning import CasePlan, Plan, undeclared_gate_targets
from ..results import EarlyStop, Gate, SampleResult, Status, StreamResult, TimingMode, TrialResult
from ..summary import RunResult
from ..support import allocator, threads
from . import earlystop
from .case import FrameKeeper, ResultSink
from .earlyloop import run_blocks
from .engine import (
    CaseSplit,
    Engine,
    ResultStore,
    RunListener,
    Schedule,
    WholeCases,
    announcing,
    split_cases,
    tick,
    warner,
)
from .failures import FailureSaver
from .framestore import image_bytes
from .gates import (
    CaseThresholds,
    arm_trials,
    blind_gate,
    evaluate_gates,
    per_arm,
    robustness_gate,
    run_gates,
)
from .judge import Judge, ignored_result, judge
from .lanes import Door, Lane, Needs, open_lanes
from .observation_cache import ObservationCache
from .options import TrialOptions
from .streamgates import CaseStreamGates, stream_gates
from .streamlanes import run_lane_streams
from .streams import StreamFrameKeeper, StreamWork
from .tee import CaseRun, evaluate_case, stream_perturbation


async def run_trials(plan: Plan, spec: AdapterSpec, options: TrialOptions, listener: RunListener, *,
                     arms: ArmPlan | None = None, store: ResultStore | None = None,
                     keep_frame: FrameKeeper | None = None, saver: FailureSaver | None = None,
                     cache: ObservationCache | None = None, judge: Judge = judge, gating: bool = True,
                     stream_keeper: StreamFrameKeeper | None = None, schedule: Schedule | None = None) -> RunResult:
    """Run every trial; with a ``store``, results already in it are reused, not re-evaluated.

    ``arms`` (``--arm``/``--perturb``): every case evaluated by each arm on one decode; None is a
    plain run (one arm whose results carry no arm name). ``keep_frame`` sees each adapter call's
    result with the frame it got (HTML thumbnails); ``stream_keeper`` the frames of stream events'
    onsets and false alarms. A trial with nothing left to evaluate creates no evaluator.
    """
    # Sync adapter calls, decoder hand-offs and encoders run on abandonable daemon threads,
    # so an interrupted run can exit even if an adapter call never returns.
    threads.install()
    playing = arms if arms is not None else ArmPlan.single(spec, options.adapter_config)
    engine = Engine(plan, spec, options, listener, playing, store, keep_frame, saver, cache, judge, gating,
                    stream_keeper, schedule if schedule is not None else WholeCases())
    door = Door.of(plan.eval_dir.root, options.call_policy, playing, artifacts_dir=options.artifacts_dir,
                   verbose=options.verbose, cache=cache, pace=options.pace)
    started = time.perf_counter()
    trials = [await _trial(engine, door, trial) for trial in range(1, options.repeat + 1)]
    gates = _run_gates(engine, trials) if gating else []
    return RunResult(eval_dir=str(plan.eval_dir.root), cases=tuple(c.case.name for c in plan.cases),
                     repeat=options.repeat, trials=tuple(trials), gates=tuple(gates),
                     duration_seconds=time.perf_counter() - started)


async def _trial(engine: Engine, door: Door, trial: int) -> TrialResult:
    options, listener, arms = engine.options, engine.listener, engine.arms
    # Each arm resumes on its own: the samples a checkpoint holds for it are reused, the rest run.
    by_arm = [split_cases(engine.plan, trial, engine.store, options.pace, arm=arms.result_name(arm))
              for arm in arms.arms]
    if options.repeat > 1 and (any(s.pending for splits in by_arm for s in splits) or engine.plan.sample_count == 0):
        listener.trial_started(trial, options.repeat)
    started = time.perf_counter()
    needs = [Needs([s for split in splits for s in split.pending],
                   [(split.plan.case.name, t.id) for split in splits for t in split.streams_pending])
             for splits in by_arm]
    sink = announcing(engine.store.sink(trial) if engine.store is not None else None, listener, trial,
                      options.repeat)
    results: list[SampleResult] = []
    streams: list[StreamResult] = []
    early: EarlyStop | None = None
    first: Lane | None = None
    ticker = asyncio.create_task(tick(listener))
    try:
        async with open_lanes(door, arms, needs, trial) as lanes:
            first = next((lane for lane in lanes if lane is not None), None)
            batching = next((i for i, lane in enumerate(lanes) if lane is not None and lane.evaluator.batch), None)
            if batching is not None and trial == 1:
                allocator.hold_frames()
                for line in batch_memory_notes(by_arm[batching]):
                    listener.notice(line)
            if options.early_stop is not None:
                results, early = await run_blocks(engine, lanes, by_arm, trial, sink)
                for line in missing_field_notes(results):
                    listener.notice(line)
            for case_index in range(len(engine.plan.cases)):
                splits = [splits[case_index] for splits in by_arm]
                if options.early_stop is None:
                    results.extend(await _case(engine, lanes, splits, trial, sink, results))
                streams.extend(await _streams(engine, lanes, splits, trial))
                if options.early_stop is None and engine.schedule.stop(trial, results):
                    break
    finally:
        ticker.cancel()
    gates = _trial_gates(engine, results, streams) if engine.gating else []
    if early is not None:
        gates = earlystop.decided_gates(gates, early)
    return TrialResult(trial=trial, results=tuple(results), gates=tuple(gates),
                       duration_seconds=time.perf_counter() - started,
                       timing_mode=_timing_mode(results, first), streams=tuple(streams), early_stop=early)


async def _case(engine: Engine, lanes: Sequence[Lane | None], splits: Sequence[CaseSplit], trial: int,
                sink: ResultSink, before: Sequence[SampleResult]) -> list[SampleResult]:
    """One case for every arm: results arm by arm, each arm's in declaration order (reused ones included)."""
    options, listener, arms = engine.options, engine.listener, engine.arms
    case_plan = splits[0].plan
    pending_indexes = {s.sample_index for split in splits for s in split.pending}
    union = CaseSplit(case_plan, {}, [s for s in case_plan.samples if s.sample_index in pending_indexes])
    shown = bool(union.pending) or not any(split.reused for split in splits)
    header = union.header()
    if shown:
        listener.case_started(header, trial, options.repeat)
    playing = [i for i, split in enumerate(splits) if lanes[i] is not None and split.active]
    new: dict[int, list[SampleResult]] = {i: [] for i in range(len(splits))}
    if playing:
        run = CaseRun(options, engine.judge, trial, sink, arms.seed, engine.keep_frame, engine.saver,
                      warner(listener))
        for block in engine.schedule.blocks(case_plan, union.pending):
            chosen = {s.sample_index for s in block}
            work = []
            for i in playing:
                lane = lanes[i]
                assert lane is not None
                work.append((lane, [s for s in splits[i].pending if s.sample_index in chosen]))
            made = await evaluate_case(run, work, case_plan.video_path, case_plan.samples)
            for i, results in zip(playing, made):
                new[i] += results
            if engine.schedule.stop(trial, [*before, *(r for mine in new.values() for r in mine)]):
                break
    for i, split in enumerate(splits):
        if i not in playing:
            new[i] = [ignored_result(s, arms.result_name(arms.arms[i])) for s in split.pending]
            for result in new[i]:
                sink(result)
    every: list[SampleResult] = []
    fresh: list[SampleResult] = []
    for i, split in enumerate(splits):
        merged = {**split.reused, **{r.sample_index: r for r in new[i]}}
        # A schedule that stopped early leaves samples without a result.
        every.extend(merged[s.sample_index] for s in case_plan.samples if s.sample_index in merged)
        fresh.extend(new[i])
    for line in missing_field_notes(fresh):
        listener.notice(line)
    if shown:
        listener.case_finished(header, [r for r in every if r.sample_index in pending_indexes] or every, trial,
                               options.repeat)
    return every


async def _streams(engine: Engine, lanes: Sequence[Lane | None], splits: Sequence[CaseSplit],
                   trial: int) -> list[StreamResult]:
    """Each lane's pending streams of one case fed (every lane from one decode), then every arm's in order."""
    options, listener, arms = engine.options, engine.listener, engine.arms
    works: list[tuple[Lane, StreamWork]] = []
    for lane, split in zip(lanes, splits):
        pending = split.streams_pending
        if pending and lane is not None and lane.stream_caller is not None:
            mine = split.plan
            mine = CasePlan(mine.case, mine.samples, mine.video_path, mine.video, pending)
            # The HTML report keeps the frames of streams without an arm (an arm's are not told apart there).
            keeper = engine.stream_keeper if lane.name is None else None
            # Lanes share one decode: the first one's frames fed stand for the case's progress.
            progress = functools.partial(listener.stream_fed, mine.case.name) if not works else None
            works.append((lane, StreamWork(mine, trial, options.keep_going, options.pace, warner(listener),
                                           keep_frame=keeper, arm=lane.name,
                                           perturb=stream_perturbation(lane.arm, arms.seed, mine.case.name),
                                           progress=progress)))
    fresh: dict[str | None, list[StreamResult]] = {}
    if works:
        stream_sink = engine.store.stream_sink(trial) if engine.store is not None else None
        for (lane, _work), found in zip(works, await run_lane_streams(works)):
            fresh[lane.name] = found
            for result in found:
                if stream_sink is not None:
                    stream_sink(result)
                listener.stream_finished(result, trial, options.repeat)
    out: list[StreamResult] = []
    for arm, split in zip(arms.arms, splits):
        out += split.streams_in_order(fresh.get(arms.result_name(arm), []))
    return out


def missing_field_notes(results: Sequence[SampleResult]) -> list[str]:
    """A target whose ``field`` is missing from most observations: the path is likely wrong, so say what is there."""
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


def _trial_gates(engine: Engine, results: Sequence[SampleResult], streams: Sequence[StreamResult]) -> list[Gate]:
    plan, gates = engine.plan, engine.options.gates
    thresholds = plan.eval_dir.config.thresholds

    def of(arm: str | None) -> list[Gate]:
        mine = [r for r in results if r.arm == arm]
        fed = [s for s in streams if s.arm == arm]
        return (evaluate_gates(mine, options=gates, eval_thresholds=thresholds,
                               cases=[CaseThresholds(c.case.name, c.case.thresholds) for c in plan.cases],
                               undeclared=undeclared_gate_targets(plan, engine.options.filters))
                + stream_gates(fed, options=gates.streams, eval_thresholds=thresholds,
                               cases=[CaseStreamGates(c.case.name, c.case.thresholds) for c in plan.cases]))

    return per_arm(engine.arms, of)


def _run_gates(engine: Engine, trials: Sequence[TrialResult]) -> list[Gate]:
    """The run-level gates per gated arm, then the robustness gate of each perturbation arm."""
    arms, thresholds = engine.arms, engine.plan.eval_dir.config.thresholds
    gates = per_arm(arms, lambda arm: run_gates(arm_trials(trials, arm), engine.options.gates, thresholds))
    if arms.max_robustness_drop is not None:
        every = [r for t in trials for r in t.results]
        for arm in arms.arms:
            if arm.perturbation_only and arm.name != arms.control and arm.name not in arms.blind:
                gates.append(robustness_gate(every, arms.control, arm.name, arms.max_robustness_drop, arms.alpha))
    if arms.max_blind_pass_rate is not None:
        gates.append(blind_gate(trials, arms.control, arms.blind, arms.max_blind_pass_rate))
    return gates


#: Above this, holding one target's frames for ``evaluate_many`` is worth a warning.
BATCH_MEMORY_WARN_BYTES = 1 << 30


def batch_memory_notes(splits: Sequence[CaseSplit]) -> list[str]:
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


def _timing_mode(results: list[SampleResult], lane: Lane | None) -> TimingMode | None:
    """How the trial's durations were measured; None (upstream: null) when nothing was evaluated."""
    if not any(r.evaluated for r in results):
        return None
    if lane is not None:
        return TimingMode.BATCH if lane.caller.batch else TimingMode.INDIVIDUAL
    # Everything was reused from a checkpoint: the mode those results were measured in.
    return next((r.evaluation_timing_mode for r in results if r.evaluation_timing_mode is not None),
                TimingMode.INDIVIDUAL)

