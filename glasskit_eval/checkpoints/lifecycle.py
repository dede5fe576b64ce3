"""The one lifecycle of a checkpointed command, driven by both ``run`` and ``seed``.

A command opens a checkpoint (``--resume``) or creates one once its plan is known, checks that
the recorded inputs are unchanged, appends every finished result, and ends in one of three ways:

* complete: the checkpoint is marked complete (kept for the record);
* stopped early (fail-fast error, adapter setup or close error, SIGINT/SIGTERM): when the
  checkpoint holds at least one judged adapter observation, the exact resume command is
  printed; otherwise a new checkpoint is deleted, because rerunning the command loses nothing;
* finished with retryable errors: kept, with the resume command, when it holds work.

While :meth:`CheckpointedCommand.guard` is active SIGTERM takes the same path as SIGINT.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from ..errors import CheckpointError, CommandStopped, EvalError, Interrupted, SampleFailure
from ..results import ResultFormatError, SampleResult
from ..support.interrupts import sigterm_as_keyboard_interrupt
from .fingerprints import VideoDigests, describe_changes, fingerprint
from .store import COMPLETE, MANIFEST_NAME, Checkpoint, Key, StreamKey

if TYPE_CHECKING:
    from ..plan.planning import Plan

R = TypeVar("R")

def _finished(record: Mapping[str, Any]) -> bool:
    """A stream record that a resume reuses: the stream ran to its end."""
    return record.get("error") is None


def resume_command(kind: str, path: Path) -> str:
    return f"python -m glasskit_eval {kind} --resume {shlex.quote(str(path))}"


def plan_fingerprints(plan: Plan, case_filter: str | None, digests: VideoDigests | None = None) -> dict[str, Any]:
    """Every selected case file, config.yaml (its thresholds gate the run) and every video."""
    root = plan.eval_dir.root
    files = list(plan.eval_dir.select_case_paths(case_filter))
    files.append(root / "config.yaml")
    videos = sorted({c.video_path for c in plan.cases if c.video_path.name})
    return fingerprint(root, files, videos, digests)


class CheckpointedCommand:
    """One invocation of a checkpointed command (``kind`` is ``run`` or ``seed``)."""

    def __init__(self, kind: str, title: str) -> None:
        self.kind = kind
        #: How messages name the command: "Eval", "Seed".
        self.title = title
        self.checkpoint: Checkpoint | None = None
        #: Results an earlier attempt recorded, by key (empty for a new checkpoint).
        self.previous: dict[Key, SampleResult] = {}
        #: Streams an earlier attempt finished: their records (``evaluation._streamrecord``), by key.
        self.previous_streams: dict[StreamKey, Mapping[str, Any]] = {}
        #: The run has stream targets: progress lines count streams beside samples.
        self.has_streams = False
        self._prior_completed = False
        #: --verbose: a fail-fast stop shows the adapter's traceback.
        self.verbose = False

    # -- opening and creating

    def open(self, path: Path) -> Mapping[str, Any]:
        """Open ``path`` to resume it; returns the recorded invocation."""
        checkpoint = self.checkpoint = Checkpoint.open(path, self.kind)
        for key, payload in checkpoint.previous.items():
            try:
                self.previous[key] = SampleResult.from_json(payload)
            except ResultFormatError as exc:
                raise CheckpointError(f"{path}: a record for {key[1]}/{key[2]} sample {key[3]} is damaged "
                                      f"({exc}); start a new {self.kind}") from None
        self.previous_streams = dict(checkpoint.streams)
        self._prior_completed = (any(r.judged for r in self.previous.values())
                                 or any(_finished(p) for p in self.previous_streams.values()))
        return checkpoint.manifest.invocation

    def create(self, eval_dir: Path, invocation: dict[str, Any], fingerprints: dict[str, Any],
               total: int, *, root: Path | None = None) -> Checkpoint:
        """Create the checkpoint (under ``root`` when given, else the eval's runs/)."""
        self.checkpoint = Checkpoint.create(eval_dir, self.kind, invocation, fingerprints, total, root=root)
        return self.checkpoint

    def resume(self, path: Path, restore: Callable[[Mapping[str, Any], Path], R],
               digests: VideoDigests | None = None) -> R:
        """Open ``path``, restore the request it recorded, and check its recorded inputs."""
        request = restore(self.open(path), path / MANIFEST_NAME)
        self.check_recorded_unchanged(digests)
        return request

    def start(self, invocation: dict[str, Any], plan: Plan, case_filter: str | None,
              digests: VideoDigests | None, *, total: int, root: Path | None, err: TextIO) -> None:
        """After planning: a resumed checkpoint must match the plan; a new one is created and announced."""
        if self.checkpoint is not None:
            self.check_unchanged(plan, case_filter, digests)
            return
        created = self.create(plan.eval_dir.root, invocation, plan_fingerprints(plan, case_filter, digests),
                              total, root=root)
        # Said at once: a command the OOM killer ends can still be resumed from it.
        print(f"Checkpoint: {created.path}", file=err, flush=True)

    @property
    def resumed(self) -> bool:
        return self.checkpoint is not None and self.checkpoint.resumed

    # -- inputs

    def check_recorded_unchanged(self, digests: VideoDigests | None = None) -> None:
        """Before planning: the recorded inputs are as they were (an edited case may not even load)."""
        checkpoint = self._open_checkpoint()
        old = checkpoint.manifest.fingerprints
        root = Path(checkpoint.manifest.eval_dir)
        files = [root / name for name in old.get("files") or {}]
        videos = [root / name for name in old.get("videos") or {}]
        self._refuse(describe_changes(old, fingerprint(root, files, videos, digests)))

    def check_unchanged(self, plan: Plan, case_filter: str | None, digests: VideoDigests | None = None) -> None:
        """After planning: also catches case files that the same filters now select in addition."""
        checkpoint = self._open_checkpoint()
        self._refuse(describe_changes(checkpoint.manifest.fingerprints,
                                      plan_fingerprints(plan, case_filter, digests)))

    def _refuse(self, changes: list[str]) -> None:
        if changes:
            lines = "\n".join(f"  - {c}" for c in changes)
            raise CheckpointError(f"cannot resume {self._open_checkpoint().path}: its inputs changed since "
                                  f"it was written:\n{lines}\nResults from different inputs cannot be mixed; "
                                  f"restore the original files, or start a new {self.kind} without --resume.")

    def _open_checkpoint(self) -> Checkpoint:
        if self.checkpoint is None:
            raise RuntimeError("no checkpoint is open")
        return self.checkpoint

    # -- results

    def record(self, trial: int, result: SampleResult) -> None:
        self._open_checkpoint().append((trial, result.case, result.target, result.sample_index, result.arm),
                                       result.to_json(), completed=result.judged)

    def record_stream(self, key: StreamKey, record: Mapping[str, Any]) -> None:
        """A finished stream's record; one that stopped on an adapter error is fed again on resume."""
        self._open_checkpoint().append_stream(key, record, completed=_finished(record))

    def recorder(self, trial: int) -> Callable[[SampleResult], None]:
        def record(result: SampleResult) -> None:
            self.record(trial, result)

        return record

    @property
    def has_completed_work(self) -> bool:
        """At least one judged adapter observation is durable in the checkpoint."""
        return self._prior_completed or (self.checkpoint is not None and self.checkpoint.durable_completed > 0)

    @property
    def keeps(self) -> bool:
        """Whether an unfinished checkpoint is kept: it holds work, or the user resumed it."""
        return self.has_completed_work or self.resumed

    def finished_line(self) -> str:
        """How much of the work is safely in the checkpoint (what a resume will not redo)."""
        checkpoint = self._open_checkpoint()
        earlier = (sum(1 for r in self.previous.values() if r.judged)
                   + sum(1 for p in self.previous_streams.values() if _finished(p)))
        done = min(earlier + checkpoint.durable_completed, checkpoint.manifest.total)
        noun = "sample" if checkpoint.manifest.total == 1 else "samples"
        if self.has_streams:
            noun = "samples and streams"
        return f"{done} of {checkpoint.manifest.total} {noun} finished and saved in the checkpoint."

    def resume_lines(self, adapter_errors: int | None = None) -> list[str]:
        path = self._open_checkpoint().path
        lines = []
        if adapter_errors:
            noun = "adapter error" if adapter_errors == 1 else "adapter errors"
            lines.append(f"{adapter_errors} {noun} can be retried without rerunning completed samples.")
        # The command names the checkpoint: it was printed when created, and is not repeated here.
        lines.append(f"Resume with `{resume_command(self.kind, path)}`.")
        return lines

    # -- ending

    def finish(self, *, complete: bool) -> None:
        """Close; mark complete, or keep an unfinished checkpoint only if it is worth resuming."""
        checkpoint = self.checkpoint
        if checkpoint is None:
            return
        checkpoint.close()
        if complete:
            checkpoint.set_status(COMPLETE)
        elif not self.keeps:
            checkpoint.discard()

    def stopped(self, cause: EvalError) -> CommandStopped:
        """What an early stop reports; keeps the checkpoint only if it holds work."""
        checkpoint = self._open_checkpoint()
        checkpoint.close()  # whatever finished before the stop is now on disk
        if isinstance(cause, Interrupted):
            lines = [f"{self.title} {cause}.", self.finished_line()]
        else:
            lines = [f"{self.title} failed: {cause}", *self._failure_notes(cause)]
        if self.has_completed_work:
            lines.extend(self.resume_lines())
        elif not checkpoint.resumed:
            checkpoint.discard()
        return CommandStopped(lines, cause)

    def _failure_notes(self, cause: EvalError) -> list[str]:
        """After a fail-fast adapter error: its traceback (--verbose), and what --keep-going would have done."""
        if not isinstance(cause, SampleFailure):
            return []
        notes = []
        if cause.traceback and self.verbose:
            notes.append("\n".join("    " + line for line in cause.traceback.rstrip().splitlines()))
        elif cause.traceback:
            notes.append("(--verbose prints the adapter's traceback)")
        if cause.keep_going_helps:
            notes.append("Stopped at this first adapter error: with --keep-going it would have been recorded "
                         "and the other samples evaluated.")
        return notes

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Turn errors and interrupts after the checkpoint exists into :class:`CommandStopped`.

        Before a checkpoint exists, an error is an ordinary command error (rerunning loses nothing).
        """
        with sigterm_as_keyboard_interrupt():
            try:
                yield
            except KeyboardInterrupt:
                if self.checkpoint is None:
                    raise
                raise self.stopped(Interrupted("SIGINT or SIGTERM")) from None
            except CommandStopped:
                raise
            except EvalError as exc:
                if self.checkpoint is None:
                    raise
                raise self.stopped(exc) from None
            finally:
                if self.checkpoint is not None:
                    self.checkpoint.close()
