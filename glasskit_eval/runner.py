"""Run orchestration: trials, a fresh evaluator per trial, gates and stability."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .adapters.base import AdapterSpec, FactoryConfig
from .errors import AdapterError, EvalError
from .execution import CaseWork, SampleFailure, run_case
from .gates import CaseThresholds, GateOptions, evaluate_gates, flaky_gate
from .planning import CasePlan, Plan
from .results import ADAPTER_ERROR, ERROR, Gate, SampleResult, Stability, TrialResult, stability


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


async def run_trials(plan: Plan, spec: AdapterSpec, options: RunOptions, listener: RunListener,
                     save_failures: Callable[[Sequence[SampleResult], int, Path], None] | None = None) -> RunOutcome:
    loop = asyncio.get_running_loop()
    # Sync adapters run on this pool: it must allow `concurrency` blocking calls at once
    # plus the decoder thread and PNG/JPEG encoders.
    executor = ThreadPoolExecutor(max_workers=max(options.concurrency, 4) + 4,
                                  thread_name_prefix="glasskit")
    loop.set_default_executor(executor)
    started = time.perf_counter()
    trials: list[TrialResult] = []
    completed = 0
    factory_config = FactoryConfig(eval_dir=plan.eval_dir.root, config=dict(options.adapter_config),
                                   artifacts_dir=options.artifacts_dir, verbose=options.verbose)
    case_thresholds = [CaseThresholds(c.case.name, c.case.thresholds) for c in plan.cases]
    for trial in range(1, options.repeat + 1):
        if options.repeat > 1:
            listener.trial_started(trial, options.repeat)
        trial_started = time.perf_counter()
        evaluator = await spec.create(factory_config)
        results: list[SampleResult] = []
        timing_mode = "batch" if evaluator.batch else "individual"
        try:
            for case_plan in plan.cases:
                listener.case_started(case_plan, trial, options.repeat)
                try:
                    case_results = await run_case(CaseWork(case_plan.samples, case_plan.video_path),
                                                  evaluator, concurrency=options.concurrency,
                                                  keep_going=options.keep_going)
                except SampleFailure as failure:
                    raise RunAborted(str(failure), completed + len(results) + failure.completed) from None
                if save_failures is not None:
                    await asyncio.to_thread(save_failures, case_results, trial, case_plan.video_path)
                listener.case_finished(case_plan, case_results, trial, options.repeat)
                results.extend(case_results)
        except BaseException:
            await _close_quietly(evaluator)
            raise
        try:
            await evaluator.close()
        except AdapterError:
            raise
        except Exception as exc:
            raise AdapterError(f"adapter close failed: {exc}") from exc
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
    executor.shutdown(wait=False)
    return RunOutcome(plan=plan, trials=trials, stability=stable, gates=gates,
                      duration_seconds=time.perf_counter() - started, options=options)
