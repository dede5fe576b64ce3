"""The ``run`` command end to end: plan, checkpoint, trials, reports.

The checkpoint's lifecycle (resume, unchanged inputs, early stops, interrupts) is the one
:class:`~glasskit_eval.checkpoints.lifecycle.CheckpointedCommand` that ``seed`` drives too. A
checkpoint is marked complete only after the report is written, so a run killed while
reporting can still be resumed to produce its report without calling the adapter again.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from ..checkpoints.fingerprints import VideoDigests
from ..checkpoints.lifecycle import CheckpointedCommand, plan_fingerprints
from ..checkpoints.store import MANIFEST_NAME
from ..support.interrupts import interruptible, reinstall_sigterm
from .request import KIND, RunRequest


def _absolute(path: str | None) -> str | None:
    return None if path is None else str(Path(path).expanduser().resolve())


def execute_run(request: RunRequest | None, out: TextIO, err: TextIO, *, resume: Path | None = None) -> bool:
    """Run ``request``, or resume the checkpoint directory ``resume``; True when every gate passed.

    Errors are raised: before the checkpoint exists as they are, after it as
    :class:`~glasskit_eval.errors.CommandStopped` carrying the resume command.
    """
    from ..adapters.choose import adapter_spec, python_target, uses_python
    from ..cases.evaldir import load_adapter_config
    from ..plan.planning import build_plan
    from ..reports.console import ConsoleListener, print_summary
    from ..reports.json_report import build_report, write_report
    from ..store.videos import video_resolver
    from ..summary import RunSummary
    from .failures import FailureSaver
    from .reuse import RunStore
    from .trials import run_trials

    life = CheckpointedCommand(KIND, "Eval")
    with life.guard():
        # Videos are hashed on a thread while planning reads their frame tables.
        digests = VideoDigests()
        if resume is not None:
            request = RunRequest.from_json(life.open(resume), resume / MANIFEST_NAME)
            life.check_recorded_unchanged(digests)
        assert request is not None
        plan = build_plan(request.eval_dir, request.filters(), allow_empty=request.allow_empty,
                          resolve_video=video_resolver(lambda message: print(message, file=err)),
                          on_video=digests.start)
        root = plan.eval_dir.root
        if request.adapter_config is None:
            request = replace(request, adapter_config=load_adapter_config(root, request.adapter_config_path))
        if uses_python(request.adapter, request.adapter_command, request.adapter_http, request.adapter_exec,
                       request.adapter_config):
            request = replace(request, adapter=python_target(request.adapter, root))
        if request.timeout_s is None and plan.eval_dir.config.run_timeout_s is not None:
            # Recorded resolved, so a resume keeps the timeout even if config.yaml changes.
            request = replace(request, timeout_s=plan.eval_dir.config.run_timeout_s)
        spec = adapter_spec(request.adapter, request.adapter_command, root, err,
                            adapter_http=request.adapter_http, adapter_exec=request.adapter_exec,
                            adapter_config=request.adapter_config)
        if life.checkpoint is None:
            request = replace(request, eval_dir=str(root), output_json=_absolute(request.output_json),
                              artifacts_dir=_absolute(request.artifacts_dir))
            life.create(root, request.to_json(), plan_fingerprints(plan, request.case, digests),
                        total=plan.sample_count * request.repeat)
        else:
            life.check_unchanged(plan, request.case, digests)
        artifacts = Path(request.artifacts_dir) if request.artifacts_dir else None
        saver = FailureSaver(artifacts or root / "runs") if request.save_failures else None
        listener = ConsoleListener(out, verbose=request.verbose)
        try:
            result = asyncio.run(interruptible(run_trials(
                plan, spec, request, listener, save_failures=saver.save_case if saver else None,
                store=RunStore(life))))
        finally:
            reinstall_sigterm()
        checkpoint = life.checkpoint
        assert checkpoint is not None
        checkpoint.close()
        summary = RunSummary.of(result)
        errors = summary.resumable_adapter_errors
        report_checkpoint: dict[str, Any] | None = {
            "path": str(checkpoint.path), "resumable_adapter_errors": errors, "resumed": checkpoint.resumed}
        if errors and not life.keeps:
            report_checkpoint = None  # error-only: rerunning the command loses nothing
        hint = "\n".join(life.resume_lines(errors)) if errors and life.has_completed_work else None
        print_summary(summary, out, resume_hint=hint)
        if request.output_json:
            write_report(Path(request.output_json), build_report(summary, checkpoint=report_checkpoint))
        life.finish(complete=not errors)
        return summary.success
