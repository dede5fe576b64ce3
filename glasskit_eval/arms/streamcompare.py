"""Arms' streams side by side (pure): each arm against the control on the same stream targets' events.

Per stream target (case, target) and arm, pooled over the trials: recall (detected events over
events), false alarms per minute of quiet time, and the nearest-rank p95 of the detected events'
latencies, for the arm and the control, with the arm-minus-control deltas. The events are paired
(the same event of the same trial, fed to both arms): ``control_only`` counts events the control
detected and the arm missed, ``arm_only`` the reverse, and ``p_value`` is the two-sided exact
McNemar mid-p on those discordant events (1.0 when there are none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..results import StreamMetrics, StreamResult
from ..statistics.paired import mcnemar_drop_p_value
from ..summary import pooled_streams


def _delta(arm: Fraction | None, control: Fraction | None) -> float | None:
    return None if arm is None or control is None else float(arm - control)


def _float(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class StreamComparison:
    """One arm against the control on one stream target's events."""

    control: str
    arm: str
    case: str
    target: str
    #: Each side's figures pooled over its trials, as the stream gates pool a target's.
    control_figures: StreamMetrics
    arm_figures: StreamMetrics
    #: Paired events the control detected and the arm missed, and the reverse.
    control_only: int
    arm_only: int

    @property
    def p_value(self) -> float:
        drop = mcnemar_drop_p_value(self.control_only, self.arm_only)
        gain = mcnemar_drop_p_value(self.arm_only, self.control_only)
        return min(1.0, 2 * min(drop, gain))

    @property
    def delta_recall(self) -> float | None:
        return _delta(self.arm_figures.recall, self.control_figures.recall)

    @property
    def delta_false_alarms_per_min(self) -> float | None:
        return _delta(self.arm_figures.false_alarms_per_min, self.control_figures.false_alarms_per_min)

    @property
    def delta_latency_p95_s(self) -> float | None:
        return _delta(self.arm_figures.latency_p95, self.control_figures.latency_p95)

    def to_json(self) -> dict[str, Any]:
        def figures(f: StreamMetrics) -> dict[str, Any]:
            return {"detected": f.detected, "events": f.events, "false_alarms": f.false_alarms,
                    "false_alarms_per_min": _float(f.false_alarms_per_min),
                    "latency_p95_s": _float(f.latency_p95), "recall": _float(f.recall)}

        return {"arm": self.arm, "arm_only": self.arm_only, "case": self.case, "control": self.control,
                "control_only": self.control_only, "delta_false_alarms_per_min": self.delta_false_alarms_per_min,
                "delta_latency_p95_s": self.delta_latency_p95_s, "delta_recall": self.delta_recall,
                "figures": {"arm": figures(self.arm_figures), "control": figures(self.control_figures)},
                "p_value": self.p_value, "target": self.target}


def compare_arm_streams(streams: Sequence[StreamResult], names: Sequence[str],
                        control: str) -> list[StreamComparison]:
    """Every arm but the control against it, per stream target, in the arms' then the targets' order."""
    by_key: dict[tuple[str, str], dict[str, list[StreamResult]]] = {}
    for s in streams:
        if s.arm is not None:
            by_key.setdefault((s.case, s.target), {}).setdefault(s.arm, []).append(s)
    out = []
    for name in names:
        if name == control:
            continue
        for (case, target), arms in by_key.items():
            theirs, mine = arms.get(control, []), arms.get(name, [])
            if not theirs or not mine:
                continue
            detected = {(s.trial, e.index): e.detected for s in theirs for e in s.events}
            control_only = arm_only = 0
            for s in mine:
                for e in s.events:
                    other = detected.get((s.trial, e.index))
                    if other is None:
                        continue
                    control_only += other and not e.detected
                    arm_only += e.detected and not other
            out.append(StreamComparison(control, name, case, target, pooled_streams(theirs), pooled_streams(mine),
                                        control_only, arm_only))
    return out
