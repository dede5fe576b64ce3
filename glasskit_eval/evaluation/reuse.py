"""What a resumed ``run`` reuses from its checkpoint, and where new results go.

A resume reuses passed, failed, ignored and comparison-error results and evaluates adapter
errors and unfinished samples again. A stream is reused only when it ran to its end (its record
is rescored against the case); an unfinished one, or one stopped by an adapter error, is fed
again from its first frame: an app's state cannot be resumed mid-stream. The blocks ``run
--early-stop --cache`` read ahead are fixed in the checkpoint's manifest before a trial's first call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

from ..cases.model import TargetSpec
from ..checkpoints.lifecycle import CheckpointedCommand
from ..errors import CheckpointError
from ..plan.schedule import ScheduledSample
from ..results import SampleResult, StreamResult
from ._streamrecord import RecordError, record_of, rescore


class RunStore:
    """The trial runner's view of the command's checkpoint."""

    def __init__(self, life: CheckpointedCommand) -> None:
        self.life = life

    def reusable(self, trial: int, sample: ScheduledSample, arm: str | None = None) -> SampleResult | None:
        result = self.life.previous.get((trial, sample.case.name, sample.target.id, sample.sample_index, arm))
        if result is None or result.timestamp_s != sample.timestamp_s:
            return None  # not the same sample (guarded by fingerprints; never reuse on doubt)
        return None if result.resumable_error else result

    def reusable_stream(self, trial: int, case: str, spec: TargetSpec, clip_end: Fraction,
                        pace: float | None, arm: str | None = None) -> StreamResult | None:
        record = self.life.previous_streams.get((trial, case, spec.id, arm))
        if record is None or record.get("error") is not None:
            return None
        try:
            return rescore(case, spec, clip_end, record, trial=trial, pace=pace, arm=arm)
        except RecordError as exc:
            where = self.life.checkpoint.path if self.life.checkpoint is not None else "the checkpoint"
            by = f", arm {arm}" if arm is not None else ""
            raise CheckpointError(f"{where}: the record of stream {case}/{spec.id} (trial {trial}{by}) is damaged "
                                  f"({exc}); start a new run") from None

    def sink(self, trial: int) -> Callable[[SampleResult], None]:
        return self.life.recorder(trial)

    def read_ahead_blocks(self, trial: int) -> Mapping[str, Sequence[int]] | None:
        checkpoint = self.life.checkpoint
        return None if checkpoint is None else checkpoint.manifest.read_ahead.get(str(trial))

    async def fix_read_ahead(self, trial: int, blocks: Mapping[str, Sequence[int]]) -> None:
        checkpoint = self.life.checkpoint
        if checkpoint is not None:
            await asyncio.to_thread(checkpoint.fix_read_ahead, trial, {arm: list(ids) for arm, ids in blocks.items()})

    def stream_sink(self, trial: int) -> Callable[[StreamResult], None]:
        def record(result: StreamResult) -> None:
            self.life.record_stream((trial, result.case, result.target, result.arm), record_of(result))

        return record
