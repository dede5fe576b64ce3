"""The ``compare`` command: two run reports matched sample by sample."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..reports.baseline import compare_reports, format_diff
from ..reports.json_report import write_report


def execute_compare(baseline: Path, current: Path, out: TextIO, *, output_json: Path | None) -> bool:
    """Print (and with ``output_json`` write) the comparison; False when ``current`` regressed."""
    found = compare_reports(baseline, current)
    print(format_diff(found), file=out)
    if output_json is not None:
        write_report(output_json, found.to_json())
    return not found.regressions
