"""What a ``run`` checkpoint holds and how a resume uses it.

The manifest's ``invocation`` is a :class:`RunRequest`: everything needed to
repeat the command exactly (adapter, filters, adapter config contents, gates,
options, report path). Records are :class:`SampleResult` payloads keyed by
(trial, case, target, sample index). A resume reuses passed, failed, ignored
and comparison-error results and evaluates adapter errors and unfinished samples.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field, fields
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..checkpoints.fingerprints import VideoDigests, describe_changes, fingerprint
from ..checkpoints.store import Checkpoint, CheckpointError
from ..plan.planning import Plan
from ..plan.schedule import Filters, ScheduledSample
from ..results import COMPARISON_ERROR, ERROR, FAILED, PASSED, SampleResult
from .case import ResultSink

RUN_KIND = "run"
RESUME_COMMAND = "python -m glasskit_eval run --resume"


@dataclass
class RunRequest:
    """One ``run`` invocation, independent of argparse; stored in the checkpoint manifest."""

    eval_dir: str
    adapter: str | None = None
    adapter_command: str | None = None
    adapter_config_path: str | None = None
    #: The adapter config contents; filled in once loaded so a resume restores them exactly.
    adapter_config: dict[str, Any] | None = None
    case: str | None = None
    targets: list[str] = field(default_factory=list)
    at: list[str] = field(default_factory=list)
    from_s: str | None = None
    until_s: str | None = None
    concurrency: int = 1
    repeat: int = 1
    min_pass_rate: float | None = None
    min_target_pass_rate: float | None = None
    max_failures: int | None = None
    max_flaky_samples: int | None = None
    keep_going: bool = False
    verbose: bool = False
    output_json: str | None = None
    artifacts_dir: str | None = None
    save_failures: bool = False
    allow_empty: bool = False

    def filters(self) -> Filters:
        return Filters(case=self.case, targets=tuple(self.targets), at=tuple(Fraction(t) for t in self.at),
                       from_s=Fraction(self.from_s) if self.from_s is not None else None,
                       until_s=Fraction(self.until_s) if self.until_s is not None else None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any, where: Path) -> RunRequest:
        if not isinstance(data, dict) or not isinstance(data.get("eval_dir"), str):
            raise CheckpointError(f"{where}: the manifest's invocation is missing or damaged; start a new run")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise CheckpointError(f"{where}: the manifest records options this version does not know "
                                  f"({', '.join(unknown)}); resume it with the glasskit_eval that wrote it")
        try:
            return cls(**data)
        except TypeError as exc:
            raise CheckpointError(f"{where}: the manifest's invocation is damaged ({exc}); "
                                  "start a new run") from None


def absolute_adapter(target: str) -> str:
    """``path/to/file.py:factory`` with an absolute path, so a resume finds it from anywhere."""
    module, sep, attr = target.rpartition(":")
    if sep and (module.endswith(".py") or "/" in module or "\\" in module):
        return f"{Path(module).expanduser().resolve()}:{attr}"
    return target


def time_text(value: Fraction | None) -> str | None:
    return None if value is None else str(value)


def plan_fingerprints(plan: Plan, case_filter: str | None, digests: VideoDigests | None = None) -> dict[str, Any]:
    """Every selected case file, config.yaml (its thresholds gate the run) and every video."""
    root = plan.eval_dir.root
    files = list(plan.eval_dir.select_case_paths(case_filter))
    files.append(root / "config.yaml")
    videos = sorted({c.video_path for c in plan.cases if c.video_path.name})
    return fingerprint(root, files, videos, digests)


def check_recorded_unchanged(checkpoint: Checkpoint, digests: VideoDigests | None = None) -> None:
    """Before planning: the recorded inputs are as they were (an edited case may not even load)."""
    old = checkpoint.manifest.fingerprints
    root = Path(checkpoint.manifest.eval_dir)
    files = [root / name for name in old.get("files") or {}]
    videos = [root / name for name in old.get("videos") or {}]
    _refuse_changes(checkpoint, describe_changes(old, fingerprint(root, files, videos, digests)))


def check_unchanged(checkpoint: Checkpoint, plan: Plan, case_filter: str | None,
                    digests: VideoDigests | None = None) -> None:
    """After planning: also catches case files that the same filters now select in addition."""
    _refuse_changes(checkpoint, describe_changes(checkpoint.manifest.fingerprints,
                                                 plan_fingerprints(plan, case_filter, digests)))


def _refuse_changes(checkpoint: Checkpoint, changes: list[str]) -> None:
    if changes:
        lines = "\n".join(f"  - {c}" for c in changes)
        raise CheckpointError(f"cannot resume {checkpoint.path}: its inputs changed since it was written:\n"
                              f"{lines}\nResults from different inputs cannot be mixed; restore the "
                              "original files, or start a new run without --resume.")


def is_completed(result: SampleResult) -> bool:
    """Adapter work a resume reuses: an observation that was judged."""
    return result.status in (PASSED, FAILED) or (result.status == ERROR and result.error_kind == COMPARISON_ERROR)


class RunStore:
    """The runner's view of a checkpoint: what to reuse and where new results go."""

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        self._previous = checkpoint.previous
        self._prior_completed = any(is_completed(SampleResult.from_json(p)) for p in self._previous.values())

    @property
    def resumed(self) -> bool:
        return self.checkpoint.resumed

    def reusable(self, trial: int, sample: ScheduledSample) -> SampleResult | None:
        payload = self._previous.get((trial, sample.case.name, sample.target.id, sample.sample_index))
        if payload is None:
            return None
        result = SampleResult.from_json(payload)
        if result.timestamp_s != sample.timestamp_s:
            return None  # not the same sample (guarded by fingerprints; never reuse on doubt)
        if result.status == ERROR and result.error_kind != COMPARISON_ERROR:
            return None
        return result

    def sink(self, trial: int) -> ResultSink:
        append = self.checkpoint.append

        def record(result: SampleResult) -> None:
            # vars() instead of to_json(): encoded at once, so no deep copy is needed.
            payload = getattr(result, "__dict__", None) or result.to_json()
            append((trial, result.case, result.target, result.sample_index), payload,
                   completed=is_completed(result))

        return record

    async def flush(self) -> None:
        await self.checkpoint.flush()

    @property
    def has_completed_work(self) -> bool:
        """At least one judged adapter observation is durable in the checkpoint."""
        return self._prior_completed or self.checkpoint.durable_completed > 0


def resume_command(path: Path) -> str:
    return f"{RESUME_COMMAND} {shlex.quote(str(path))}"


def resume_lines(path: Path, adapter_errors: int | None = None) -> list[str]:
    lines = []
    if adapter_errors:
        noun = "adapter error" if adapter_errors == 1 else "adapter errors"
        lines.append(f"{adapter_errors} {noun} can be retried without rerunning completed samples.")
    lines.append(f"Checkpoint: {path}")
    lines.append(f"Resume with `{resume_command(path)}`.")
    return lines
