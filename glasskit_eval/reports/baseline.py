"""Comparison with a previous run's JSON report (ours or the upstream tool's; pure but for loading).

Samples are matched by (case, target, timestamp); sample indexes are not used, because adding a
block earlier in a target renumbers the samples after it. With ``--repeat`` a sample's outcome
is the worst of its trials (error, then failed, then passed; ignored only if every trial was), so a
flaky sample counts as failing on either side. Regressions are pass->fail and new errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..results import Gate, SampleResult
from .console import compact, table, time_label

#: Change kinds, in the order tables list them.
KINDS = ("pass_to_fail", "new_error", "fail_to_pass", "error_fixed", "status_changed",
         "observed_changed", "added", "removed")
REGRESSIONS = ("pass_to_fail", "new_error")

MatchKey = tuple[str, str, float]
_RANK = {"ignored": 0, "passed": 1, "failed": 2, "error": 3}


@dataclass(frozen=True, slots=True)
class Outcome:
    """One sample's outcome on one side: worst status across trials, first observed value."""

    case: str
    target: str
    timestamp_s: float
    status: str
    observed_value: Any
    reason: str


@dataclass(frozen=True, slots=True)
class Change:
    kind: str
    case: str
    target: str
    timestamp_s: float
    before: Outcome | None
    after: Outcome | None

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline_observed": None if self.before is None else self.before.observed_value,
            "baseline_status": None if self.before is None else self.before.status,
            "case": self.case,
            "kind": self.kind,
            "observed": None if self.after is None else self.after.observed_value,
            "status": None if self.after is None else self.after.status,
            "target": self.target,
            "timestamp_s": self.timestamp_s,
        }


@dataclass(frozen=True, slots=True)
class BaselineDiff:
    path: str
    changes: tuple[Change, ...]
    #: Samples matched on both sides.
    matched: int

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    def counts(self) -> dict[str, int]:
        return {kind: self.count(kind) for kind in KINDS}

    @property
    def regressions(self) -> int:
        return sum(1 for c in self.changes if c.kind in REGRESSIONS)

    def to_json(self) -> dict[str, Any]:
        return {"changes": [c.to_json() for c in self.changes], "counts": self.counts(),
                "matched_samples": self.matched, "path": self.path, "regressions": self.regressions}

    def gate(self) -> Gate:
        n_fail, n_error = self.count("pass_to_fail"), self.count("new_error")
        message = ("no regressions against the baseline" if not self.regressions
                   else f"{n_fail} pass->fail, {n_error} new errors against the baseline")
        return Gate("baseline_regressions", self.regressions == 0, message)

    def properties(self) -> list[tuple[str, str]]:
        out = [("baseline.path", self.path), ("baseline.matched_samples", str(self.matched)),
               ("baseline.regressions", str(self.regressions))]
        return out + [(f"baseline.{kind}", str(n)) for kind, n in self.counts().items()]


def match_key(case: str, target: str, timestamp_s: float) -> MatchKey:
    # Rounded like declared duplicate times (9 decimals), so 0.30000000000000004 matches 0.3.
    return (case, target, round(timestamp_s, 9))


def outcomes(results: Iterable[Mapping[str, Any]]) -> dict[MatchKey, Outcome]:
    """Each sample's outcome from result objects (JSON form) of every trial, in first-seen order."""
    out: dict[MatchKey, Outcome] = {}
    for r in results:
        key = match_key(r["case"], r["target"], float(r["timestamp_s"]))
        status = str(r["status"])
        seen = out.get(key)
        if seen is None:
            out[key] = Outcome(r["case"], r["target"], float(r["timestamp_s"]), status,
                               r.get("observed_value"), str(r.get("reason") or ""))
        elif _RANK.get(status, 0) > _RANK.get(seen.status, 0):
            out[key] = Outcome(seen.case, seen.target, seen.timestamp_s, status, seen.observed_value,
                               str(r.get("reason") or ""))
    return out


def result_outcomes(results: Iterable[SampleResult]) -> dict[MatchKey, Outcome]:
    return outcomes(r.to_json() for r in results)


