"""What every trial of one run shares, and what the trial loop talks to.

:class:`Engine` holds the plan, the arms it plays (a plain run is one), the options and the
outside world's ends: a :class:`RunListener` (progress), a :class:`ResultStore` (the checkpoint),
frame keepers and the observation cache. :class:`CaseSplit` is one case in one trial for one
arm: what an earlier attempt finished and what is still to do. A :class:`Schedule` decides, each
trial, in which blocks and order the samples are evaluated and how far each arm goes: the loop
plays whichever it is given (:class:`WholeCases` by default; ``run --early-stop``'s in
:mod:`.earlystop`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from ..adapters.base import AdapterSpec
from ..arms.plan import ArmPlan
from ..cases.model import TargetSpec
from ..plan.planning import CasePlan, Plan
from ..plan.schedule import ScheduledSample
from ..results import EarlyStop, Gate, SampleResult, StreamResult
from ..summary import CaseHeader
from ..video.damage import Warn
from ._judge import Judge, judge
from .case import FrameKeeper, ResultSink
from .failures import FailureSaver
from .observation_cache import ObservationCache
from .options import TrialOptions
from .streams import StreamFrameKeeper


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
                        pace: float | None, arm: str | None = None) -> StreamResult | None: ...

    def stream_sink(self, trial: int) -> Callable[[StreamResult], None]: ...

    def read_ahead_blocks(self, trial: int) -> Mapping[str, Sequence[int]] | None:
        """The blocks an earlier attempt read from the cache before its first call, by arm name ("" in a
        plain run), as :meth:`TrialSchedule.block_id` numbers them; None when it fixed none."""

    async def fix_read_ahead(self, trial: int, blocks: Mapping[str, Sequence[int]]) -> None:
        """Record, durably and before any block is called, the blocks read ahead in ``trial``."""


class Slice(Protocol):
    """Samples of one case the trial loop evaluates together (every lane from one decode)."""

    @property
    def case(self) -> str: ...

    @property
    def samples(self) -> Sequence[ScheduledSample]: ...


class TrialSchedule(Protocol):
    """One trial's order of blocks and what was learnt from them, arm by arm (one per trial).

    The trial loop evaluates :attr:`blocks` in order, :attr:`side_by_side` at a time (together
    within ``--concurrency``, each block's frames decoded in :attr:`order`, None: ``--order``);
    after each batch it hands every arm still playing its results of each block, in the block's
    order (results an earlier attempt finished read in their place), to :meth:`observe`. An arm
    that is :meth:`done` evaluates no more blocks; once every arm is, the trial stops there. A
    sample no block reached for an arm gets :meth:`unreached` (None: no result). A schedule that
    :attr:`reads_ahead` takes, before the first block, an arm's results of whole blocks the
    observation cache answered (:meth:`read_ahead`); it observes them no more when their turn comes.
    """

    @property
    def blocks(self) -> Sequence[Slice]: ...

    @property
    def side_by_side(self) -> int: ...

    @property
    def order(self) -> str | None: ...

    @property
    def reads_ahead(self) -> bool: ...

    def block_id(self, block: int) -> int:
        """A name for block ``block`` that a resume gives the same block."""

    def read_ahead(self, arm: int, known: Mapping[int, Sequence[SampleResult]]) -> None: ...

    def observe(self, arm: int, block: int, results: Sequence[SampleResult]) -> None: ...

    def done(self, arm: int) -> bool: ...

    def unreached(self, sample: ScheduledSample, arm: str | None) -> SampleResult | None: ...

    def settle(self, gates: list[Gate]) -> tuple[list[Gate], EarlyStop | None]:
        """The trial's gates with what the schedule decided in place, and its record (None: nothing to say)."""


class Schedule(Protocol):
    """In which blocks, in which order and how far each trial evaluates its samples."""

    def start(self, plan: Plan, trial: int, arms: ArmPlan) -> TrialSchedule: ...


@dataclass(frozen=True, slots=True)
class CaseBlock:
    """A case's samples, all of them, in declaration order."""

    case: str
    samples: tuple[ScheduledSample, ...]


@dataclass(frozen=True, slots=True)
class WholeCases:
    """The default schedule: each case one block, cases in declaration order, never stopping early."""

    blocks: tuple[CaseBlock, ...] = ()
    side_by_side: int = 1
    order: str | None = None
    reads_ahead: bool = False

    def start(self, plan: Plan, trial: int, arms: ArmPlan) -> WholeCases:
        return WholeCases(tuple(CaseBlock(c.case.name, c.samples) for c in plan.cases))

    def block_id(self, block: int) -> int:
        return block

    def read_ahead(self, arm: int, known: Mapping[int, Sequence[SampleResult]]) -> None:
        pass

    def observe(self, arm: int, block: int, results: Sequence[SampleResult]) -> None:
        pass

    def done(self, arm: int) -> bool:
        return False

    def unreached(self, sample: ScheduledSample, arm: str | None) -> SampleResult | None:
        return None

    def settle(self, gates: list[Gate]) -> tuple[list[Gate], EarlyStop | None]:
        return gates, None


@dataclass(frozen=True, slots=True)
class Engine:
    """What every trial of one run shares."""

    plan: Plan
    spec: AdapterSpec
    options: TrialOptions
    listener: RunListener
    #: The arms every case is evaluated by, on one decode (a plain run: :meth:`ArmPlan.single`).
    arms: ArmPlan
    store: ResultStore | None = None
    keep_frame: FrameKeeper | None = None
    saver: FailureSaver | None = None
    cache: ObservationCache | None = None
    judge: Judge = judge
    #: False for a shard: its gates are applied when the shards' reports are merged.
    gating: bool = True
    #: The HTML report's keeper of stream frames (misses and false alarms).
    stream_keeper: StreamFrameKeeper | None = None
    schedule: Schedule = dataclasses.field(default_factory=WholeCases)


@dataclass
class CaseSplit:
    """One case in one trial for one arm: results an earlier attempt finished, and samples still to evaluate."""

    plan: CasePlan
    reused: dict[int, SampleResult]
    pending: list[ScheduledSample]
    #: Streams an earlier attempt finished, by target id (rescored from the checkpoint).
    streams_reused: dict[str, StreamResult] = dataclasses.field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Some pending sample needs an adapter call."""
        return any(not s.ignored for s in self.pending)

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


def split_cases(plan: Plan, trial: int, store: ResultStore | None, pace: float | None = None,
                arm: str | None = None) -> list[CaseSplit]:
    """Every case of ``plan`` split into what ``arm`` (None: a plain run) reuses and what it still evaluates."""
    splits = []
    for case_plan in plan.cases:
        streams: dict[str, StreamResult] = {}
        if store is not None and case_plan.video is not None:
            for spec in case_plan.streams:
                found = store.reusable_stream(trial, case_plan.case.name, spec, case_plan.video.end_time, pace,
                                              arm)
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
        splits.append(CaseSplit(case_plan, reused, pending, streams))
    return splits


def warner(listener: RunListener) -> Warn:
    loop = asyncio.get_running_loop()

    def warn(message: str) -> None:
        # From the decoding thread: printed by the loop, above the live progress line.
        loop.call_soon_threadsafe(listener.notice, message)

    return warn


def announcing(sink: ResultSink | None, listener: RunListener, trial: int, trials: int) -> ResultSink:
    """The store's sink, then the listener: a result is on record before anyone is told of it."""

    def record(result: SampleResult) -> None:
        if sink is not None:
            sink(result)
        listener.sample_finished(result, trial, trials)

    return record


async def tick(listener: RunListener) -> None:
    while True:
        await asyncio.sleep(TICK_S)
        listener.tick()
