"""A run report as the review page overlays it: one marker per sample result.

Markers are read once at launch; each time the page gets a case, every marker is
compared with the case file as it is now, so a sample whose expectation, field,
comparison mode or ignore changed since the run (or that is gone) is marked
``changed`` instead of showing a pass or fail that no longer applies.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..cases.model import Case, SampleBlock, block_times
from ..errors import UsageError
from ..support.jsonvalues import json_equal

Marker = dict[str, Any]

def load_report(path: Path) -> dict[str, list[Marker]]:
    """Per case, the markers of a ``run --output-json`` report."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read --report {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--report {path} is not valid JSON: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("trials"), list):
        raise UsageError(f"--report {path} is not a run report; write one with "
                         "`run --output-json results.json`")
    markers: dict[str, list[Marker]] = {}
    for trial in report["trials"]:
        if not isinstance(trial, dict):
            continue
        for result in trial.get("results") or []:
            marker = _marker(trial.get("trial"), result)
            if marker is not None:
                markers.setdefault(result["case"], []).append(marker)
    return markers


def _marker(trial: Any, result: Any) -> Marker | None:
    if not isinstance(result, dict) or not isinstance(result.get("case"), str):
        return None
    time = result.get("timestamp_s")
    if not isinstance(time, (int, float)) or isinstance(time, bool) or not math.isfinite(time):
        return None
    return {
        "trial": trial,
        "target": result.get("target"),
        "time_s": float(time),
        "status": result.get("status"),
        "reason": result.get("reason"),
        "expected": result.get("expected"),
        "field": result.get("field"),
        "compare_mode": result.get("compare_mode"),
        "observed": result.get("observed"),
        "observed_value": result.get("observed_value"),
        "frame_index": result.get("frame_index"),
    }


def annotate(markers: list[Marker], case: Case | None) -> list[Marker]:
    """The markers with ``changed``: whether the case file no longer says what the run checked."""
    if case is None:
        return [dict(m, changed=False) for m in markers]
    index = _sample_index(case)
    return [dict(m, changed=_changed(m, index)) for m in markers]


def _key(target: Any, time: float) -> tuple[Any, float]:
    # Report times are floats of the case's exact times: equal to 9 decimals is the same sample.
    return (target, round(time, 9))


def _sample_index(case: Case) -> dict[tuple[Any, float], SampleBlock]:
    return {_key(t.id, float(time)): block for t in case.targets for block in t.blocks
            for time in block_times(block)}


def _changed(marker: Marker, index: dict[tuple[Any, float], SampleBlock]) -> bool:
    block = index.get(_key(marker["target"], marker["time_s"]))
    if block is None:
        return True
    if (block.ignore is not None) != (marker["status"] == "ignored"):
        return True
    if block.ignore is not None:
        return False
    mode = block.compare.mode if block.compare is not None else None
    return (not block.has_expect or not json_equal(block.expect, marker["expected"])
            or block.field != marker["field"] or mode != marker["compare_mode"])
