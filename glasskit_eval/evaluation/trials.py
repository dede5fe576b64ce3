"""Run orchestration: the one trial loop, over lanes, whatever the number of arms and the schedule it plays.

:func:`run_trials` reads as its phases: split each case into reused and pending work per arm,
open the trial's lanes (one per arm with work; a plain run is one arm, ``arms.plan.ArmPlan.single``),
play the schedule's blocks (:class:`~._engine.Schedule`: whole cases in declaration order by
default, ``--early-stop``'s seeded blocks until each arm's gates are decided, after reading the
blocks the observation cache answers whole; every lane from one decode per block), finish each case
(its results, then each lane's streams), tear the lanes down as one, and gate (per arm, named
``<arm>/<gate>``, unless the run is plain). Each arm resumes on its own: a checkpoint's records name
their arm, and an arm evaluates only what it has no reusable record of. It knows only
:class:`~.options.TrialOptions`, never the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..adapters.base import AdapterSpec
from ..arms.plan import ArmPlan
from ..compare.values import MissingField, what_is_there
from ..plan.planning import CasePlan, Plan, undeclared_gate_targets
from ..plan.schedule import ScheduledSample
from ..results import Gate, SampleResult, Status, StreamResult, TimingMode, TrialResult
from ..summary import CaseHeader, RunResult
from ..support import allocator, threads
from ..video.frames import kept_open
from ._engine import (
    CaseSplit,
    Engine,
    ResultStore,
    RunListener,
    Schedule,
    TrialSchedule,
    WholeCases,
    announcing,
    split_cases,
    tick,
    warner,
)
from ._framestore import image_bytes
from ._judge import Judge, ignored_result, judge
from ._readahead import Reader, answerer, arm_key, choose
from ._streamlanes import run_lane_streams
from ._tee import CaseRun, evaluate_case, stream_perturbation
from .case import FrameKeeper, ResultSink
from .earlystop import EarlyStopping
from .failures import FailureSaver
from .gates import (
    CaseThresholds,
    arm_comparison_gates,
    arm_trials,
    evaluate_gates,
    per_arm,
    run_gates,
)
from .lanes import Door, Lane, Needs, open_lanes
from .observation_cache import ObservationCache
from .options import TrialOptions
from .streamgates import stream_gates
from .streams import StreamFrameKeeper, StreamWork

_T = TypeVar("_T")


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
    if schedule is None:
        schedule = (WholeCases() if options.early_stop is None
                    else EarlyStopping(options.early_stop, options.gates, options.concurrency))
    engine = Engine(plan, spec, options, listener, playing, store, keep_frame, saver, cache, judge, gating,
                    stream_keeper, schedule)
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
    schedule = engine.schedule.start(engine.plan, trial, arms)
    results: list[SampleResult] = []
    streams: list[StreamResult] = []
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
            play = _Play(engine, lanes, by_arm, trial, sink, schedule)
            # Closed here, not when the loop gets to it: a stop part way must close its kept decoders.
            async with contextlib.aclosing(play.cases()) as cases:
                async for made, fed in cases:
                    results.extend(made)
                    streams.extend(fed)
    finally:
        ticker.cancel()
    gates, early = schedule.settle(_trial_gates(engine, results, streams) if engine.gating else [])
    return TrialResult(trial=trial, results=tuple(results), gates=tuple(gates),
                       duration_seconds=time.perf_counter() - started,
                       timing_mode=_timing_mode(results, first), streams=tuple(streams), early_stop=early)


@dataclass
class _Case:
    """One case of a trial while its blocks are played: what every arm reached of it so far."""

    splits: list[CaseSplit]
    #: Shown by the console (None: a resume with nothing left in it).
    header: CaseHeader | None
    #: Samples some arm had still to evaluate when the trial began.
    pending: frozenset[int]
    #: Per arm, each reached sample's result (reused or new).
    reached: list[dict[int, SampleResult]]
    #: Results made in this trial, for the missing-field notes.
    fresh: list[SampleResult] = dataclasses.field(default_factory=list)
    announced: bool = False


class _Play:
    """One trial's blocks in the schedule's order, every lane from one decode per block; cases finish in
    declaration order (results arm by arm, each arm's in declaration order, then the case's streams).

    A case whose blocks run alone, one after another, is announced before its first block (the live
    progress line counts its samples); one whose blocks interleave with others' just before its summary.
    """

    def __init__(self, engine: Engine, lanes: Sequence[Lane | None], by_arm: Sequence[Sequence[CaseSplit]],
                 trial: int, sink: ResultSink, schedule: TrialSchedule) -> None:
        self.engine, self.lanes, self.trial, self.sink, self.schedule = engine, lanes, trial, sink, schedule
        options, cases = engine.options, engine.plan.cases
        self.where = {c.case.name: k for k, c in enumerate(cases)}
        self.states = [_state([splits[k] for splits in by_arm]) for k in range(len(cases))]
        width = max(1, schedule.side_by_side)
        self.blocks = schedule.blocks
        self.batches = [range(start, min(start + width, len(self.blocks)))
                        for start in range(0, len(self.blocks), width)]
        touched = [{self.where[self.blocks[j].case] for j in batch} for batch in self.batches]
        self.firsts, self.ends, self.alone = _landmarks(touched, len(cases))
        # Within --concurrency however many blocks run at once.
        self.run = CaseRun(dataclasses.replace(options, concurrency=max(1, options.concurrency // width),
                                               order=schedule.order or options.order),
                           engine.judge, trial, sink, engine.arms.seed, engine.keep_frame, engine.saver,
                           warner(engine.listener))

    async def cases(self) -> AsyncGenerator[tuple[list[SampleResult], list[StreamResult]], None]:
        """Each case's results and streams, in declaration order, as soon as no block is left for it."""
        # A video decoded block by block keeps its decoder between blocks (a seek, not an open).
        blocks_of = Counter(self.where[block.case] for block in self.blocks)
        with kept_open(self.engine.plan.cases[k].video_path for k, n in blocks_of.items() if n > 1):
            async for done in self._cases():
                yield done

    async def _cases(self) -> AsyncIterator[tuple[list[SampleResult], list[StreamResult]]]:
        await self._read_ahead()
        finished = 0
        # Before the first batch: the cases with no block before theirs and none of their own.
        for b in range(-1, len(self.batches)):
            if b >= 0 and not await self._batch(b):
                break
            while finished < len(self.states) and self.ends[finished] <= b:
                yield await self._finish(finished)
                finished += 1
        for k in range(finished, len(self.states)):
            yield await self._finish(k)

    async def _batch(self, b: int) -> bool:
        """Batch ``b``'s blocks side by side for every arm still playing, then each arm's observations;
        False (and nothing evaluated) once every arm is done."""
        schedule, arms = self.schedule, range(len(self.engine.arms.arms))
        active = [i for i in arms if not schedule.done(i)]
        if not active:
            return False
        batch = self.batches[b]
        for k in sorted({self.where[self.blocks[j].case] for j in batch}):
            if self.alone[k] and self.firsts[k] == b:
                self._announce(k)
        made = await _together([self._block(j, active) for j in batch])
        for j, mine in zip(batch, made, strict=True):
            for i in active:
                schedule.observe(i, j, mine[i])
        return True

    async def _block(self, j: int, active: Sequence[int]) -> dict[int, list[SampleResult]]:
        """Block ``j`` for each arm in ``active``: its results in the block's order, reused ones read in place."""
        arms = self.engine.arms
        block = self.blocks[j]
        k = self.where[block.case]
        case_plan, state = self.engine.plan.cases[k], self.states[k]
        work: list[tuple[Lane, list[ScheduledSample]]] = []
        whose: list[int] = []
        pending: dict[int, list[ScheduledSample]] = {}
        for i in active:
            lane = self.lanes[i]
            pending[i] = [s for s in block.samples if s.sample_index not in state.splits[i].reused]
            if lane is not None and any(not s.ignored for s in pending[i]):
                work.append((lane, pending[i]))
                whose.append(i)
        made = dict(zip(whose, await evaluate_case(self.run, work, case_plan.video_path, case_plan.samples))
                    ) if work else {}
        out: dict[int, list[SampleResult]] = {}
        for i in active:
            new = made.get(i)
            if new is None:
                new = [ignored_result(s, arms.result_name(arms.arms[i])) for s in pending[i]]
                for result in new:
                    self.sink(result)
            state.fresh.extend(new)
            got = {**state.splits[i].reused, **{r.sample_index: r for r in new}}
            out[i] = [got[s.sample_index] for s in block.samples]
            state.reached[i].update((r.sample_index, r) for r in out[i])
        return out

    async def _read_ahead(self) -> None:
        """Before the first block: each arm's blocks the observation cache answers whole, as constants of
        its schedule (``_readahead``), fixed in the checkpoint before anything is recorded or called."""
        engine, schedule, store, cache = self.engine, self.schedule, self.engine.store, self.engine.cache
        # --save-failures keeps each failure's frame: a block read ahead has none (an HTML report shows
        # its samples without pictures, as it does results a resume reuses).
        if not schedule.reads_ahead or cache is None or not cache.shared.reads or engine.saver is not None:
            return
        fixed = store.read_ahead_blocks(self.trial) if store is not None else None
        if fixed is None and any(split.reused for state in self.states for split in state.splits):
            return  # a checkpoint written before blocks were read ahead: its order goes on as it was
        samples = [b.samples for b in self.blocks]
        videos = [engine.plan.cases[self.where[b.case]].video_path for b in self.blocks]
        names = [engine.arms.result_name(arm) for arm in engine.arms.arms]
        at = {schedule.block_id(j): j for j in range(len(self.blocks))}
        readers, known = [], []
        for i, name in enumerate(names):
            readers.append(Reader(answerer(self.lanes[i]), engine.judge, name, functools.partial(self._reused, i)))
            ids = None if fixed is None else [at[n] for n in fixed.get(arm_key(name), ()) if n in at]
            known.append(await asyncio.to_thread(choose, samples, videos, readers[i], ids))
        if fixed is None and store is not None:
            await store.fix_read_ahead(self.trial, {arm_key(name): [schedule.block_id(j) for j in mine]
                                                    for name, mine in zip(names, known)})
        for i, mine in enumerate(known):
            for j, results in mine.items():
                block, state = self.blocks[j], self.states[self.where[self.blocks[j].case]]
                new = [r for r in results if r.sample_index not in state.splits[i].reused]
                for result in new:
                    self.sink(result)
                state.fresh.extend(new)
                state.splits[i].reused.update((r.sample_index, r) for r in results)
                if len(results) < len(block.samples):
                    # Fixed by the interrupted attempt, and neither recorded nor cached now: called here.
                    results[:] = (await self._block(j, [i]))[i]
                state.reached[i].update((r.sample_index, r) for r in results)
            schedule.read_ahead(i, mine)
            cache.stats.hits += readers[i].hits

    def _reused(self, arm: int, sample: ScheduledSample) -> SampleResult | None:
        return self.states[self.where[sample.case.name]].splits[arm].reused.get(sample.sample_index)

    def _announce(self, k: int) -> None:
        state, options = self.states[k], self.engine.options
        if state.header is not None and not state.announced:
            state.announced = True
            self.engine.listener.case_started(state.header, self.trial, options.repeat)

    async def _finish(self, k: int) -> tuple[list[SampleResult], list[StreamResult]]:
        """Case ``k``'s results (a sample no block reached for an arm: as the schedule says) and its streams."""
        engine, state = self.engine, self.states[k]
        listener, arms, repeat = engine.listener, engine.arms, engine.options.repeat
        self._announce(k)
        every: list[SampleResult] = []
        for i, arm in enumerate(arms.arms):
            name = arms.result_name(arm)
            for sample in engine.plan.cases[k].samples:
                result = state.reached[i].get(sample.sample_index) or self.schedule.unreached(sample, name)
                if result is not None:
                    every.append(result)
        for line in missing_field_notes(state.fresh):
            listener.notice(line)
        if state.header is not None:
            listener.case_finished(state.header, [r for r in every if r.sample_index in state.pending] or every,
                                   self.trial, repeat)
        return every, await _streams(engine, self.lanes, state.splits, self.trial)


