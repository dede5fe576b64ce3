"""The ``run`` command end to end: prepare, checkpoint, evaluate, publish.

The checkpoint's lifecycle (resume, unchanged inputs, early stops, interrupts) is the one
:class:`~glasskit_eval.checkpoints.lifecycle.CheckpointedCommand` that ``seed`` drives too. A
checkpoint is marked complete only after the report is written, so a run killed while
reporting can still be resumed to produce its report without calling the adapter again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ..adapters.base import AdapterSpec
from ..adapters.choose import adapter_spec, python_target, uses_python
from ..arms.compare import ArmsReport, compare_arms
from ..arms.jitter import JitterReport
from ..arms.plan import ArmPlan
from ..cases.evaldir import load_adapter_config
from ..checkpoints.fingerprints import VideoDigests
from ..checkpoints.lifecycle import CheckpointedCommand
from ..checkpoints.prune import prune_completed
from ..errors import OutputError, UsageError
from ..evaluation.failures import FailureSaver
from ..evaluation.jitter import run_jitter
from ..evaluation.observation_cache import ObservationCache
from ..evaluation.observation_store import ObservationStore
from ..evaluation.reuse import RunStore
from ..evaluation.trials import run_trials
from ..labels.consensus import LabelCheck
from ..plan.pinfiles import any_pinned
from ..plan.pinning import check_plan, raise_strict
from ..plan.planning import Plan, build_plan, clip_durations
from ..plan.shard import parse_shard, shard_plan
from ..plan.videos import video_resolver
from ..reports.adapter_output import AdapterOutput, command_adapter_name, python_adapter_name
from ..reports.arms_table import print_arms
from ..reports.baseline import BaselineDiff
from ..reports.console import ConsoleListener, print_end, print_summary
from ..reports.html import HtmlOptions
from ..reports.jitter import print_jitter
from ..reports.json_report import build_report, write_report
from ..reports.labels import print_labels, review_suspects_command
from ..reports.publish import shown_eval_dir, write_html
from ..reports.thumbnails import ThumbnailStore, arm_variants
from ..summary import RunResult, RunSummary
from ..support.destinations import Destination, check_writable
from ..support.interrupts import interruptible, reinstall_sigterm
from . import ci_outputs as ci
from .arm_baselines import ArmBaselines, arm_baselines
from .arming import prepare_arms, select
from .labelling import run_label_check
from .preflight import preflight
from .requests import RUN_KIND, RunRequest, absolute


@dataclass(frozen=True)
class _Prepared:
    """A run ready to evaluate: its request as recorded, what it runs, and the whole selection."""
    request: RunRequest
    plan: Plan
    #: The whole selection (a shard runs part of it, but reports where every sample is).
    full: Plan
    spec: AdapterSpec
    #: Where the adapter's own output goes: named lines, above the live progress line.
    output: AdapterOutput
    #: A Python adapter shares our stdout and stderr: they are captured while it runs.
    in_process: bool
    #: The eval directory as the command line gave it (the request records it absolute).
    shown_eval_dir: str
    #: ``--arm``/``--perturb``: the arms, resolved and checked; None for a plain run.
    arms: ArmPlan | None = None


def destinations(request: RunRequest, root: Path) -> list[Destination]:
    """Where the run will write, checked before the adapter exists."""
    found = []
    if request.outputs.output_json:
        found.append(Destination(Path(request.outputs.output_json), "--output-json"))
    if request.outputs.html:
        found.append(Destination(Path(request.outputs.html), "--html"))
    # Without --save-failures nothing is saved, so --artifacts-dir alone creates nothing (as upstream):
    # the adapter is only told the path.
    if request.outputs.save_failures and request.outputs.artifacts_dir:
        found.append(Destination(Path(request.outputs.artifacts_dir), "--artifacts-dir", directory=True))
    elif request.outputs.save_failures:
        found.append(Destination(root / "runs", "--save-failures (to <eval-dir>/runs/)", directory=True))
    return found


def execute_run(request: RunRequest | Path, out: TextIO, err: TextIO, *, output_json: str | None = None,
                baseline: str | None = None) -> bool:
    """Run ``request``, or resume the checkpoint directory it names; True when every gate passed.

    ``output_json`` (with a resume) writes the resumed run's report there instead of where
    the original run said, and ``baseline`` compares it with that report instead of the recorded one.

    Errors are raised: before the checkpoint exists as they are, after it as
    :class:`~glasskit_eval.errors.CommandStopped` carrying the resume command.
    """
    life = CheckpointedCommand(RUN_KIND, "Eval")
    with life.guard():
        prepared = _prepare(life, request, output_json, out, err, baseline)
        cache = _observation_cache(prepared, err)
        thumbnails = _thumbnail_store(prepared)
        result, jitter = _evaluate(life, prepared, cache, thumbnails, out, err)
        return _publish(life, prepared, result, cache, thumbnails, out, jitter)


def _prepare(life: CheckpointedCommand, given: RunRequest | Path, output_json: str | None, out: TextIO,
             err: TextIO, baseline: str | None = None) -> _Prepared:
    """Plan the run, resolve what the request leaves open, and open or create its checkpoint."""
    # Videos are hashed on a thread while planning reads their frame tables.
    digests = VideoDigests()
    if isinstance(given, Path):
        request = life.resume(given, RunRequest.from_json, digests)
        shown = shown_eval_dir(request.eval_dir)
        if output_json is not None:
            request = request.replaced(output_json=absolute(output_json))
        if baseline is not None:
            request = request.replaced(baseline=absolute(baseline))
    else:
        request = given
        shown = request.eval_dir
    life.verbose = request.verbose
    plan = build_plan(request.eval_dir, request.filters(), allow_empty=request.selection.allow_empty,
                      resolve_video=video_resolver(lambda message: print(message, file=err)),
                      on_video=digests.start)
    # A shard plans the whole selection, then runs its part of it (the split needs the whole).
    full = plan
    if request.ci.shard is not None:
        plan = shard_plan(full, parse_shard(request.ci.shard))
    _check_pins(plan, request.strict_pins, err)
    root = plan.eval_dir.root
    if request.adapter_config is None:
        request = request.replaced(adapter_config=load_adapter_config(root, request.adapter_config_path))
    if uses_python(request.adapter, request.adapter_command, request.adapter_http, request.adapter_exec,
                   request.adapter_config):
        request = request.replaced(adapter=python_target(request.adapter, root))
    if request.calls.timeout_s is None and plan.eval_dir.config.run_timeout_s is not None:
        # Recorded resolved, so a resume keeps the timeout even if config.yaml changes.
        request = request.replaced(timeout_s=plan.eval_dir.config.run_timeout_s)
    output, in_process = _adapter_output(request, out, err)
    spec = adapter_spec(request.adapter, request.adapter_command, root, output.stderr,
                        adapter_http=request.adapter_http, adapter_exec=request.adapter_exec,
                        adapter_config=request.adapter_config)
    arms = _arms(request, plan, output.stderr)
    if request.early.early_stop:
        _check_early_stop(request, plan)
    if request.arms.jitter_frames and request.ci.shard is not None:
        raise UsageError("--jitter-frames is not supported together with --shard yet; run the jitter unsharded")
    check_writable(destinations(request, root))
    preflight(request)
    if life.checkpoint is None:
        # Stored with absolute paths, so `run --resume` works from any directory.
        request = request.replaced(eval_dir=str(root), output_json=absolute(request.outputs.output_json),
                          artifacts_dir=absolute(request.outputs.artifacts_dir), html=absolute(request.outputs.html),
                          checkpoint_dir=absolute(request.checkpoint_dir), junit_xml=absolute(request.ci.junit_xml),
                          baseline=absolute(request.ci.baseline))
    # Every arm evaluates every sample and feeds every stream: its records are its own.
    per_arm = len(arms.arms) if arms is not None else 1
    streams = sum(len(c.streams) for c in plan.cases)
    life.has_streams = streams > 0
    life.start(request.to_json(), full, request.case, digests,
               total=(plan.sample_count + streams) * per_arm * request.trials.repeat,
               root=request.checkpoint_root(), err=err)
    return _Prepared(request, plan, full, spec, output, in_process, shown, arms)


def _check_early_stop(request: RunRequest, plan: Plan) -> None:
    """What ``--early-stop`` cannot do, refused before any call."""
    from ..evaluation.earlystop import goals, missing_gate_message

    if request.ci.shard is not None:
        raise UsageError("--early-stop cannot be combined with --shard: a shard cannot see the other shards' "
                         "evidence; run the selection unsharded")
    if request.arms.jitter_frames:
        raise UsageError("--early-stop is not supported together with --jitter-frames")
    if not any(g.minimum is not None for g in goals(plan, request.trial_options(request.filters()).gates)):
        raise UsageError(missing_gate_message())


def _arms(request: RunRequest, plan: Plan, stderr: TextIO) -> ArmPlan | None:
    """The selected arms, every one checked before the first adapter call (exit 2 on a bad one)."""
    if not request.arms.used:
        return None

    selection = select(request, plan.eval_dir.config)
    assert selection is not None
    return prepare_arms(selection, request, plan.eval_dir.root, stderr)


def _adapter_output(request: RunRequest, out: TextIO, err: TextIO) -> tuple[AdapterOutput, bool]:
    if request.adapter_command is not None:
        return AdapterOutput(command_adapter_name(request.adapter_command), out, err), False
    python = uses_python(request.adapter, request.adapter_command, request.adapter_http, request.adapter_exec,
                         request.adapter_config) and request.adapter is not None
    name = python_adapter_name(request.adapter) if python and request.adapter else "adapter"
    return AdapterOutput(name, out, err), python


def _evaluate(life: CheckpointedCommand, prepared: _Prepared, cache: ObservationCache | None,
              thumbnails: ThumbnailStore | None, out: TextIO, err: TextIO) -> tuple[RunResult, JitterReport | None]:

    request, plan = prepared.request, prepared.plan
    listener = ConsoleListener(out, verbose=request.verbose, err=err, case_names=[c.case.name for c in plan.cases])
    output = prepared.output
    output.attach(listener.progress)
    capture = output.capturing() if prepared.in_process else contextlib.nullcontext()
    options = request.trial_options(request.filters())

    async def evaluate() -> tuple[RunResult, JitterReport | None]:
        keep = thumbnails.keep if thumbnails is not None else None
        saver = _failure_saver(request, plan.eval_dir.root, life.resumed)
        arms = prepared.arms if prepared.arms is not None else ArmPlan.single(prepared.spec, options.adapter_config)
        result = await run_trials(plan, prepared.spec, options, listener, arms=arms, store=RunStore(life),
                                  keep_frame=keep, saver=saver, cache=cache, gating=request.ci.shard is None,
                                  stream_keeper=thumbnails.streams if thumbnails is not None else None)
        if not request.arms.jitter_frames or not result.trials:
            return result, None
        # The extra calls make no results: pass rates and gates are already what they are.
        return result, await run_jitter(plan, result.trials[0].results, request.arms.jitter_frames, arms, options)

    try:
        with capture:
            return asyncio.run(interruptible(evaluate()))
    finally:
        output.finish()
        listener.close()
        reinstall_sigterm()


def _publish(life: CheckpointedCommand, prepared: _Prepared, result: RunResult, cache: ObservationCache | None,
             thumbnails: ThumbnailStore | None, out: TextIO, jitter: JitterReport | None = None) -> bool:
    """The summary, every report the request asks for, then the checkpoint's end."""
    request = prepared.request
    checkpoint = life.checkpoint
    assert checkpoint is not None
    checkpoint.close()
    result, baseline, arm_diffs = _compare_baseline(prepared, result)
    summary = RunSummary.of(result, confidence=request.comparison.confidence, alpha=request.comparison.alpha,
                            control=prepared.arms.control if prepared.arms is not None else None)
    errors = summary.resumable_adapter_errors
    report_checkpoint: dict[str, Any] | None = {
        "path": str(checkpoint.path), "resumable_adapter_errors": errors, "resumed": checkpoint.resumed}
    if errors and not life.keeps:
        report_checkpoint = None  # error-only: rerunning the command loses nothing
    hint = "\n".join(life.resume_lines(errors)) if errors and life.has_completed_work else None
    print_summary(summary, out, resume_hint=hint, report_path=request.outputs.output_json,
                  gated_elsewhere=request.ci.shard is not None,
                  fold=ci.annotations_on(request.ci.annotations, os.environ))
    if request.early.early_stop:
        from ..reports.early_stop import print_early_stop

        print_early_stop(summary, out)
    arms = _arms_report(prepared, result, request, out)
    labels = run_label_check(prepared.plan, prepared.arms, result)
    review = review_suspects_command(prepared.shown_eval_dir, request.outputs.output_json)
    print_labels(labels, out, review)
    if jitter is not None:

        print_jitter(jitter, out)
    ci.print_notes(request, baseline if arm_diffs is None else None, out)
    if arm_diffs is not None:
        arm_diffs.print(out)
        if arms is not None:
            arms = replace(arms, baselines=arm_diffs.to_json())
    cache_block = _cache_report(cache, request, result, out)
    written = []
    if request.outputs.output_json:
        shard = (ci.shard_block(request, prepared.full, checkpoint.manifest.fingerprints, prepared.arms)
                 if request.ci.shard is not None else None)
        write_report(Path(request.outputs.output_json), build_report(
            summary, checkpoint=report_checkpoint, baseline=baseline.to_json() if baseline is not None else None,
            shard=shard, observation_cache=cache_block, arms=arms,
            jitter=jitter.to_json() if jitter is not None else None, labels=labels))
        written.append(ci.display_path(request.outputs.output_json))
    written += ci.write_outputs(summary, request, prepared.full, baseline, out)
    if request.outputs.html and thumbnails is not None:
        _write_html(Path(request.outputs.html), summary, prepared, thumbnails, baseline, arms, (labels, review))
        written.append(ci.display_path(request.outputs.html))
    life.finish(complete=not errors)
    prune_completed(prepared.plan.eval_dir.root, RUN_KIND, request.outputs.keep_checkpoints, current=checkpoint.path)
    print_end(summary, written, out)
    return summary.success


