"""A run report as the review page overlays it: one marker per sample result.

Markers are read once at launch; each time the page gets a case, every marker is
compared with the case file as it is now, so a sample whose expectation, field,
comparison mode or ignore changed since the run (or that is gone) is marked
``changed`` instead of showing a pass or fail that no longer applies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..cases.model import Case, SampleBlock, block_times
from ..support.jsonvalues import json_equal

Marker = dict[str, Any]

def load_report(path: Path) -> dict[str, list[Marker]]:
    """Per case, the markers of a ``run --output-json`` report (read by the one strict loader)."""
    return load_overlay(path)[0]


def load_overlay(path: Path) -> tuple[dict[str, list[Marker]], list[str]]:
    """The report's markers per case, and its arms in the run's order (the control first; none without arms).

    With arms every marker carries its ``arm``: the page shows one arm's results at a time.
    """
    from ..reports.loading import load_report_file

    report = load_report_file(path, f"--report {path}")
    markers: dict[str, list[Marker]] = {}
    arms: dict[str, None] = {}
    for trial in report["trials"]:
        for result in trial["results"]:
            markers.setdefault(result["case"], []).append(_marker(trial["trial"], result))
            if isinstance(result.get("arm"), str):
                arms.setdefault(result["arm"])
    return markers, list(arms)


def _marker(trial: int, result: dict[str, Any]) -> Marker:
    return {
        "trial": trial,
        "target": result["target"],
        "time_s": float(result["timestamp_s"]),
        "status": result["status"],
        "reason": result["reason"],
        "expected": result["expected"],
        "field": result["field"],
        "compare_mode": result["compare_mode"],
        "observed": result.get("observed"),
        "observed_value": result.get("observed_value"),
        "frame_index": result.get("frame_index"),
        "arm": result.get("arm"),
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
