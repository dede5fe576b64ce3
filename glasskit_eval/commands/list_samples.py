"""``list-samples``: the expanded schedule as a table (no video is opened)."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from ..plan.planning import build_plan
from ..plan.schedule import Filters
from ..reports.console import compact, table
from ..support.timevalues import format_time


def execute_list_samples(eval_dir: str | Path, filters: Filters, out: TextIO, *, allow_empty: bool) -> None:
    print(list_samples(eval_dir, filters, allow_empty=allow_empty), file=out)


def list_samples(eval_dir: str | Path, filters: Filters, *, allow_empty: bool) -> str:
    plan = build_plan(eval_dir, filters, allow_empty=allow_empty, check_videos=False)
    rows = []
    for case_plan in plan.cases:
        for s in case_plan.samples:
            declared = s.block.compare
            mode = ""
            if declared is not None:
                mode = declared.mode + (f" ±{declared.tolerance:g}" if declared.tolerance else "")
            # Shown as `run` and upstream show a target: `Label (id)` when it has a label.
            target = f"{s.target.label} ({s.target.id})" if s.target.label else s.target.id
            rows.append([s.case.name, target, f"{format_time(s.time)}s",
                         compact(s.expect) if s.block.has_expect else "(draft)", mode, s.field or "",
                         s.block.ignore or "", s.block.source()])
    return table(f"Samples: {plan.eval_dir.root}", ["Case", "Target", "Time", "Expected", "Mode", "Field",
                                                    "Ignored", "Source"], rows,
                 [False, False, True, False, False, False, False, False])
