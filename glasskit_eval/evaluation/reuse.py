"""What a resumed ``run`` reuses from its checkpoint, and where new results go.

A resume reuses passed, failed, ignored and comparison-error results and evaluates adapter
errors and unfinished samples again.
"""

from __future__ import annotations

from collections.abc import Callable

from ..checkpoints.lifecycle import CheckpointedCommand
from ..plan.schedule import ScheduledSample
from ..results import SampleResult


class RunStore:
    """The trial runner's view of the command's checkpoint."""

    def __init__(self, life: CheckpointedCommand) -> None:
        self.life = life

    def reusable(self, trial: int, sample: ScheduledSample, arm: str | None = None) -> SampleResult | None:
        result = self.life.previous.get((trial, sample.case.name, sample.target.id, sample.sample_index, arm))
        if result is None or result.timestamp_s != sample.timestamp_s:
            return None  # not the same sample (guarded by fingerprints; never reuse on doubt)
        return None if result.resumable_error else result

    def sink(self, trial: int) -> Callable[[SampleResult], None]:
        return self.life.recorder(trial)
