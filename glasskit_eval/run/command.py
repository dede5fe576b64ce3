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
from typing import TYPE_CHECKING, Any, TextIO

from ..checkpoints.fingerprints import VideoDigests
from ..checkpoints.lifecycle import CheckpointedCommand, plan_fingerprints
from ..checkpoints.prune import prune_completed
from ..checkpoints.store import MANIFEST_NAME
from ..errors import OutputError
from ..support.destinations import Destination, check_writable
from ..support.interrupts import interruptible, reinstall_sigterm
from .request import KIND, RunRequest

if TYPE_CHECKING:
    from ..adapters.base import AdapterSpec
    from ..plan.planning import Plan
    from ..reports.baseline import BaselineDiff
    from ..reports.thumbnails import ThumbnailStore
    from ..summary import RunResult, RunSummary
    from .cache import CachingSpec


def _absolute(path: str | None) -> str | None:
    # Absolute without resolving links: `/dev/stdout` must stay itself, not /proc/.../fd/pipe:[...].
    return None if path is None else str(Path(path).expanduser().absolute())


def destinations(request: RunRequest, root: Path) -> list[Destination]:
    """Where the run will write, checked before the adapter exists."""
    found = []
    if request.output_json:
        found.append(Destination(Path(request.output_json), "--output-json"))
    if request.html:
        found.append(Destination(Path(request.html), "--html"))
    if request.artifacts_dir:
        found.append(Destination(Path(request.artifacts_dir), "--artifacts-dir", directory=True))
    elif request.save_failures:
        found.append(Destination(root / "runs", "--save-failures (to <eval-dir>/runs/)", directory=True))
    return found


def execute_run(request: RunRequest | None, out: TextIO, err: TextIO, *, resume: Path | None = None,
                output_json: str | None = None) -> bool:
    """Run ``request``, or resume the checkpoint directory ``resume``; True when every gate passed.

    ``output_json`` (with ``resume``) writes the resumed run's report there instead of where
    the original run said.

    Errors are raised: before the checkpoint exists as they are, after it as
    :class:`~glasskit_eval.errors.CommandStopped` carrying the resume command.
    """
    from ..adapters.choose import adapter_spec, python_target, uses_python
    from ..cases.evaldir import load_adapter_config
    from ..plan.planning import build_plan
    from ..plan.shard import parse_shard, shard_plan
    from ..reports.console import ConsoleListener, print_summary
    from ..reports.json_report import build_report, write_report
    from ..store.videos import video_resolver
    from ..summary import RunSummary
    from . import ci
    from .failures import FailureSaver
    from .judge import judge
    from .reuse import RunStore
    from .trials import run_trials

    life = CheckpointedCommand(KIND, "Eval")
    with life.guard():
        # Videos are hashed on a thread while planning reads their frame tables.
        digests = VideoDigests()
        if resume is not None:
            request = RunRequest.from_json(life.open(resume), resume / MANIFEST_NAME)
            life.check_recorded_unchanged(digests)
            if output_json is not None:
                request = replace(request, output_json=_absolute(output_json))
        assert request is not None
        plan = build_plan(request.eval_dir, request.filters(), allow_empty=request.allow_empty,
                          resolve_video=video_resolver(lambda message: print(message, file=err)),
                          on_video=digests.start)
        # A shard plans the whole selection, then runs its part of it (the split needs the whole).
        full = plan
        if request.shard is not None:
            plan = shard_plan(full, parse_shard(request.shard))
        _check_pins(plan, request.strict_pins, err)
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
        check_writable(destinations(request, root))
        caching = _caching(spec, request, err)
        if life.checkpoint is None:
            request = replace(request, eval_dir=str(root), output_json=_absolute(request.output_json),
                              artifacts_dir=_absolute(request.artifacts_dir), html=_absolute(request.html),
                              checkpoint_dir=_absolute(request.checkpoint_dir),
                              junit_xml=_absolute(request.junit_xml), baseline=_absolute(request.baseline))
            created = life.create(root, request.to_json(), plan_fingerprints(full, request.case, digests),
                                  total=plan.sample_count * request.repeat, root=request.checkpoint_root())
            # Said at once: a run the OOM killer ends can still be resumed from it.
            print(f"Checkpoint: {created.path}", file=err, flush=True)
        else:
            life.check_unchanged(full, request.case, digests)
        artifacts = Path(request.artifacts_dir) if request.artifacts_dir else None
        saver = FailureSaver(artifacts or root / "runs") if request.save_failures else None
        if saver is not None and not life.resumed:
            try:
                saver.rotate()
            except OSError as exc:
                raise OutputError(f"cannot move the previous run's failure artifacts aside in "
                                  f"{saver.base}: {exc.strerror or exc}") from None
        listener: Any = ConsoleListener(out, verbose=request.verbose, err=err,
                                        case_names=[c.case.name for c in plan.cases])
        if caching is not None and request.repeat > 1:
            listener = _TrialTracking(listener, caching)
        thumbnails = _thumbnail_store(request)
        try:
            result = asyncio.run(interruptible(run_trials(
                plan, caching or spec, request, listener, save_failures=saver.save_case if saver else None,
                store=RunStore(life), keep_frame=thumbnails.keep if thumbnails is not None else None,
                **({"judge": caching.judge(judge)} if caching else {}))))
        finally:
            listener.close()
            reinstall_sigterm()
        checkpoint = life.checkpoint
        assert checkpoint is not None
        checkpoint.close()
        result, baseline = ci.finish_result(result, request)
        summary = RunSummary.of(result)
        errors = summary.resumable_adapter_errors
        report_checkpoint: dict[str, Any] | None = {
            "path": str(checkpoint.path), "resumable_adapter_errors": errors, "resumed": checkpoint.resumed}
        if errors and not life.keeps:
            report_checkpoint = None  # error-only: rerunning the command loses nothing
        hint = "\n".join(life.resume_lines(errors)) if errors and life.has_completed_work else None
        print_summary(summary, out, resume_hint=hint, report_path=request.output_json)
        ci.print_notes(request, baseline, out)
        cache_report = _cache_report(caching, request, result, out)
        if request.output_json:
            report = build_report(summary, checkpoint=report_checkpoint)
            report.update(ci.report_extras(request, full, checkpoint.manifest.fingerprints, baseline))
            if cache_report is not None:
                report["observation_cache"] = cache_report
            write_report(Path(request.output_json), report)
        ci.write_outputs(summary, request, full, baseline, out)
        if request.html and thumbnails is not None:
            _write_html(Path(request.html), summary, plan, thumbnails, baseline)
        life.finish(complete=not errors)
        prune_completed(root, KIND, request.keep_checkpoints, current=checkpoint.path)
        return summary.success


