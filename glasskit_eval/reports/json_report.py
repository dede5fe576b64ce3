"""The machine-readable run report (upstream ``eval_run`` schema version 1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..results import count
from ..run.trials import RunOutcome
from ..support.fsio import write_text_atomic

SCHEMA_VERSION = 1

#: ``build_report``'s default: no checkpoint was involved (library use); the CLI passes
#: the real object, or None when the checkpoint was discarded (reported as null).
NO_CHECKPOINT: Any = object()


def build_report(outcome: RunOutcome, *, checkpoint: dict[str, Any] | None = NO_CHECKPOINT) -> dict[str, Any]:
    trials = outcome.trials
    results = [r for t in trials for r in t.results]
    total = count(results)
    rates = [count(t.results).pass_rate for t in trials]
    known = [r for r in rates if r is not None]
    stable = [s.to_json() for s in outcome.stability]
    first = count(trials[0].results) if trials else total
    duration = outcome.duration_seconds
    summary = {
        "attempt_pass_rate": total.pass_rate,
        "average_evaluation_seconds_per_attempt": total.average_latency,
        "consistently_failed_samples": sum(1 for s in stable if s["consistently_failed"]),
        "consistently_passed_samples": sum(1 for s in stable if s["consistently_passed"]),
        "duration_seconds": duration,
        "error_attempts": total.errors,
        "error_samples": sum(1 for s in stable if s["errors"]),
        "evaluated_attempts": total.evaluated,
        "evaluated_samples": first.evaluated,
        "evaluation_timing_mode": trials[0].timing_mode if trials else "individual",
        "failed_attempts": total.failed,
        "flaky_samples": sum(1 for s in stable if s["flaky"]),
        "ignored_samples": first.ignored,
        "maximum_trial_pass_rate": max(known) if known else None,
        "mean_trial_pass_rate": sum(known) / len(known) if known else None,
        "minimum_trial_pass_rate": min(known) if known else None,
        "passed_attempts": total.passed,
        "successful_trials": sum(1 for t in trials if t.success),
        "throughput_attempts_per_second": total.evaluated / duration if duration > 0 else None,
        "trials": len(trials),
    }
    return {
        "cases": [c.case.name for c in outcome.plan.cases],
        "checkpoint": checkpoint if checkpoint is not NO_CHECKPOINT else {
            "path": None, "resumable_adapter_errors": outcome.resumable_adapter_errors, "resumed": False},
        "eval_dir": str(outcome.plan.eval_dir.root),
        "gates": [g.to_json() for g in outcome.gates],
        "repeat_count": outcome.options.repeat,
        "report_type": "eval_run",
        "schema_version": SCHEMA_VERSION,
        "stability": stable,
        "success": outcome.success,
        "summary": summary,
        "trials": [t.to_json() for t in trials],
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    text = json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    write_text_atomic(path, text)
