"""Labels on a knife edge: the control arm evaluated on the frames either side of each sample's frame.

With ``--jitter-frames K`` every single-frame sample the control arm (the plain adapter in a run
without arms) judged passed or failed is evaluated again on the K frames before and after the
frame it got: their indexes come from the video's frame table and the frame engine decodes them
by their own times (``plan.clips.neighbour_frames``), perturbed as the control's frames are. Each
neighbour's observation is judged against the sample's own expectation; a sample is listed when
some neighbour's verdict (passed or not) differs from the sample's. The sample's verdict is its
first trial's.

These calls make no results: they count in no pass rate, gate, checkpoint or cache. A neighbour
whose call fails is counted as an error and decides nothing. Clip samples are left out (their
frames are a window already).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..adapters.base import Sample
from ..adapters.calls import Call, Caller
from ..arms.jitter import JitterFinding, JitterReport
from ..arms.plan import Arm, ArmPlan
from ..plan.clips import neighbour_frames
from ..plan.planning import CasePlan, Plan
from ..plan.schedule import ScheduledSample
from ..results import SampleResult, Status
from ..video.frames import decode_at
from ..video.frametable import frame_table
from ._bridge import in_background
from ._clipframes import ClipItems, HeldFrames
from ._judge import Judge, Misjudged, judge
from ._tee import perturbed, shared
from .case import FRAME_QUEUE_DEPTH, target_of
from .lanes import Door, Needs, open_lanes
from .options import TrialOptions

#: ``--jitter-frames`` at most: beyond it the extra calls dwarf the run.
MAX_JITTER_FRAMES = 30


@dataclass
class _Tally:
    calls: int = 0
    errors: int = 0
    #: (case, sample_index) -> neighbour frames whose verdict flipped.
    flipped: dict[tuple[str, int], set[int]] = field(default_factory=dict)


def _reference(results: Sequence[SampleResult], arm: str | None) -> dict[tuple[str, int], SampleResult]:
    """The verdicts neighbours are compared with: the arm's judged single-frame samples of trial one."""
    return {(r.case, r.sample_index): r for r in results
            if r.arm == arm and r.status in (Status.PASSED, Status.FAILED) and r.frame_index is not None
            and r.clip is None}


async def run_jitter(plan: Plan, results: Sequence[SampleResult], k: int, arms: ArmPlan, options: TrialOptions,
                     *, judge: Judge = judge) -> JitterReport:
    """Evaluate the control arm of ``arms`` on the ``k`` frames either side of each judged sample of ``results``
    (trial one's); a plain run's control is its one arm."""
    control = next(a for a in arms.arms if a.name == arms.control)
    name = arms.result_name(control)
    reference = _reference(results, name)
    work = [(case, [(s, reference[(case.case.name, s.sample_index)]) for s in case.samples
                    if (case.case.name, s.sample_index) in reference and s.clip is None])
            for case in plan.cases]
    work = [(case, mine) for case, mine in work if mine]
    tally = _Tally()
    if work:
        door = Door.of(plan.eval_dir.root, options.call_policy, arms, artifacts_dir=options.artifacts_dir,
                       verbose=options.verbose)
        needs = [Needs([s for _case, mine in work for s, _r in mine]) if arm is control else Needs()
                 for arm in arms.arms]
        async with open_lanes(door, arms, needs, 1) as lanes:
            lane = next(lane for lane in lanes if lane is not None)
            for case, mine in work:
                await _case(case, mine, k, control, arms.seed, lane.caller, options.concurrency, judge, tally)
    findings = []
    for case, mine in work:
        for sample, result in mine:
            flipped = tally.flipped.get((case.case.name, sample.sample_index))
            if flipped:
                assert result.frame_index is not None
                findings.append(JitterFinding(result.case, result.target, result.timestamp_s, result.frame_index,
                                              tuple(sorted(flipped))))
    return JitterReport(k, name, sum(len(m) for _c, m in work), tally.calls, tally.errors, tuple(findings))


def _items(path: Path, wanted: Mapping[Fraction, list[ScheduledSample]], arm: Arm, seed: int) -> Callable[[], ClipItems]:
    def items() -> ClipItems:
        decoded = decode_at(path, sorted(wanted))
        try:
            for want, frame in decoded:
                group = wanted[want]
                held = HeldFrames.single(want, frame)
                if arm.perturb:
                    try:
                        mine = [perturbed(sample, held, arm, seed) for sample in group]
                    finally:
                        held.release()
                else:
                    mine = shared(held, len(group))
                yield from zip(group, mine)
        finally:
            decoded.close()

    return items


def _neighbour(sample: ScheduledSample, held: HeldFrames, path: Path) -> Sample:
    """What the adapter sees of a neighbouring frame: that frame, at its own time and index."""
    frame = held.anchor_frame
    return Sample(image=frame.image, timestamp_s=float(held.times[0]), frame_index=frame.index,
                  sample_index=sample.sample_index, video_path=str(path), case_name=sample.case.name)


async def _case(case: CasePlan, mine: Sequence[tuple[ScheduledSample, SampleResult]], k: int, arm: Arm, seed: int,
                caller: Caller, concurrency: int, judge: Judge, tally: _Tally) -> None:
    table = frame_table(case.video_path)
    wanted: dict[Fraction, list[ScheduledSample]] = {}
    passed: dict[int, bool] = {}
    for sample, result in mine:
        assert result.frame_index is not None
        passed[sample.sample_index] = result.status is Status.PASSED
        for entry in neighbour_frames(result.frame_index, k, table):
            wanted.setdefault(entry.time, []).append(sample)

    def judged(sample: ScheduledSample, frame_index: int, call: Call) -> None:
        tally.calls += 1
        if call.error is not None:
            tally.errors += 1
            return
        try:
            status = judge(sample, call.observation).status
        except Misjudged:
            tally.errors += 1
            return
        if (status is Status.PASSED) != passed[sample.sample_index]:
            tally.flipped.setdefault((case.case.name, sample.sample_index), set()).add(frame_index)

    source = in_background(_items(case.video_path, wanted, arm, seed), FRAME_QUEUE_DEPTH)
    if caller.batch:
        await _batches(case, source, caller, judged)
        return
    slots = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[None]] = set()

    async def call(sample: ScheduledSample, held: HeldFrames) -> None:
        try:
            done = await caller.call(_neighbour(sample, held, case.video_path), target_of(sample))
            judged(sample, held.anchor_frame.index, done)
        finally:
            slots.release()
            held.release()

    try:
        async for sample, held in source:
            await slots.acquire()
            task = asyncio.create_task(call(sample, held))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*list(tasks))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*list(tasks), return_exceptions=True)


async def _batches(case: CasePlan, source: Any, caller: Caller,
                   judged: Callable[[ScheduledSample, int, Call], None]) -> None:
    """A batch adapter gets each target's neighbouring frames in one ``evaluate_many`` call."""
    by_target: dict[str, list[tuple[ScheduledSample, HeldFrames]]] = {}
    try:
        async for sample, held in source:
            by_target.setdefault(sample.target.id, []).append((sample, held))
        for items in by_target.values():
            calls = await caller.call_many([_neighbour(s, h, case.video_path) for s, h in items],
                                           target_of(items[0][0]))
            for (sample, held), done in zip(items, calls):
                judged(sample, held.anchor_frame.index, done)
    finally:
        for items in by_target.values():
            for _sample, held in items:
                held.release()