def _thumbnail_store(request: RunRequest) -> ThumbnailStore | None:
    if not request.html:
        return None
    from ..reports.thumbnails import ThumbnailStore

    return ThumbnailStore(request.html_budget_mb * 1000 * 1000)


def _write_html(path: Path, summary: RunSummary, plan: Plan, thumbnails: ThumbnailStore,
                baseline: BaselineDiff | None) -> None:
    from ..reports.html import HtmlOptions
    from ..reports.publish import clip_durations, write_html

    # Results reused from a checkpoint were not decoded this time: their --save-failures JPEGs stand in.
    thumbnails.add_from_artifacts(r for t in summary.run.trials for r in t.results)
    write_html(path, summary, HtmlOptions(thumbnails=thumbnails, budget_bytes=thumbnails.budget_bytes,
                                          over_budget=thumbnails.over_budget, durations=clip_durations(plan),
                                          baseline=baseline.to_json() if baseline is not None else None))


def _check_pins(plan: Plan, strict: bool, err: TextIO) -> None:
    """Frame locks, when cases have them: warnings, or (--strict-pins) a validation error."""
    from ..plan.lockfiles import any_locked

    if not any_locked(c.case for c in plan.cases):
        return
    from ..plan.pinning import check_plan, raise_strict

    check = check_plan(plan)
    if strict:
        raise_strict(check)
    for line in check.warning_lines():
        print(line, file=err)


def _caching(spec: AdapterSpec, request: RunRequest, err: TextIO) -> CachingSpec | None:
    if request.cache_dir is None:
        return None
    from .cache import CachingSpec
    from .obscache import ObservationStore

    return CachingSpec(spec, ObservationStore(Path(request.cache_dir)), request.cache_mode, err)


def _cache_report(caching: CachingSpec | None, request: RunRequest, result: RunResult,
                  out: TextIO) -> dict[str, Any] | None:
    """Print the cache's share of the run and prune it to its bound; the report's block."""
    if caching is None:
        return None
    stats = caching.stats
    hits = sum(1 for t in result.trials for r in t.results if r.cached)
    evaluated = sum(1 for t in result.trials for r in t.results if r.evaluated)
    pruned = 0
    if stats.writes:
        pruned = caching.store.prune(request.cache_max_mb * 1024 * 1024).files
    if stats.disabled is not None:
        print(f"Observation cache: off ({stats.disabled})", file=out)
    else:
        print(f"Observation cache: {hits} of {evaluated} evaluated samples reused, {stats.misses} adapter "
              f"calls, {stats.writes} stored ({request.cache_mode}, {request.cache_dir})"
              + (f"; pruned {pruned} old entries" if pruned else ""), file=out)
    return {"dir": request.cache_dir, "mode": request.cache_mode, "hits": hits, "misses": stats.misses,
            "writes": stats.writes, "pruned": pruned, "disabled": stats.disabled}


class _TrialTracking:
    """A run listener that tells the cache which trial starts (its evaluator is created next)."""

    def __init__(self, inner: Any, caching: CachingSpec) -> None:
        self._inner = inner
        self._caching = caching

    def trial_started(self, trial: int, total: int) -> None:
        self._caching.trial_started(trial)
        self._inner.trial_started(trial, total)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
