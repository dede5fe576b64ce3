"""Cache hits are free: the blocks ``run --early-stop --cache`` reads before any block is called.

A block is *read ahead* for an arm when the observation cache answers every one of its samples
that arm would evaluate with no frame decoded (:meth:`~.observation_cache.CachingCaller.answer_ahead`):
its results are judged as any cached hit is, counted as evaluated, and handed to the schedule as
constants beside the random order (:meth:`~._engine.TrialSchedule.read_ahead`), which goes on over
the other blocks. Which blocks these are is decided once, before the trial's first call, and fixed
in the checkpoint (:meth:`~._engine.ResultStore.fix_read_ahead`): a resume reads the same blocks
(from its records, else the cache, else by calling the adapter) however many entries the
interrupted attempt added to the cache.

Not read ahead: an arm whose adapter the cache does not key (no identity, perturbed pixels, lookups
off), runs that keep the frame of every failure (``--save-failures``), and a resumed trial whose
checkpoint holds results but fixed no blocks (written before blocks were read ahead). An HTML report
shows the samples read ahead without pictures, as it does results a resume reuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from ..plan.schedule import ScheduledSample
from ..results import SampleResult
from ._judge import Judge, Misjudged, Verdict, ignored_result, make_result
from .lanes import Lane
from .observation_cache import CachingCaller

#: Each arm's answered blocks: position in the trial's order -> the block's results in its order.
Known = dict[int, list[SampleResult]]


def answerer(lane: Lane | None) -> CachingCaller | None:
    """The lane's cache, when it can answer ahead of decoding."""
    caller = lane.caller if lane is not None else None
    return caller if isinstance(caller, CachingCaller) and caller.answers_ahead else None


def arm_key(name: str | None) -> str:
    """How the checkpoint names an arm's blocks ("" in a plain run: arm names are never empty)."""
    return name or ""


@dataclasses.dataclass
class Reader:
    """One arm's reading ahead in one trial."""

    cache: CachingCaller | None
    judge: Judge
    arm: str | None
    #: The result an earlier attempt finished for a sample, if any.
    reused: Callable[[ScheduledSample], SampleResult | None]
    #: Samples answered from the cache (not reused), for the counts.
    hits: int = 0

    def block(self, samples: Sequence[ScheduledSample], video_path: Path, *, strict: bool) -> list[SampleResult] | None:
        """Every sample's result (recorded by an interrupted attempt, ignored, or from the cache), or None
        when one is not known; with ``strict`` (a block the checkpoint fixed) a sample the cache cannot
        answer is left out instead, and an observation that cannot be judged is an error result."""
        out: list[SampleResult] = []
        hits = 0
        for sample in samples:
            done = self.reused(sample)
            if done is not None or sample.ignored:
                out.append(done if done is not None else ignored_result(sample, self.arm))
                continue
            found = self.cache.answer_ahead(sample, video_path) if self.cache is not None else None
            if found is None:
                if strict:
                    continue
                return None
            call, index, media = found
            try:
                verdict: Verdict = self.judge(sample, call.observation)
            except Misjudged as exc:
                if not strict:
                    return None  # left to the block's turn, where a fail-fast run stops as usual
                verdict = exc.verdict()
            result = make_result(sample, verdict, call=call, arm=self.arm)
            out.append(dataclasses.replace(result, frame_index=index, media_timestamp_s=media))
            hits += 1
        self.hits += hits
        return out


def choose(blocks: Sequence[Sequence[ScheduledSample]], videos: Sequence[Path], reader: Reader,
           fixed: Sequence[int] | None) -> Known:
    """The blocks read ahead (by position) and their results: those ``fixed`` (positions, whatever the
    cache holds now, a sample it cannot answer missing from its list), else every block it answers whole."""
    known: Known = {}
    for j in (range(len(blocks)) if fixed is None else fixed):
        found = reader.block(blocks[j], videos[j], strict=fixed is not None)
        if found is not None:
            known[j] = found
    return known
