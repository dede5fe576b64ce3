"""The ``compare`` command: two run reports matched sample by sample, and tested for a real drop."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..reports.baseline import compare_reports, format_diff
from ..reports.json_report import write_report


def execute_compare(baseline: Path, current: Path, out: TextIO, *, output_json: Path | None,
                    fail_on_regression: str | None = "any", fail_on_latency_regression_s: float | None = None,
                    confidence: float = 0.95, alpha: float = 0.05) -> bool:
    """Print (and with ``output_json`` write) the comparison; False when ``current`` regressed.

    ``fail_on_regression``: ``any`` pass->fail or new error, or only a ``significant`` drop (None:
    never); ``fail_on_latency_regression_s`` adds the latency gate.
    """
    found = compare_reports(baseline, current, alpha=alpha, confidence=confidence)
    print(format_diff(found), file=out)
    gates = [found.gate(fail_on_regression)] if fail_on_regression else []
    if fail_on_latency_regression_s is not None:
        gates.append(found.latency_gate(fail_on_latency_regression_s))
    for gate in gates:
        if not gate.passed:
            print(f"Gate {gate.name} failed: {gate.message}", file=out)
    if output_json is not None:
        write_report(output_json, found.to_json() | {"gates": [g.to_json() for g in gates]})
    return all(g.passed for g in gates)
