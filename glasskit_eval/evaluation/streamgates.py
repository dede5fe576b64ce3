"""Stream gates: recall, false alarms per minute and detection latency per stream target (pure).

Each target's figures pool its streams of the trial (every selected case): events, detections,
false alarms and quiet time are added up, latencies gathered. Precedence as for pass-rate
gates: a ``run`` option replaces the config.yaml key of the same gate for every stream target;
a case's ``per_target`` keys gate that case's stream alone (named ``<case>_<target>_...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..cases.model import StreamGates, Thresholds
from ..results import Gate, StreamMetrics, StreamResult
from .streamscore import pooled


@dataclass(frozen=True)
class CaseStreamGates:
    case: str
    thresholds: Thresholds | None


def _pct(value: float | Fraction) -> str:
    return f"{float(value) * 100:.1f}%"


def recall_gate(name: str, metrics: StreamMetrics, minimum: float) -> Gate:
    if metrics.recall is None:
        return Gate(name, True, f"no events (gate: recall >= {_pct(minimum)})")
    # Exact: detected >= minimum * events, so 9 of 10 passes a 0.9 gate.
    passed = metrics.detected >= Fraction(minimum) * metrics.events - Fraction(1, 10**9)
    return Gate(name, passed, f"recall {_pct(metrics.recall)} ({metrics.detected}/{metrics.events} events) "
                f"(gate: >= {_pct(minimum)})")


def false_alarm_gate(name: str, metrics: StreamMetrics, maximum: float) -> Gate:
    rate = metrics.false_alarms_per_min
    if rate is None:
        return Gate(name, True, f"no quiet time (gate: <= {maximum:g} false alarms per minute)")
    passed = rate <= Fraction(maximum)
    return Gate(name, passed, f"{float(rate):.3g} false alarms per minute ({metrics.false_alarms} in "
                f"{float(metrics.quiet_s):g}s of quiet time) (gate: <= {maximum:g})")


def latency_p95_gate(name: str, metrics: StreamMetrics, maximum: float) -> Gate:
    p95 = metrics.latency_p95
    if p95 is None:
        return Gate(name, True, f"no detections (gate: p95 detection latency <= {maximum:g}s)")
    passed = p95 <= Fraction(maximum)
    return Gate(name, passed, f"p95 detection latency {float(p95):.3f}s {'<=' if passed else '>'} {maximum:g}s")


def _gates(prefix: str, metrics: StreamMetrics, wanted: StreamGates) -> list[Gate]:
    gates = []
    if wanted.min_recall is not None:
        gates.append(recall_gate(f"{prefix}_min_recall", metrics, wanted.min_recall))
    if wanted.max_false_alarms_per_min is not None:
        gates.append(false_alarm_gate(f"{prefix}_max_false_alarms_per_min", metrics, wanted.max_false_alarms_per_min))
    if wanted.max_detection_latency_p95_s is not None:
        gates.append(latency_p95_gate(f"{prefix}_max_detection_latency_p95", metrics,
                                      wanted.max_detection_latency_p95_s))
    return gates


def _merge(option: StreamGates, config: StreamGates | None) -> StreamGates:
    config = config or StreamGates()
    return StreamGates(*(getattr(option, n) if getattr(option, n) is not None else getattr(config, n)
                         for n in StreamGates._fields))


def stream_gates(streams: Sequence[StreamResult], *, options: StreamGates, eval_thresholds: Thresholds | None,
                 cases: Sequence[CaseStreamGates] = ()) -> list[Gate]:
    """The stream gates of one trial: per target (options over config.yaml), then per case."""
    gates: list[Gate] = []
    errors = [s for s in streams if s.error is not None]
    if errors:
        gates.append(Gate("stream_errors", False, f"{len(errors)} streams stopped on an adapter error"))
    configured = (eval_thresholds.stream_gates if eval_thresholds is not None else None) or {}
    for target in sorted({s.target for s in streams}):
        mine = [s for s in streams if s.target == target]
        wanted = _merge(options, configured.get(target))
        if not wanted.empty:
            gates += _gates(target, pooled([(s.events, s.metrics) for s in mine]), wanted)
    if options.empty:
        for entry in cases:
            per_case = (entry.thresholds.stream_gates if entry.thresholds is not None else None) or {}
            for target, wanted in per_case.items():
                mine = [s for s in streams if s.case == entry.case and s.target == target]
                if mine:
                    gates += _gates(f"{entry.case}_{target}", pooled([(s.events, s.metrics) for s in mine]), wanted)
    return gates
