"""A run report as the review page overlays it: one marker per sample result, and per stream its emissions.

Markers are read once at launch; each time the page gets a case, every marker is
compared with the case file as it is now, so a sample whose expectation, field,
comparison mode or ignore changed since the run (or that is gone) is marked
``changed`` instead of showing a pass or fail that no longer applies.

Stream targets get one emission marker per scored emission (``hit``, ``repeat``, ``false_alarm``)
and one per ``missed`` event, from the report's ``streams``; a hit or a miss whose event is no
longer in the file at the same onset and window is ``changed`` the same way.
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


def load_suspects(path: Path) -> list[Marker]:
    """The report's suspect labels in its order (``run`` with repeats or arms writes them); raises
    :class:`ValueError` saying why there are none to step through."""
    from ..reports.loading import load_report_file

    report = load_report_file(path, f"--report {path}")
    check = report.get("label_check")
    if not isinstance(check, dict) or not check.get("claimed"):
        why = check.get("note") if isinstance(check, dict) and isinstance(check.get("note"), str) else (
            "the run made one vote per sample; run with --repeat 2 or more, or with several arms (--arm)")
        raise ValueError(f"{path} has no label check: {why}")
    found = [s for s in report.get("label_suspects") or []
             if isinstance(s, dict) and isinstance(s.get("case"), str) and isinstance(s.get("target"), str)
             and _time(s.get("at")) is not None]
    if not found:
        raise ValueError(f"{path} lists no suspect labels ({check.get('judged_samples')} samples judged): "
                         "nothing to review")
    keys = ("case", "target", "sample_index", "at", "expected", "consensus", "votes_against", "votes", "field")
    return [{key: s.get(key) for key in keys} for s in found]


def load_emissions(path: Path) -> dict[str, list[Marker]]:
    """Per case, the stream emission markers (hits, repeats, false alarms, misses) of a ``run --output-json`` report."""
    from ..reports.loading import load_report_file

    report = load_report_file(path, f"--report {path}")
    emissions: dict[str, list[Marker]] = {}
    streams = report.get("streams")
    for stream in streams if isinstance(streams, list) else []:
        if isinstance(stream, dict) and isinstance(stream.get("case"), str):
            emissions.setdefault(stream["case"], []).extend(_stream_markers(stream))
    return emissions


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _stream_markers(stream: dict[str, Any]) -> list[Marker]:
    """A stream's hits, repeats, false alarms and misses; entries that are not as ``run`` writes them are skipped."""
    base = {"trial": stream.get("trial"), "target": stream.get("target")}
    out: list[Marker] = []
    for event in stream.get("events") or []:
        if not isinstance(event, dict):
            continue
        at, window = _time(event.get("at")), event.get("window_s")
        span = [_time(w) for w in window] if isinstance(window, list) and len(window) == 2 else None
        where = {"event": event.get("index"), "at": at, "window": span, "expected": event.get("expect")}
        emission = event.get("emission")
        if isinstance(emission, dict) and _time(emission.get("time_s")) is not None:
            out.append({**base, **where, "kind": "hit", "time_s": _time(emission["time_s"]),
                        "value": emission.get("value"), "latency_s": _time(event.get("latency_s"))})
        elif at is not None:
            out.append({**base, **where, "kind": "missed", "time_s": at, "value": None})
    for kind, key in (("repeat", "repeats"), ("false_alarm", "false_alarms")):
        for item in stream.get(key) or []:
            if isinstance(item, dict) and _time(item.get("time_s")) is not None:
                out.append({**base, "kind": kind, "time_s": _time(item["time_s"]), "value": item.get("value")})
    return out


def annotate_emissions(markers: list[Marker], case: Case | None) -> list[Marker]:
    """Emission markers with ``changed``: a hit's or miss's event is gone or moved (onset or window) since the run."""
    from ..cases.streams import event_seconds

    events: dict[tuple[Any, int], tuple[float, float, float]] = {}
    scored = {m["target"] for m in markers if m["kind"] in ("hit", "missed") and isinstance(m["target"], str)}
    for target in case.targets if case is not None else ():
        if target.stream is not None and target.id in scored:
            for index, seconds in event_seconds(target.stream.events).items():
                events[(target.id, index)] = (round(seconds[0], 9), round(seconds[1], 9), round(seconds[2], 9))
    out = []
    for m in markers:
        changed = False
        if case is not None and m["kind"] in ("hit", "missed"):
            now = events.get((m["target"], m["event"])) if isinstance(m.get("event"), int) else None
            then = (m.get("at"), *(m.get("window") or (None, None)))
            changed = now is None or any(a is None or round(a, 9) != b for a, b in zip(then, now))
        out.append(dict(m, changed=changed))
    return out


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
