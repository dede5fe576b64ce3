"""The machine-readable run report (upstream ``eval_run`` schema version 1), rendered from a RunSummary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..statistics.descriptive import mean
from ..summary import POWER, RunSummary, TrialSummary
from ..support.fsio import write_text_atomic
from .calls import counts_json, groups_json, interval_json

if TYPE_CHECKING:
    from ..arms.compare import ArmsReport
    from ..labels.consensus import LabelCheck

SCHEMA_VERSION = 1

#: ``build_report``'s default: no checkpoint was involved (library use); the CLI passes
#: the real object, or None when the checkpoint was discarded (reported as null).
NO_CHECKPOINT: Any = object()


def _trial_json(t: TrialSummary) -> dict[str, Any]:
    c = t.counts
    trial = t.trial
    return {
        "gates": [g.to_json() for g in trial.gates],
        "results": [r.to_json() for r in trial.results],
        "success": trial.success,
        "summary": {
            "average_evaluation_seconds_per_sample": c.average_latency,
            "duration_seconds": trial.duration_seconds,
            "errors": c.errors,
            "evaluated": c.evaluated,
            "evaluation_timing_mode": trial.timing_mode.value if trial.timing_mode is not None else None,
            "failed": c.failed,
            "ignored": c.ignored,
            # Upstream reports 0.0, not null, when nothing was evaluated.
            "pass_rate": c.pass_rate or 0.0,
            "pass_rate_ci": interval_json(t.pass_rate_ci),
            "passed": c.passed,
            "throughput_samples_per_second": t.throughput,
            **counts_json(c),
        },
        "trial": trial.trial,
    }


def build_report(summary: RunSummary, *, checkpoint: dict[str, Any] | None = NO_CHECKPOINT,
                 baseline: dict[str, Any] | None = None, shard: dict[str, Any] | None = None,
                 observation_cache: dict[str, Any] | None = None, arms: ArmsReport | None = None,
                 jitter: list[dict[str, Any]] | None = None, labels: LabelCheck | None = None) -> dict[str, Any]:
    """The whole report; ``baseline``, ``shard``, ``observation_cache``, the arms' blocks and ``jitter``
    (``--jitter-frames``) and the label check (``label_check``, ``label_suspects``, ``label_ambiguous``)
    appear when given."""
    run = summary.run
    total = summary.total
    first = summary.first
    rates = summary.trial_rates
    stable = summary.stability_counts()
    duration = run.duration_seconds
    timing = summary.timing_mode
    # Streams appear only when the run has stream targets, so other reports keep upstream's keys.
    streams = [s.to_json() for t in run.trials for s in t.streams] or None
    from .early_stop import early_stop_json

    blocks: dict[str, Any] = {"baseline": baseline, "shard": shard, "observation_cache": observation_cache,
                              "streams": streams, "jitter": jitter, "early_stop": early_stop_json(summary)}
    if streams is not None and run.repeat > 1:
        from .streams import stream_stability

        blocks["stream_stability"] = stream_stability(summary)
    if arms is not None:
        blocks |= {"arms": arms.arms_json(), "arm_comparisons": arms.comparisons_json(), "pareto": list(arms.pareto)}
        if arms.streams:
            blocks["arm_stream_comparisons"] = arms.stream_comparisons_json()
    if labels is not None:
        from .labels import labels_json

        blocks |= labels_json(labels)
    return {
        **{name: block for name, block in blocks.items() if block is not None},
        "cases": list(run.cases),
        "checkpoint": checkpoint if checkpoint is not NO_CHECKPOINT else {
            "path": None, "resumable_adapter_errors": summary.resumable_adapter_errors, "resumed": False},
        "eval_dir": run.eval_dir,
        "gates": [g.to_json() for g in run.gates],
        "repeat_count": run.repeat,
        "report_type": "eval_run",
        "schema_version": SCHEMA_VERSION,
        "stability": [s.to_json() for s in summary.stability],
        "success": summary.success,
        "summary": {
            "attempt_pass_rate": total.pass_rate or 0.0,
            "average_evaluation_seconds_per_attempt": total.average_latency,
            "consistently_failed_samples": stable.consistently_failed,
            "consistently_passed_samples": stable.consistently_passed,
            "duration_seconds": duration,
            "error_attempts": total.errors,
            "error_samples": stable.with_errors,
            "evaluated_attempts": total.evaluated,
            "evaluated_samples": first.evaluated,
            "evaluation_timing_mode": timing.value if timing is not None else None,
            "failed_attempts": total.failed,
            "flaky_samples": stable.flaky,
            "ignored_samples": first.ignored,
            "maximum_trial_pass_rate": max(rates) if rates else None,
            "mean_trial_pass_rate": mean(rates),
            "minimum_trial_pass_rate": min(rates) if rates else None,
            "minimum_detectable_drop": ({"drop": summary.minimum_detectable_drop, "alpha": summary.alpha,
                                         "power": POWER} if summary.pass_rate_ci is not None else None),
            "pass_rate_ci": interval_json(summary.pass_rate_ci),
            "passed_attempts": total.passed,
            "successful_trials": sum(1 for t in run.trials if t.success),
            "throughput_attempts_per_second": total.evaluated / duration if duration > 0 else None,
            "trials": len(run.trials),
            **counts_json(total),
            **({"arm": summary.arm} if summary.arm is not None else {}),
        },
        "by_target": groups_json(summary.targets),
        "by_case": groups_json(summary.cases),
        "trials": [_trial_json(t) for t in summary.trials],
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    text = json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    write_text_atomic(path, text)
