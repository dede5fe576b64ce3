"""Run orchestration: trials, a fresh evaluator per trial, gates and stability."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..adapters.base import AdapterSpec, FactoryConfig
from ..errors import AdapterError, EvalError
from ..plan.planning import CasePlan, Plan
from ..plan.schedule import ScheduledSample
from ..results import (
    ADAPTER_ERROR,
    ERROR,
    FAILED,
    Gate,
    SampleResult,
    Stability,
    TrialResult,
    stability,
)
from ..support import threads
from .case import CaseWork, ResultSink, SampleFailure, ignored_result, run_case
from .gates import CaseThresholds, GateOptions, evaluate_gates, flaky_gate


@dataclass(frozen=True)
class RunOptions:
    concurrency: int = 1
    repeat: int = 1
    keep_going: bool = False
    verbose: bool = False
    gates: GateOptions = field(default_factory=GateOptions)
    max_flaky_samples: int | None = None
    adapter_config: dict[str, Any] = field(default_factory=dict)
    artifacts_dir: Path | None = None
    save_failures: bool = False


class RunListener(Protocol):
    def trial_started(self, trial: int, total: int) -> None: ...

    def case_started(self, plan: CasePlan, trial: int, total: int) -> None: ...

    def case_finished(self, plan: CasePlan, results: list[SampleResult], trial: int, total: int) -> None: ...


@dataclass
class RunOutcome:
    plan: Plan
    trials: list[TrialResult]
    stability: list[Stability]
    gates: list[Gate]
    duration_seconds: float
    options: RunOptions

    @property
    def success(self) -> bool:
        return all(t.success for t in self.trials) and all(g.passed for g in self.gates)

    @property
    def resumable_adapter_errors(self) -> int:
        return sum(1 for t in self.trials for r in t.results
                   if r.status == ERROR and r.error_kind == ADAPTER_ERROR)


class RunAborted(EvalError):
    """A fail-fast error or interrupt stopped the run; carries what had completed."""

    def __init__(self, message: str, completed: int) -> None:
        super().__init__(message)
        self.completed = completed


async def _close_quietly(evaluator: Any) -> None:
    with contextlib.suppress(Exception):
        await evaluator.close()


class ResultStore(Protocol):
    """Where finished results go (a checkpoint) and which ones an earlier attempt finished."""

    def reusable(self, trial: int, sample: ScheduledSample) -> SampleResult | None: ...

    def sink(self, trial: int) -> ResultSink: ...


@dataclass
class _CaseWork:
    plan: CasePlan
    reused: dict[int, SampleResult]
    pending: list[ScheduledSample]


def _split(plan: Plan, trial: int, store: ResultStore | None) -> list[_CaseWork]:
    work = []
    for case_plan in plan.cases:
        reused: dict[int, SampleResult] = {}
        pending: list[ScheduledSample] = []
        for sample in case_plan.samples:
            result = store.reusable(trial, sample) if store is not None else None
            if result is None:
                pending.append(sample)
            else:
                reused[sample.sample_index] = result
        work.append(_CaseWork(case_plan, reused, pending))
    return work


async def run_trials(plan: Plan, spec: AdapterSpec, options: RunOptions, listener: RunListener,
                     save_failures: Callable[[Sequence[SampleResult], int, Path], None] | None = None,
                     *, store: ResultStore | None = None) -> RunOutcome:
    """Run every trial; with a ``store``, results already in it are reused, not re-evaluated.

    A trial with nothing left to evaluate creates no evaluator. Cases with nothing
    pending are not announced to the listener (a resume shows only the work it does).
    """
    # Sync adapter calls, decoder hand-offs and encoders run on abandonable daemon threads,
    # so an interrupted run can exit even if an adapter call never returns.
    threads.install()
    started = time.perf_counter()
    trials: list[TrialResult] = []
    completed = 0
    factory_config = FactoryConfig(eval_dir=plan.eval_dir.root, config=dict(options.adapter_config),
                                   artifacts_dir=options.artifacts_dir, verbose=options.verbose)
    case_thresholds = [CaseThresholds(c.case.name, c.case.thresholds) for c in plan.cases]
    for trial in range(1, options.repeat + 1):
        work = _split(plan, trial, store)
        anything = any(w.pending for w in work) or plan.sample_count == 0
        if options.repeat > 1 and anything:
            listener.trial_started(trial, options.repeat)
        trial_started = time.perf_counter()
        needs_adapter = any(not s.ignored for w in work for s in w.pending)
        evaluator = await spec.create(factory_config) if needs_adapter else None
        sink = store.sink(trial) if store is not None else None
        results: list[SampleResult] = []
        try:
            for w in work:
                new: list[SampleResult] = []
                if w.pending or not w.reused:
                    shown = (CasePlan(w.plan.case, tuple(w.pending), w.plan.video_path, w.plan.video)
                             if w.reused else w.plan)
                    listener.case_started(shown, trial, options.repeat)
                    if evaluator is not None and any(not s.ignored for s in w.pending):
                        try:
                            new = await run_case(CaseWork(w.pending, w.plan.video_path), evaluator,
                                                 concurrency=options.concurrency,
                                                 keep_going=options.keep_going, sink=sink)
                        except SampleFailure as failure:
                            raise RunAborted(str(failure),
                                             completed + len(results) + failure.completed) from None
                    else:
                        new = [ignored_result(s) for s in w.pending]
                        for result in new:
                            if sink is not None:
                                sink(result)
                await _save_failures(save_failures, w, new, trial, sink)
                if w.pending or not w.reused:
                    listener.case_finished(shown, new, trial, options.repeat)
                merged = {**w.reused, **{r.sample_index: r for r in new}}
                results.extend(merged[s.sample_index] for s in w.plan.samples)
        except BaseException as exc:
            if evaluator is not None:
                if not isinstance(exc, RunAborted):
                    # Interrupted: abandon calls still running in the adapter.
                    with contextlib.suppress(Exception):
                        await evaluator.cancel_pending()
                await _close_quietly(evaluator)
            raise
        timing_mode = "individual"
        if evaluator is not None:
            timing_mode = "batch" if evaluator.batch else "individual"
            try:
                await evaluator.close()
            except AdapterError:
                raise
            except Exception as exc:
                raise AdapterError(f"adapter close failed: {exc}") from exc
        else:
            timing_mode = next((r.evaluation_timing_mode for r in results if r.evaluation_timing_mode),
                               timing_mode)
        completed += len(results)
        record = TrialResult(trial=trial, results=results, duration_seconds=time.perf_counter() - trial_started,
                             timing_mode=timing_mode)
        record.gates = evaluate_gates(results, options=options.gates,
                                      eval_thresholds=plan.eval_dir.config.thresholds, cases=case_thresholds)
        trials.append(record)
    stable = stability(trials)
    gates: list[Gate] = []
    if options.max_flaky_samples is not None:
        gates.append(flaky_gate(sum(1 for s in stable if s.flaky), options.max_flaky_samples))
    return RunOutcome(plan=plan, trials=trials, stability=stable, gates=gates,
                      duration_seconds=time.perf_counter() - started, options=options)


async def _save_failures(save: Callable[[Sequence[SampleResult], int, Path], None] | None, work: _CaseWork,
                         new: list[SampleResult], trial: int, sink: ResultSink | None) -> None:
    """Artifacts for new failures, and for reused ones whose artifacts were never recorded."""
    if save is None:
        return
    todo = list(new) + [r for r in work.reused.values()
                        if r.status in (FAILED, ERROR) and r.artifact_image is None]
    todo = [r for r in todo if r.status in (FAILED, ERROR)]
    if not todo:
        return
    await asyncio.to_thread(save, todo, trial, work.plan.video_path)
    if sink is not None:
        # Record the artifact paths, so a resume reports them without redoing the work.
        for result in todo:
            if result.artifact_image is not None:
                sink(result)
