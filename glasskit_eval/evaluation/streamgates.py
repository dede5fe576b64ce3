"""Which stream targets and cases get stream gates (pure); the gates are made in ``gates``.

Each target's figures pool its streams of the trial (every selected case): events, detections,
false alarms and quiet time are added up, latencies gathered. Precedence as for pass-rate
gates: a ``run`` option replaces the config.yaml key of the same gate for every stream target;
a case's ``per_target`` keys gate that case's stream alone (named ``<case>_<target>_...``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cases.model import STREAM_GATE_NAMES, StreamGates, Thresholds
from ..results import Gate, StreamMetrics, StreamResult
from ..summary import pooled_streams
from .gates import (
    CaseThresholds,
    false_alarm_gate,
    latency_p95_gate,
    recall_gate,
    stream_errors_gate,
)


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
                         for n in STREAM_GATE_NAMES))


def stream_gates(streams: Sequence[StreamResult], *, options: StreamGates, eval_thresholds: Thresholds | None,
                 cases: Sequence[CaseThresholds] = ()) -> list[Gate]:
    """The stream gates of one trial: per target (options over config.yaml), then per case."""
    gates: list[Gate] = []
    errors = [s for s in streams if s.error is not None]
    if errors:
        gates.append(stream_errors_gate(len(errors)))
    configured = (eval_thresholds.stream_gates if eval_thresholds is not None else None) or {}
    for target in sorted({s.target for s in streams}):
        mine = [s for s in streams if s.target == target]
        wanted = _merge(options, configured.get(target))
        if not wanted.empty:
            gates += _gates(target, pooled_streams(mine), wanted)
    if options.empty:
        for entry in cases:
            per_case = (entry.thresholds.stream_gates if entry.thresholds is not None else None) or {}
            for target, wanted in per_case.items():
                mine = [s for s in streams if s.case == entry.case and s.target == target]
                if mine:
                    gates += _gates(f"{entry.case}_{target}", pooled_streams(mine), wanted)
    return gates
