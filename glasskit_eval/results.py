"""Results as data: one record per sample attempt, shared by reports, checkpoints and the UI.

Keys follow the upstream JSON report (``schema_version`` 1) so existing tooling
keeps working; ``frame_index``, ``media_timestamp_s`` and ``error_kind`` are ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

PASSED = "passed"
FAILED = "failed"
ERROR = "error"
IGNORED = "ignored"

#: ``error_kind`` values: an adapter error is retried on resume, a comparison error is not.
ADAPTER_ERROR = "adapter"
COMPARISON_ERROR = "comparison"


@dataclass
class SampleResult:
    case: str
    target: str
    target_label: str | None
    sample_index: int
    timestamp_s: float
    source: str
    status: str
    expected: Any
    field: str | None
    compare_mode: str | None
    reason: str
    observed: Any = None
    observed_value: Any = None
    evaluation_duration_seconds: float | None = None
    evaluation_timing_mode: str | None = None
    frame_index: int | None = None
    media_timestamp_s: float | None = None
    error_kind: str | None = None
    artifact_image: str | None = None
    artifact_json: str | None = None

    @property
    def evaluated(self) -> bool:
        return self.status != IGNORED

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.case, self.target, self.sample_index)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SampleResult:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    ignored: int = 0
    duration_total: float = 0.0

    @property
    def evaluated(self) -> int:
        return self.passed + self.failed + self.errors

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.evaluated if self.evaluated else None

    def add(self, result: SampleResult) -> None:
        if result.status == PASSED:
            self.passed += 1
        elif result.status == FAILED:
            self.failed += 1
        elif result.status == ERROR:
            self.errors += 1
        else:
            self.ignored += 1
        if result.evaluation_duration_seconds:
            self.duration_total += result.evaluation_duration_seconds

    @property
    def average_latency(self) -> float | None:
        return self.duration_total / self.evaluated if self.evaluated else None


def count(results: Iterable[SampleResult]) -> Counts:
    counts = Counts()
    for result in results:
        counts.add(result)
    return counts


@dataclass
class Gate:
    name: str
    passed: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "name": self.name, "passed": self.passed}


@dataclass
class TrialResult:
    trial: int
    results: list[SampleResult]
    gates: list[Gate] = field(default_factory=list)
    duration_seconds: float = 0.0
    timing_mode: str = "individual"

    @property
    def success(self) -> bool:
        return all(g.passed for g in self.gates)

    def summary(self) -> dict[str, Any]:
        counts = count(self.results)
        evaluated = counts.evaluated
        return {
            "average_evaluation_seconds_per_sample": counts.average_latency,
            "duration_seconds": self.duration_seconds,
            "errors": counts.errors,
            "evaluated": evaluated,
            "evaluation_timing_mode": self.timing_mode,
            "failed": counts.failed,
            "ignored": counts.ignored,
            "pass_rate": counts.pass_rate,
            "passed": counts.passed,
            "throughput_samples_per_second": (evaluated / self.duration_seconds
                                              if self.duration_seconds > 0 else None),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "gates": [g.to_json() for g in self.gates],
            "results": [r.to_json() for r in self.results],
            "success": self.success,
            "summary": self.summary(),
            "trial": self.trial,
        }


@dataclass
class Stability:
    """One logical sample across all trials."""

    first: SampleResult
    statuses: list[str]

    @property
    def evaluated(self) -> int:
        return sum(1 for s in self.statuses if s != IGNORED)

    @property
    def flaky(self) -> bool:
        return len({s for s in self.statuses if s != IGNORED}) > 1

    def to_json(self) -> dict[str, Any]:
        passed = self.statuses.count(PASSED)
        evaluated = self.evaluated
        return {
            "case": self.first.case,
            "consistently_failed": evaluated > 0 and all(s == FAILED for s in self.statuses),
            "consistently_passed": evaluated > 0 and all(s == PASSED for s in self.statuses),
            "errors": self.statuses.count(ERROR),
            "evaluated": evaluated,
            "expected": self.first.expected,
            "failed": self.statuses.count(FAILED),
            "flaky": self.flaky,
            "ignored": self.first.status == IGNORED,
            "pass_rate": passed / evaluated if evaluated else None,
            "passed": passed,
            "sample_index": self.first.sample_index,
            "source": self.first.source,
            "statuses": list(self.statuses),
            "target": self.first.target,
            "target_label": self.first.target_label,
            "timestamp_s": self.first.timestamp_s,
        }


def stability(trials: Sequence[TrialResult]) -> list[Stability]:
    by_key: dict[tuple[str, str, int], Stability] = {}
    for trial in trials:
        for result in trial.results:
            entry = by_key.get(result.key)
            if entry is None:
                by_key[result.key] = Stability(result, [result.status])
            else:
                entry.statuses.append(result.status)
    return list(by_key.values())
