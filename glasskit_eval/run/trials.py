"""Run orchestration: trials, a fresh evaluator per trial, gates and stability."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..adapters.base import AdapterSpec, FactoryConfig
from ..adapters.resilient import CallLedger, RateLimiter, wrap
from ..cases.model import Thresholds
from ..errors import AdapterError, SampleFailure
from ..plan.planning import CasePlan, Plan, undeclared_gate_targets
from ..plan.schedule import ScheduledSample
from ..results import Gate, SampleResult, Status, TimingMode, TrialResult, stability
from ..summary import RunResult
from ..support import threads
from .case import CaseWork, FrameKeeper, ResultSink, run_case
from .gates import CaseThresholds, cost_gate, evaluate_gates, flaky_gate, latency_gate
from .judge import Judge, ignored_result, judge
from .request import RunRequest

#: Writes the artifacts of one case's failed results; returns them with their artifact paths.
SaveFailures = Callable[[Sequence[SampleResult], int, Path], list[SampleResult]]


class RunListener(Protocol):
    def trial_started(self, trial: int, total: int) -> None: ...

    def case_started(self, plan: CasePlan, trial: int, total: int) -> None: ...

    def case_finished(self, plan: CasePlan, results: list[SampleResult], trial: int, total: int) -> None: ...

    def sample_finished(self, result: SampleResult, trial: int, total: int) -> None:
        """Each new result as soon as it is judged (before its case finishes)."""

    def tick(self) -> None:
        """Called every :data:`TICK_S` while a trial runs, so progress shows while calls are slow."""

    def notice(self, text: str) -> None:
        """A warning about the run as a whole (printed once, not per sample)."""


#: How often the listener's clock ticks while a trial runs.
TICK_S = 0.1


class ResultStore(Protocol):
    """Where finished results go (a checkpoint) and which ones an earlier attempt finished."""

    def reusable(self, trial: int, sample: ScheduledSample) -> SampleResult | None: ...

    def sink(self, trial: int) -> ResultSink: ...


async def _close_quietly(evaluator: Any) -> None:
    with contextlib.suppress(Exception):
        await evaluator.close()


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


async def run_trials(plan: Plan, spec: AdapterSpec, request: RunRequest, listener: RunListener,
                     save_failures: SaveFailures | None = None,
                     *, store: ResultStore | None = None, keep_frame: FrameKeeper | None = None,
                     judge: Judge = judge) -> RunResult:
    """Run every trial; with a ``store``, results already in it are reused, not re-evaluated.

    ``keep_frame`` sees each adapter call's result with the frame it got (HTML thumbnails).

    A trial with nothing left to evaluate creates no evaluator. Cases with nothing
    pending are not announced to the listener (a resume shows only the work it does).
    """
    # Sync adapter calls, decoder hand-offs and encoders run on abandonable daemon threads,
    # so an interrupted run can exit even if an adapter call never returns.
    threads.install()
    started = time.perf_counter()
    trials: list[TrialResult] = []
    factory_config = FactoryConfig(eval_dir=plan.eval_dir.root, config=dict(request.adapter_config or {}),
                                   artifacts_dir=Path(request.artifacts_dir) if request.artifacts_dir else None,
                                   verbose=request.verbose)
    case_thresholds = [CaseThresholds(c.case.name, c.case.thresholds) for c in plan.cases]
    policy = request.call_policy()
    # One limiter for the whole run: the provider's quota does not reset between trials.
    limiter = RateLimiter(policy.max_calls_per_second) if policy.max_calls_per_second else None
    undeclared = undeclared_gate_targets(plan, request.filters())
    loop = asyncio.get_running_loop()

    def warn(message: str) -> None:
        # From the decoding thread: printed by the loop, above the live progress line.
        loop.call_soon_threadsafe(listener.notice, message)

    for trial in range(1, request.repeat + 1):
        work = _split(plan, trial, store)
        anything = any(w.pending for w in work) or plan.sample_count == 0
        if request.repeat > 1 and anything:
            listener.trial_started(trial, request.repeat)
        trial_started = time.perf_counter()
        needs_adapter = any(not s.ignored for w in work for s in w.pending)
        ledger = CallLedger(record_attempts=policy.retries > 0)
        evaluator = wrap(await spec.create(factory_config), policy, ledger, limiter) if needs_adapter else None
        if evaluator is not None and evaluator.batch and trial == 1:
            for line in batch_memory_notes(work):
                listener.notice(line)
        sink = store.sink(trial) if store is not None else None
        on_result = ledger.annotating(_announcing(sink, listener, trial, request.repeat))
        results: list[SampleResult] = []
        ticker = asyncio.create_task(_tick(listener))
        try:
            for w in work:
                new: list[SampleResult] = []
                shown = w.plan
                if w.pending or not w.reused:
                    if w.reused:
                        shown = CasePlan(w.plan.case, tuple(w.pending), w.plan.video_path, w.plan.video)
                    listener.case_started(shown, trial, request.repeat)
                    if evaluator is not None and any(not s.ignored for s in w.pending):
                        new = [ledger.annotate(r) for r in await run_case(
                            CaseWork(w.pending, w.plan.video_path, judge, keep_frame=keep_frame,
                                     warn=warn), evaluator,
                            concurrency=request.concurrency, keep_going=request.keep_going, sink=on_result,
                            order=request.order)]
                    else:
                        new = [ignored_result(s) for s in w.pending]
                        for result in new:
                            on_result(result)
                merged = {**w.reused, **{r.sample_index: r for r in new}}
                for result in await _save_failures(save_failures, w, new, trial, sink):
                    merged[result.sample_index] = result
                if w.pending or not w.reused:
                    listener.case_finished(shown, [merged[s.sample_index] for s in shown.samples], trial,
                                           request.repeat)
                results.extend(merged[s.sample_index] for s in w.plan.samples)
        except BaseException as exc:
            if evaluator is not None:
                if not isinstance(exc, SampleFailure):
                    # Interrupted or broken: abandon calls still running in the adapter (a
                    # fail-fast case has already done so).
                    with contextlib.suppress(Exception):
                        await evaluator.cancel_pending()
                await _close_quietly(evaluator)
            raise
        finally:
            ticker.cancel()
        timing_mode = _timing_mode(results, evaluator)
        if evaluator is not None:
            try:
                await evaluator.close()
            except AdapterError:
                raise
            except Exception as exc:
                raise AdapterError(f"adapter close failed: {exc}") from exc
        gates = evaluate_gates(results, options=request.gate_options(),
                               eval_thresholds=plan.eval_dir.config.thresholds, cases=case_thresholds,
                               undeclared=undeclared)
        trials.append(TrialResult(trial=trial, results=tuple(results), gates=tuple(gates),
                                  duration_seconds=time.perf_counter() - trial_started, timing_mode=timing_mode))
    run_gates: list[Gate] = []
    if request.max_flaky_samples is not None:
        flaky = sum(1 for s in stability(trials) if s.flaky)
        run_gates.append(flaky_gate(flaky, request.max_flaky_samples))
    run_gates += _call_gates(trials, request, plan.eval_dir.config.thresholds)
    return RunResult(eval_dir=str(plan.eval_dir.root), cases=tuple(c.case.name for c in plan.cases),
                     repeat=request.repeat, trials=tuple(trials), gates=tuple(run_gates),
                     duration_seconds=time.perf_counter() - started)


def _announcing(sink: ResultSink | None, listener: RunListener, trial: int, trials: int) -> ResultSink:
    """The store's sink, then the listener: a result is on record before anyone is told of it."""

    def record(result: SampleResult) -> None:
        if sink is not None:
            sink(result)
        listener.sample_finished(result, trial, trials)

    return record