def _compare_baseline(prepared: _Prepared, result: RunResult
                      ) -> tuple[RunResult, BaselineDiff | None, ArmBaselines | None]:
    """The run against ``--baseline`` (arm by arm in a run with arms), its gates added to the result."""
    request = prepared.request
    plan = prepared.arms
    if plan is None or request.ci.baseline is None or request.ci.shard is not None:
        baseline = ci.compare_baseline(request, result)
        if baseline is not None:
            result = replace(result, gates=(*result.gates, *ci.baseline_gates(baseline, request.comparison)))
        return result, baseline, None

    found = arm_baselines(Path(request.ci.baseline), ci.display_path(request.ci.baseline),
                          [r for t in result.trials for r in t.results], plan.names, plan.control,
                          request.comparison, [s for t in result.trials for s in t.streams])
    gates = found.gates(request.comparison, [n for n in plan.names if plan.gated(n)])
    return replace(result, gates=(*result.gates, *gates)), found.main, found


def _arms_report(prepared: _Prepared, result: RunResult, request: RunRequest, out: TextIO) -> ArmsReport | None:
    """The arms compared (computed once for every reporter), and their table on the console."""
    if prepared.arms is None:
        return None

    plan = prepared.arms
    report = compare_arms([t.results for t in result.trials], plan.names, plan.control,
                          {a.name: a.description or {} for a in plan.arms}, alpha=request.comparison.alpha,
                          confidence=request.comparison.confidence, streams=[s for t in result.trials for s in t.streams])
    print_arms(report, out)
    return report


