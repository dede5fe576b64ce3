"""Run reports for tests that read reports back: made by the real writer from result objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from glasskit_eval.reports.json_report import build_report
from glasskit_eval.results import SampleResult, TimingMode, TrialResult
from glasskit_eval.summary import RunResult, RunSummary


def result_json(time: float = 0.5, status: str = "failed", *, case: str = "clip", target: str = "door",
                index: int = 0, **extra: Any) -> dict[str, Any]:
    """One result object as ``SampleResult.to_json`` writes it."""
    out: dict[str, Any] = {
        "case": case, "target": target, "target_label": None, "sample_index": index, "timestamp_s": time,
        "source": "at", "status": status, "expected": "closed", "field": None, "compare_mode": None,
        "reason": "r", "observed": {"state": "ajar"}, "observed_value": {"state": "ajar"},
        "evaluation_duration_seconds": 0.01, "evaluation_timing_mode": "individual", "frame_index": 5,
        "media_timestamp_s": time, "error_kind": "adapter" if status == "error" else None,
        "artifact_image": None, "artifact_json": None, "traceback": None}
    out.update(extra)
    return out


def report_of(*trials: list[dict[str, Any]], eval_dir: str = "/evals/x") -> dict[str, Any]:
    """A whole report (one entry per trial) as ``run --output-json`` writes it."""
    made = tuple(TrialResult(trial=n, results=tuple(SampleResult.from_json(r) for r in results), gates=(),
                             duration_seconds=1.0, timing_mode=TimingMode.INDIVIDUAL)
                 for n, results in enumerate(trials, 1))
    cases = tuple(dict.fromkeys(r.case for t in made for r in t.results))
    run = RunResult(eval_dir=eval_dir, cases=cases, repeat=len(made), trials=made, gates=(), duration_seconds=1.0)
    report: dict[str, Any] = json.loads(json.dumps(build_report(RunSummary.of(run))))
    return report


def write_report(path: Path, *trials: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(report_of(*trials), indent=2), encoding="utf-8")
    return path