async def _tick(listener: RunListener) -> None:
    while True:
        await asyncio.sleep(TICK_S)
        listener.tick()


def _call_gates(trials: list[TrialResult], request: RunRequest, thresholds: Thresholds | None) -> list[Gate]:
    """Latency and cost gates over the whole run; the command line wins over config.yaml."""
    from ..summary import Counts

    eval_t = thresholds or Thresholds()
    max_p95 = request.max_p95_latency_s if request.max_p95_latency_s is not None else eval_t.max_p95_latency_s
    max_cost = request.max_cost if request.max_cost is not None else eval_t.max_cost
    if max_p95 is None and max_cost is None:
        return []
    counts = Counts.of(r for t in trials for r in t.results)
    gates = []
    if max_p95 is not None:
        latency = counts.latency
        gates.append(latency_gate(latency.p95 if latency is not None else None, max_p95))
    if max_cost is not None:
        gates.append(cost_gate(counts.cost, max_cost))
    return gates


#: Above this, holding one target's frames for ``evaluate_many`` is worth a warning.
BATCH_MEMORY_WARN_BYTES = 1 << 30


def batch_memory_notes(work: list[_CaseWork]) -> list[str]:
    """One line per target whose ``evaluate_many`` call needs more frame memory than the budget.

    A batch holds a target's frames (width x height x 3 bytes each, one per distinct time) at once.
    """
    notes = []
    for w in work:
        info = w.plan.video
        if info is None:
            continue
        frame_bytes = info.width * info.height * 3
        times: dict[str, set[object]] = {}
        for s in w.pending:
            if not s.ignored:
                times.setdefault(s.target.id, set()).add(s.time)
        for target, wanted in times.items():
            need = len(wanted) * frame_bytes
            if need > BATCH_MEMORY_WARN_BYTES:
                notes.append(f"evaluate_many for {w.plan.case.name}/{target} gets {len(wanted)} frames of "
                             f"{info.width}x{info.height} at once: about {need / (1 << 20):,.0f} MiB of RGB "
                             "while the call runs; split the target or use evaluate for long ranges")
    return notes


def _timing_mode(results: list[SampleResult], evaluator: Any) -> TimingMode | None:
    """How the trial's durations were measured; None (upstream: null) when nothing was evaluated."""
    if not any(r.evaluated for r in results):
        return None
    if evaluator is not None:
        return TimingMode.BATCH if evaluator.batch else TimingMode.INDIVIDUAL
    # Everything was reused from a checkpoint: the mode those results were measured in.
    return next((r.evaluation_timing_mode for r in results if r.evaluation_timing_mode is not None),
                TimingMode.INDIVIDUAL)


async def _save_failures(save: SaveFailures | None, work: _CaseWork, new: list[SampleResult], trial: int,
                         sink: ResultSink | None) -> list[SampleResult]:
    """Artifacts for new failures, and for reused ones whose artifacts were never recorded."""
    if save is None:
        return []
    failed = (Status.FAILED, Status.ERROR)
    todo = [r for r in new if r.status in failed]
    todo += [r for r in work.reused.values() if r.status in failed and r.artifact_image is None]
    if not todo:
        return []
    saved = await asyncio.to_thread(save, todo, trial, work.plan.video_path)
    if sink is not None:
        # Record the artifact paths, so a resume reports them without redoing the work.
        for result in saved:
            if result.artifact_image is not None:
                sink(result)
    return saved

