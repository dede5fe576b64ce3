"""``--baseline`` in a run with arms: every arm compared with the same arm of the baseline report.

A baseline result matches a result of the same arm (the same case, target and time, as for a
plain run), and an arm's streams are diffed with the same arm's streams. A baseline without arms
(a plain run's report) is matched by the control arm: the plain adapter is what it ran. An arm the baseline does not have is listed as unmatched and has
no diff. The diffs gate per arm (``<arm>/baseline_regressions``, ...) as the other gates do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ..evaluation.gates import arm_gates
from ..reports.baseline import (
    BaselineDiff,
    diff,
    format_diff,
    load_report,
    outcomes,
    report_results,
    report_streams,
    result_outcomes,
)
from ..reports.streambaseline import stream_diff
from ..results import Gate, SampleResult, StreamResult
from .ci_outputs import baseline_gates
from .requests import Comparison


@dataclass(frozen=True)
class ArmBaselines:
    """Each arm's diff against the baseline, by arm, in the run's arm order."""

    diffs: Mapping[str, BaselineDiff]
    control: str
    #: Arms the baseline has no results for.
    unmatched: tuple[str, ...]
    #: The baseline has no arms: the control arm was matched with its plain results.
    plain: bool = False

    @property
    def main(self) -> BaselineDiff | None:
        """The diff the single-baseline outputs (top-level JSON ``baseline``, JUnit, annotations) show."""
        return self.diffs.get(self.control)

    def gates(self, comparison: Comparison, gated: Sequence[str]) -> list[Gate]:
        return [g for arm, found in self.diffs.items() if arm in gated
                for g in arm_gates(arm, baseline_gates(found, comparison))]

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {arm: found.to_json() for arm, found in self.diffs.items()}

    def print(self, out: TextIO) -> None:
        for arm, found in self.diffs.items():
            print(file=out)
            theirs = "its plain run" if self.plain else f"its arm {arm}"
            print(f"Arm {arm} against {theirs}:", file=out)
            print(format_diff(found), file=out)
        if self.unmatched:
            print(file=out)
            print(f"No baseline for arm{'s' if len(self.unmatched) > 1 else ''} {', '.join(self.unmatched)}: "
                  "the baseline report has no results of that arm", file=out)


def arm_baselines(path: Path, label: str, results: Sequence[SampleResult], names: Sequence[str], control: str,
                  comparison: Comparison, streams: Sequence[StreamResult] = ()) -> ArmBaselines:
    """Each of ``names`` against its own arm in the report at ``path`` (the control against a plain report)."""
    report = load_report(path, f"--baseline {path}")
    before = report_results(report, str(path))
    before_streams = report_streams(report)
    plain = all(r.get("arm") is None for r in before) and all(s.arm is None for s in before_streams)
    diffs: dict[str, BaselineDiff] = {}
    unmatched = []
    for arm in names:
        theirs = [r for r in before if r.get("arm") == arm]
        fed = [s for s in before_streams if s.arm == arm]
        if not theirs and not fed and plain and arm == control:
            theirs, fed = list(before), list(before_streams)
        if not theirs and not fed:
            unmatched.append(arm)
            continue
        mine = [r for r in results if r.arm == arm]
        found = diff(outcomes(theirs), result_outcomes(mine), label, alpha=comparison.alpha,
                     confidence=comparison.confidence)
        diffs[arm] = replace(found, streams=stream_diff(fed, [s for s in streams if s.arm == arm]))
    return ArmBaselines(diffs, control, tuple(unmatched), plain)