def _failure_saver(request: RunRequest, root: Path, resumed: bool) -> FailureSaver | None:
    if not request.outputs.save_failures:
        return None

    saver = FailureSaver(Path(request.outputs.artifacts_dir) if request.outputs.artifacts_dir else root / "runs")
    if not resumed:
        # A resume keeps the artifacts its reused results point at.
        try:
            saver.rotate()
        except OSError as exc:
            raise OutputError(f"cannot move the previous run's failure artifacts aside in "
                              f"{saver.base}: {exc.strerror or exc}") from None
    return saver


def _thumbnail_store(prepared: _Prepared) -> ThumbnailStore | None:
    request = prepared.request
    if not request.outputs.html:
        return None

    arms = prepared.arms
    if arms is None:
        return ThumbnailStore(request.outputs.html_budget_mb * 1000 * 1000)
    # Each arm's frames as it saw them (a perturbation arm's perturbed pixels).
    variants = arm_variants({a.name: a.description or {} for a in arms.arms})
    return ThumbnailStore(request.outputs.html_budget_mb * 1000 * 1000, variants=variants, arms=arms.names)


def _write_html(path: Path, summary: RunSummary, prepared: _Prepared, thumbnails: ThumbnailStore,
                baseline: BaselineDiff | None, arms: ArmsReport | None = None,
                labels: tuple[LabelCheck | None, str | None] = (None, None)) -> None:

    # Results reused from a checkpoint were not decoded this time: their --save-failures JPEGs stand in.
    thumbnails.add_from_artifacts(r for t in summary.run.trials for r in t.results)
    write_html(path, summary, HtmlOptions(thumbnails=thumbnails, frames=thumbnails.frames,
                                          budget_bytes=thumbnails.budget_bytes, over_budget=thumbnails.over_budget,
                                          durations=clip_durations(prepared.plan),
                                          stream_misses=thumbnails.streams.misses,
                                          stream_alarms=thumbnails.streams.alarms,
                                          baseline=baseline.to_json() if baseline is not None else None,
                                          eval_dir=prepared.shown_eval_dir, arms=arms, labels=labels[0],
                                          labels_review=labels[1]))


