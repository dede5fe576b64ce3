"""Stream targets in the console, JUnit and GitHub annotations (pure), from the trials' stream results.

JUnit: one suite per stream (``<case> / <target> stream``), a testcase per event
(``<target> event @ <at>s``, failed when missed) and a failed testcase per false alarm
(``<target> false alarm @ <time>s``). Annotations: one ``::error`` at each missed event's line.
Event lines come from the same :data:`~.locations.Locations` as samples', keyed by
:func:`~.locations.event_key`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ..results import StreamResult
from ..summary import RunSummary
from .locations import Locations, event_key, relative_path
from .tables import compact, pct, table, time_label

WIDTH = 100


def _streams(summary: RunSummary) -> list[StreamResult]:
    return [s for t in summary.run.trials for s in t.streams]


def _named(s: StreamResult) -> str:
    """The stream's target, and its arm in a run with arms."""
    return s.target if s.arm is None else f"{s.target} [{s.arm}]"


def _ms(value: Fraction | None) -> str:
    return "-" if value is None else f"{float(value) * 1000:.0f}ms"


def stream_table(summary: RunSummary) -> str | None:
    """The console table of every stream (None when the run has no stream targets)."""
    streams = _streams(summary)
    if not streams:
        return None
    many = len(summary.run.trials) > 1
    rows = []
    for s in streams:
        m = s.metrics
        per_min = "-" if m.false_alarms_per_min is None else f"{float(m.false_alarms_per_min):.2f}"
        frames = str(s.frames_delivered) + (f" (-{s.frames_dropped})" if s.frames_dropped else "")
        rows.append([s.case, _named(s) + (f" [trial {s.trial}]" if many else ""), f"{m.detected}/{m.events}",
                     pct(None if m.recall is None else float(m.recall)), str(m.repeats), str(m.false_alarms),
                     per_min, _ms(m.latency_p50), _ms(m.latency_p95), _ms(m.latency_max), frames])
    return table("Streams", ["Case", "Target", "Detected", "Recall", "Repeats", "False alarms", "FA/min",
                             "Latency p50", "p95", "max", "Frames"], rows,
                 [False, False, True, True, True, True, True, True, True, True, True], width=WIDTH)


def junit_stream_suites(root: ET.Element, summary: RunSummary, locations: Locations, base: str,
                        text: Callable[[str], str]) -> tuple[int, int]:
    """Append the stream suites to ``root``; returns (testcases, failures) to add to its totals."""
    tests = failures = 0
    many = len(summary.run.trials) > 1
    for s in _streams(summary):
        name = f"{s.case} / {_named(s)} stream" + (f" [trial {s.trial}]" if many else "")
        suite = ET.SubElement(root, "testsuite", name=text(name))
        missed = [e for e in s.events if not e.detected]
        count = len(s.events) + len(s.false_alarms)
        failed = len(missed) + len(s.false_alarms)
        for key, value in (("tests", count), ("failures", failed), ("errors", 0), ("skipped", 0)):
            suite.set(key, str(value))
        suite.set("time", "0.000")
        for event in s.events:
            case = ET.SubElement(suite, "testcase", name=text(f"{s.target} event @ {time_label(float(event.at))}s"),
                                 classname=text(s.case), time="0.000")
            where = locations.get(event_key(s.case, s.target, event.index))
            if where is not None:
                case.set("file", text(relative_path(where.path, base)))
                if where.line is not None:
                    case.set("line", str(where.line))
            if not event.detected:
                message = (f"missed: no {compact(event.expect)} in [{time_label(float(event.span[0]))}, "
                           f"{time_label(float(event.span[1]))}]s")
                failure = ET.SubElement(case, "failure", message=text(message), type="missed")
                failure.text = text(message) + "\n"
        for alarm in s.false_alarms:
            case = ET.SubElement(suite, "testcase", name=text(f"{s.target} false alarm @ {time_label(float(alarm.time))}s"),
                                 classname=text(s.case), time="0.000")
            message = f"false alarm: {compact(alarm.value)} in quiet time"
            failure = ET.SubElement(case, "failure", message=text(message), type="false_alarm")
            failure.text = text(message) + "\n"
        tests += count
        failures += failed
    return tests, failures


def missed_event_annotations(summary: RunSummary, locations: Locations, workspace: str,
                             command: Callable[..., str]) -> list[str]:
    """One ``::error`` per missed event (first trial it was missed in), at the event's line."""
    seen: set[tuple[str, str, int]] = set()
    lines = []
    for s in _streams(summary):
        for event in s.events:
            key = (s.case, s.target, event.index)
            if event.detected or key in seen:
                continue
            seen.add(key)
            where = locations.get(event_key(*key))
            file = None if where is None else relative_path(where.path, workspace)
            line = None if where is None or where.line is None else str(where.line)
            at = time_label(float(event.at))
            message = (f"no emission matching {compact(event.expect)} in the window [{time_label(float(event.span[0]))}, "
                       f"{time_label(float(event.span[1]))}]s (trial {s.trial})")
            lines.append(command("error", message, file=file, line=line,
                                 title=f"{s.case} / {s.target} event @ {at}s missed"))
    return lines


def stream_stability(summary: RunSummary) -> list[dict[str, Any]]:
    """Each event's detections across the trials (``--repeat``), in first-seen order.

    An event is flaky when some trials detected it and others missed it; a stream that stopped on an
    adapter error in a trial counts that trial as a miss.
    """
    seen: dict[tuple[str, str, int, str | None], dict[str, Any]] = {}
    for s in _streams(summary):
        for event in s.events:
            entry = seen.setdefault((s.case, s.target, event.index, s.arm), {
                "case": s.case, "target": s.target, "index": event.index, "at": float(event.at),
                "detected_trials": 0, "trials": 0} | ({"arm": s.arm} if s.arm is not None else {}))
            entry["trials"] += 1
            entry["detected_trials"] += event.detected
    for entry in seen.values():
        entry["detection_rate"] = entry["detected_trials"] / entry["trials"]
        entry["flaky"] = 0 < entry["detected_trials"] < entry["trials"]
    return list(seen.values())


def stream_stability_table(summary: RunSummary) -> str | None:
    """With ``--repeat``: the events not detected in every trial (flaky, or missed every time)."""
    if len(summary.run.trials) < 2:
        return None
    rows = [[e["case"], e["target"] + (f" [{e['arm']}]" if "arm" in e else ""), f"{time_label(e['at'])}s", f"{e['detected_trials']}/{e['trials']}",
             "flaky" if e["flaky"] else "missed every trial"]
            for e in stream_stability(summary) if e["detected_trials"] < e["trials"]]
    if not rows:
        return None
    return table("Unstable and missed events", ["Case", "Target", "At", "Detected", "Finding"], rows,
                 [False, False, True, True, False], width=WIDTH)