def _state(splits: list[CaseSplit]) -> _Case:
    """A case before its first block: its header (if the console shows it) and nothing reached yet."""
    case_plan = splits[0].plan
    pending = frozenset(s.sample_index for split in splits for s in split.pending)
    union = CaseSplit(case_plan, {}, [s for s in case_plan.samples if s.sample_index in pending])
    shown = bool(union.pending) or not any(split.reused for split in splits)
    return _Case(splits, union.header() if shown else None, pending, [{} for _split in splits])


def _landmarks(touched: Sequence[set[int]], cases: int) -> tuple[list[int], list[int], list[bool]]:
    """Per case, given the cases each batch touches: its first batch (-1: none), the batch after which it is
    finished (every case before it finished, none of its blocks left) and whether its batches run alone."""
    firsts, lasts = [-1] * cases, [-1] * cases
    for b, ks in enumerate(touched):
        for k in ks:
            firsts[k] = b if firsts[k] < 0 else firsts[k]
            lasts[k] = b
    ends, alone, reach = [], [], -1
    for k in range(cases):
        reach = max(reach, lasts[k])
        ends.append(reach)
        alone.append(firsts[k] >= 0 and all(touched[b] == {k} for b in range(firsts[k], reach + 1)))
    return firsts, ends, alone


async def _together(awaitables: Sequence[Awaitable[_T]]) -> list[_T]:
    """Every awaitable at once; if one fails (a fail-fast stop, an interrupt) the others are abandoned."""
    if len(awaitables) == 1:
        return [await awaitables[0]]
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


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
            # Lanes share one decode: the first one's frames fed stand for the case's progress.
            progress = functools.partial(listener.stream_fed, mine.case.name) if not works else None
            works.append((lane, StreamWork(mine, trial, options.keep_going, options.pace, warner(listener),
                                           keep_frame=engine.stream_keeper, arm=lane.name,
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

    cases = [CaseThresholds(c.case.name, c.case.thresholds) for c in plan.cases]

    def of(arm: str | None) -> list[Gate]:
        mine = [r for r in results if r.arm == arm]
        fed = [s for s in streams if s.arm == arm]
        return (evaluate_gates(mine, options=gates, eval_thresholds=thresholds, cases=cases,
                               undeclared=undeclared_gate_targets(plan, engine.options.filters))
                + stream_gates(fed, options=gates.streams, eval_thresholds=thresholds, cases=cases))

    return per_arm(engine.arms, of)


def _run_gates(engine: Engine, trials: Sequence[TrialResult]) -> list[Gate]:
    """The run-level gates per gated arm, then the robustness gate of each perturbation arm."""
    arms, thresholds = engine.arms, engine.plan.eval_dir.config.thresholds
    gates = per_arm(arms, lambda arm: run_gates(arm_trials(trials, arm), engine.options.gates, thresholds))
    return gates + arm_comparison_gates(
        trials, control=arms.control, perturbed=[a.name for a in arms.arms if a.perturbation_only],
        blind=arms.blind, max_robustness_drop=arms.max_robustness_drop, alpha=arms.alpha,
        max_blind_pass_rate=arms.max_blind_pass_rate)


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