def _check_pins(plan: Plan, strict: bool, err: TextIO) -> None:
    """Frame pins, when cases have them: warnings, or (--strict-pins) a validation error."""
    if not any_pinned(c.case for c in plan.cases):
        return

    check = check_plan(plan)
    if strict:
        raise_strict(check)
    for line in check.warning_lines():
        print(line, file=err)


def _observation_cache(prepared: _Prepared, err: TextIO) -> ObservationCache | None:
    request = prepared.request
    if request.cache.cache_dir is None:
        return None

    return ObservationCache(prepared.spec, ObservationStore(Path(request.cache.cache_dir)), request.cache.cache_mode, err)


def _cache_report(cache: ObservationCache | None, request: RunRequest, result: RunResult,
                  out: TextIO) -> dict[str, Any] | None:
    """Print the cache's share of the run and prune it to its bound; the report's block."""
    if cache is None:
        return None
    cache.shared.settle()
    stats = cache.stats
    hits = sum(1 for t in result.trials for r in t.results if r.cached)
    evaluated = sum(1 for t in result.trials for r in t.results if r.evaluated)
    pruned = 0
    if stats.writes or stats.stream_writes:
        pruned = cache.store.prune(request.cache.cache_max_mb * 1024 * 1024).files
    # A whole stream counts as one hit, miss or write, beside the samples' (and on its own in `streams`).
    streams = {"hits": stats.stream_hits, "misses": stats.stream_misses, "writes": stats.stream_writes}
    if stats.disabled is not None:
        print(f"Observation cache: off ({stats.disabled})", file=out)
    else:
        looked = stats.stream_hits + stats.stream_misses
        print(f"Observation cache: {hits} of {evaluated} evaluated samples reused, {stats.misses} adapter "
              f"calls, {stats.writes} stored"
              + (f"; {stats.stream_hits} of {looked} streams reused, {stats.stream_writes} stored" if looked else "")
              + f" ({request.cache.cache_mode}, {request.cache.cache_dir})"
              + (f"; pruned {pruned} old entries" if pruned else ""), file=out)
    return {"dir": request.cache.cache_dir, "mode": request.cache.cache_mode, "hits": hits + stats.stream_hits,
            "misses": stats.misses + stats.stream_misses, "writes": stats.writes + stats.stream_writes,
            "pruned": pruned, "disabled": stats.disabled, "streams": streams}
