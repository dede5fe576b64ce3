"""The ``compare`` command: two run reports matched sample by sample, and tested for a real drop."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..reports.baseline import compare_reports, format_diff
from ..reports.json_report import write_report
from .ci_outputs import baseline_gates
from .requests import Comparison


def execute_compare(baseline: Path, current: Path, out: TextIO, *, output_json: Path | None,
                    comparison: Comparison) -> bool:
    """Print (and with ``output_json`` write) the comparison; False when ``current`` regressed."""
    found = compare_reports(baseline, current, alpha=comparison.alpha, confidence=comparison.confidence)
    print(format_diff(found), file=out)
    gates = baseline_gates(found, comparison)
    for gate in gates:
        if not gate.passed:
            print(f"Gate {gate.name} failed: {gate.message}", file=out)
    if output_json is not None:
        write_report(output_json, found.to_json() | {"gates": [g.to_json() for g in gates]})
    return all(g.passed for g in gates)