def report_results(report: object, where: str) -> list[Mapping[str, Any]]:
    """Every result object of a report; UsageError naming the file if it is not a run report."""
    trials = report.get("trials") if isinstance(report, Mapping) else None
    if not isinstance(trials, list):
        raise UsageError(f"{where} is not a run report (no `trials` list); pass a file written by "
                         "`run --output-json`")
    results: list[Mapping[str, Any]] = []
    for t, trial in enumerate(trials):
        items = trial.get("results") if isinstance(trial, Mapping) else None
        if not isinstance(items, list):
            raise UsageError(f"{where}: trials[{t}] has no `results` list")
        for i, r in enumerate(items):
            ok = (isinstance(r, Mapping) and isinstance(r.get("case"), str) and isinstance(r.get("target"), str)
                  and isinstance(r.get("status"), str) and isinstance(r.get("timestamp_s"), (int, float))
                  and not isinstance(r.get("timestamp_s"), bool))
            if not ok:
                raise UsageError(f"{where}: trials[{t}].results[{i}] lacks case, target, timestamp_s "
                                 "or status")
            results.append(r)
    return results


def load_report(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"report {path} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot read report {path}: {exc}") from None


def diff(before: Mapping[MatchKey, Outcome], after: Mapping[MatchKey, Outcome], path: str) -> BaselineDiff:
    changes: list[Change] = []
    matched = 0
    for key, now in after.items():
        old = before.get(key)
        if old is None:
            changes.append(Change("added", *key, None, now))
            continue
        matched += 1
        kind = _kind(old, now)
        if kind is not None:
            changes.append(Change(kind, *key, old, now))
    changes += [Change("removed", *key, old, None) for key, old in before.items() if key not in after]
    order = {kind: i for i, kind in enumerate(KINDS)}
    changes.sort(key=lambda c: order[c.kind])  # stable: run order within a kind
    return BaselineDiff(path, tuple(changes), matched)


def _kind(old: Outcome, now: Outcome) -> str | None:
    if old.status != now.status:
        if now.status == "error":
            return "new_error"
        if old.status == "error":
            return "error_fixed"
        if (old.status, now.status) == ("passed", "failed"):
            return "pass_to_fail"
        if (old.status, now.status) == ("failed", "passed"):
            return "fail_to_pass"
        return "status_changed"
    if old.status in ("passed", "failed") and old.observed_value != now.observed_value:
        return "observed_changed"
    return None


def compare_reports(baseline: Path, current: Path) -> BaselineDiff:
    before = outcomes(report_results(load_report(baseline), str(baseline)))
    after = outcomes(report_results(load_report(current), str(current)))
    return diff(before, after, str(baseline))


def diff_against(path: Path, results: Iterable[SampleResult], *, label: str | None = None) -> BaselineDiff:
    """Compare a run's results with the report at ``path`` (named ``label`` in the outputs)."""
    before = outcomes(report_results(load_report(path), str(path)))
    return diff(before, result_outcomes(results), label or str(path))


def _status(outcome: Outcome | None) -> str:
    return "-" if outcome is None else outcome.status


def _observed(outcome: Outcome | None) -> str:
    return "-" if outcome is None or outcome.status == "ignored" else compact(outcome.observed_value)


def change_rows(d: BaselineDiff) -> list[list[str]]:
    return [[c.kind, c.case, c.target, f"{time_label(c.timestamp_s)}s", _status(c.before), _status(c.after),
             _observed(c.before), _observed(c.after)] for c in d.changes]


CHANGE_HEADERS = ["Change", "Case", "Target", "Time", "Before", "After", "Observed before", "Observed after"]


def format_diff(d: BaselineDiff) -> str:
    """Console text: a counts line and the change table (or a line saying nothing changed)."""
    counts = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in d.counts().items() if n)
    head = f"Baseline {d.path}: {d.matched} samples matched" + (f"; {counts}" if counts else "; no changes")
    if not d.changes:
        return head
    return head + "\n\n" + table("Changes against the baseline", CHANGE_HEADERS, change_rows(d),
                                 [False, False, False, True, False, False, False, False])
