"""One ``run`` command end to end: plan, checkpoint, trials, interrupts and reports.

Every run writes a checkpoint (see :mod:`.checkpoints`). When the run stops
early (fail-fast error, adapter setup or close error, SIGINT/SIGTERM) and the
checkpoint holds at least one judged adapter observation, the exact resume
command is printed; otherwise a new checkpoint is deleted, because rerunning
the original command loses nothing. A checkpoint is marked complete only after
the report is written, so a run killed while reporting can still be resumed to
produce its report without calling the adapter again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TextIO

from ..checkpoints.fingerprints import VideoDigests
from ..checkpoints.store import COMPLETE, MANIFEST_NAME, Checkpoint
from ..errors import EvalError, ExitCode, UsageError, exit_code_for
from ..support.interrupts import (
    Interrupted,
    interruptible,
    reinstall_sigterm,
    sigterm_as_keyboard_interrupt,
)
from .reuse import (
    RUN_KIND,
    RunRequest,
    RunStore,
    absolute_adapter,
    check_recorded_unchanged,
    check_unchanged,
    plan_fingerprints,
    resume_lines,
)


def _absolute(path: str | None) -> str | None:
    return None if path is None else str(Path(path).expanduser().resolve())


class _Session:
    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.checkpoint: Checkpoint | None = None
        self.store: RunStore | None = None

    def run(self, request: RunRequest | None, resume: Path | None) -> int:
        from ..adapters.base import AdapterSpec
        from ..cases.evaldir import load_adapter_config
        from ..plan.planning import build_plan
        from ..reports.console import ConsoleListener, print_summary
        from ..reports.json_report import build_report, write_report
        from .failures import FailureSaver
        from .gates import GateOptions
        from .trials import RunOptions, run_trials

        # Videos are hashed on a thread while planning reads their frame tables.
        digests = VideoDigests()
        if resume is not None:
            self.checkpoint = Checkpoint.open(resume, RUN_KIND)
            self.store = RunStore(self.checkpoint)
            request = RunRequest.from_json(self.checkpoint.manifest.invocation, resume / MANIFEST_NAME)
            check_recorded_unchanged(self.checkpoint, digests)
        assert request is not None
        plan = build_plan(request.eval_dir, request.filters(), allow_empty=request.allow_empty,
                          on_video=digests.start)
        root = plan.eval_dir.root
        spec: AdapterSpec
        if request.adapter_command is not None:
            from ..adapters.process import CommandAdapterSpec

            # Adapter stderr is mirrored to ours as it arrives (our `err`, for in-process callers).
            spec = CommandAdapterSpec(request.adapter_command, stderr=self.err)
        else:
            from ..adapters.python import PythonAdapterSpec, default_target

            request.adapter = absolute_adapter(request.adapter or default_target(root))
            spec = PythonAdapterSpec(request.adapter)
        if request.adapter_config is None:
            request.adapter_config = load_adapter_config(root, request.adapter_config_path)
        if self.checkpoint is None:
            request.eval_dir = str(root)
            request.output_json = _absolute(request.output_json)
            request.artifacts_dir = _absolute(request.artifacts_dir)
            self.checkpoint = Checkpoint.create(root, RUN_KIND, request.to_json(),
                                                plan_fingerprints(plan, request.case, digests),
                                                total=plan.sample_count * request.repeat)
            self.store = RunStore(self.checkpoint)
        else:
            check_unchanged(self.checkpoint, plan, request.case, digests)
        assert self.store is not None
        artifacts = Path(request.artifacts_dir) if request.artifacts_dir else None
        options = RunOptions(
            concurrency=request.concurrency, repeat=request.repeat, keep_going=request.keep_going,
            verbose=request.verbose,
            gates=GateOptions(request.min_pass_rate, request.min_target_pass_rate, request.max_failures),
            max_flaky_samples=request.max_flaky_samples, adapter_config=request.adapter_config,
            artifacts_dir=artifacts, save_failures=request.save_failures)
        saver = FailureSaver(artifacts or root / "runs") if request.save_failures else None
        listener = ConsoleListener(self.out, verbose=request.verbose)
        try:
            outcome = asyncio.run(interruptible(run_trials(
                plan, spec, options, listener, save_failures=saver.save_case if saver else None,
                store=self.store)))
        finally:
            reinstall_sigterm()
        checkpoint = self.checkpoint
        checkpoint.close()
        errors = outcome.resumable_adapter_errors
        has_work = self.store.has_completed_work
        report_checkpoint: dict[str, Any] | None = {
            "path": str(checkpoint.path), "resumable_adapter_errors": errors, "resumed": checkpoint.resumed}
        if errors and not has_work and not checkpoint.resumed:
            checkpoint.discard()  # error-only: rerunning the command loses nothing
            report_checkpoint = None
        hint = "\n".join(resume_lines(checkpoint.path, errors)) if errors and has_work else None
        print_summary(outcome, self.out, resume_hint=hint)
        if request.output_json:
            write_report(Path(request.output_json), build_report(outcome, checkpoint=report_checkpoint))
        if report_checkpoint is not None and not errors:
            checkpoint.set_status(COMPLETE)
        return ExitCode.OK if outcome.success else ExitCode.FAILED

    def stopped(self, exc: EvalError) -> int:
        """Report a run that did not finish, and keep its checkpoint only if it holds work."""
        checkpoint = self.checkpoint
        assert checkpoint is not None
        checkpoint.close()  # whatever finished before the stop is now on disk
        if isinstance(exc, Interrupted):
            print(f"Eval {exc}.", file=self.err)
        else:
            print(f"Eval failed: {exc}", file=self.err)
        store = self.store or RunStore(checkpoint)
        if store.has_completed_work:
            for line in resume_lines(checkpoint.path):
                print(line, file=self.err)
        elif not checkpoint.resumed:
            checkpoint.discard()
        return int(exit_code_for(exc))

    def close(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint.close()


def execute_run(request: RunRequest | None, out: TextIO, err: TextIO, *, resume: Path | None = None) -> int:
    """Run (``request``) or resume (``resume``, a checkpoint directory); returns the exit code."""
    if (request is None) == (resume is None):
        raise UsageError("give either a run request or a checkpoint to resume")
    session = _Session(out, err)
    with sigterm_as_keyboard_interrupt():
        try:
            return session.run(request, resume)
        except KeyboardInterrupt:
            if session.checkpoint is None:
                raise
            return session.stopped(Interrupted("SIGINT or SIGTERM"))
        except EvalError as exc:
            if session.checkpoint is None:
                raise  # a setup error before any work: reported like every other command error
            return session.stopped(exc)
        finally:
            session.close()
