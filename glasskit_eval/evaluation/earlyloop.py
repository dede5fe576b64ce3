"""``run --early-stop`` in the trial loop: blocks in their seeded order, every lane from one decode per
block, each arm stopping once its own gates are decided.

The trial loop hands over its open lanes and each arm's case splits; :func:`run_blocks` evaluates
the blocks of :func:`~.earlystop.order` in fixed batches (as many blocks side by side as
``--concurrency`` allows, a function of the order alone, so a resume tests after the same blocks),
feeds each arm's tracker after every block (results an earlier attempt finished are read in their
place in the order), and leaves every sample no arm reached ``not_evaluated``. Streams are not
sampled: the trial loop runs them whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from ..plan.schedule import ScheduledSample
from ..results import EarlyStop, SampleResult
from ..summary import CaseHeader
from . import earlystop
from .case import ResultSink
from .engine import CaseSplit, Engine, warner
from .judge import ignored_result
from .lanes import Lane
from .ordering import TIME
from .tee import CaseRun, evaluate_case

_T = TypeVar("_T")

#: One arm's results of one block (None: the arm had stopped).
_PerArm = list[list[SampleResult] | None]


async def run_blocks(engine: Engine, lanes: Sequence[Lane | None], by_arm: Sequence[Sequence[CaseSplit]],
                     trial: int, sink: ResultSink) -> tuple[list[SampleResult], EarlyStop]:
    """Every case's samples for every arm (case by case, arm by arm, declaration order) and the record
    of what was decided (gates named as the trial's gates are: ``<arm>/<gate>`` with arms)."""
    options, listener, arms = engine.options, engine.listener, engine.arms
    assert options.early_stop is not None
    cases = engine.plan.cases
    blocks = earlystop.order([c.samples for c in cases], options.early_stop, trial)
    goals = earlystop.goals(engine.plan, options.gates)
    trackers = [earlystop.Tracker(goals, blocks, options.early_stop) for _arm in arms.arms]
    where = {c.case.name: k for k, c in enumerate(cases)}
    shown = _announce(engine, by_arm, trial)
    side_by_side = max(1, options.concurrency // max((len(b.samples) for b in blocks), default=1))
    # Within --concurrency however many blocks run at once; each block's frames in time order.
    run = CaseRun(dataclasses.replace(options, concurrency=max(1, options.concurrency // side_by_side), order=TIME),
                  engine.judge, trial, sink, arms.seed, engine.keep_frame, engine.saver, warner(listener))

    async def evaluate(block: earlystop.Block) -> _PerArm:
        k = where[block.case]
        active = [i for i, tracker in enumerate(trackers) if not tracker.done]
        work: list[tuple[Lane, list[ScheduledSample]]] = []
        whose: list[int] = []
        for i in active:
            lane = lanes[i]
            pending = [s for s in block.samples if s.sample_index not in by_arm[i][k].reused]
            if lane is not None and any(not s.ignored for s in pending):
                work.append((lane, pending))
                whose.append(i)
        made = dict(zip(whose, await evaluate_case(run, work, cases[k].video_path, cases[k].samples))) if work else {}
        out: _PerArm = [None] * len(trackers)
        for i in active:
            split = by_arm[i][k]
            new = made.get(i)
            if new is None:
                new = [ignored_result(s, arms.result_name(arms.arms[i])) for s in block.samples
                       if s.sample_index not in split.reused]
                for result in new:
                    sink(result)
            got = {**split.reused, **{r.sample_index: r for r in new}}
            out[i] = [got[s.sample_index] for s in block.samples]
        return out

    seen: list[dict[tuple[str, int], SampleResult]] = [{} for _arm in arms.arms]
    for start in range(0, len(blocks), side_by_side):
        if all(tracker.done for tracker in trackers):
            break
        batch = blocks[start:start + side_by_side]
        for block, per_arm in zip(batch, await _together([evaluate(b) for b in batch]), strict=True):
            for i, mine in enumerate(per_arm):
                if mine is not None:
                    trackers[i].observe(block, mine)
                    seen[i].update(((block.case, r.sample_index), r) for r in mine)
    results: list[SampleResult] = []
    for k, case_plan in enumerate(cases):
        every: list[SampleResult] = []
        for i, arm in enumerate(arms.arms):
            name = arms.result_name(arm)
            every += [seen[i].get((case_plan.case.name, s.sample_index))
                      or (ignored_result(s, name) if s.ignored else earlystop.not_evaluated(s, name))
                      for s in case_plan.samples]
        header = shown[k]
        if header is not None:
            if len(cases) > 1:
                listener.case_started(header, trial, options.repeat)
            listener.case_finished(header, every, trial, options.repeat)
        results += every
    return results, _record(engine, trackers)


def _announce(engine: Engine, by_arm: Sequence[Sequence[CaseSplit]], trial: int) -> list[CaseHeader | None]:
    """Each case's header (None: a resume with nothing left in it). One case is announced before the
    first block (the live progress line counts its samples); several, whose blocks interleave, each
    just before its summary."""
    headers: list[CaseHeader | None] = []
    now = len(engine.plan.cases) == 1
    for k, case_plan in enumerate(engine.plan.cases):
        splits = [splits[k] for splits in by_arm]
        pending = {s.sample_index for split in splits for s in split.pending}
        union = CaseSplit(case_plan, {}, [s for s in case_plan.samples if s.sample_index in pending])
        if union.pending or not any(split.reused for split in splits):
            header = union.header()
            if now:
                engine.listener.case_started(header, trial, engine.options.repeat)
            headers.append(header)
        else:
            headers.append(None)
    return headers


def _record(engine: Engine, trackers: Sequence[earlystop.Tracker]) -> EarlyStop:
    """One record for the trial: every arm's decisions, named as the trial's gates."""
    arms = engine.arms
    records = [t.record() for t in trackers]
    gates = tuple(d if arms.plain else dataclasses.replace(d, name=f"{arm.name}/{d.name}")
                  for arm, record in zip(arms.arms, records) for d in record.gates)
    first = records[0]
    return dataclasses.replace(first, samples_evaluated=sum(r.samples_evaluated for r in records),
                               samples_planned=sum(r.samples_planned for r in records), gates=gates)


async def _together(awaitables: Sequence[Awaitable[_T]]) -> list[_T]:
    """Every awaitable at once; if one fails (a fail-fast stop, an interrupt) the others are abandoned."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
