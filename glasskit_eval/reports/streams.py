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
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..results import StreamMetrics, StreamResult
from ..summary import RunSummary
from .locations import Locations, event_key, relative_path
from .tables import WIDTH as CONSOLE_WIDTH
from .tables import compact, pct, plural, table, time_label


def _streams(summary: RunSummary) -> list[StreamResult]:
    return [s for t in summary.run.trials for s in t.streams]


def stream_name(target: str, arm: str | None) -> str:
    """A stream's target, and its arm in a run with arms (``alert [jpeg]``)."""
    return target if arm is None else f"{target} [{arm}]"


def _label(s: StreamResult, many: bool) -> str:
    """``case/target [arm]``, with ``[trial N]`` when the run has several trials."""
    return f"{s.case}/{stream_name(s.target, s.arm)}" + (f" [trial {s.trial}]" if many else "")


def _latencies(m: StreamMetrics) -> str:
    """``120/310ms`` (p50/p95), or ``1.2/3.4s`` once a figure reaches ten seconds."""
    if m.latency_p50 is None or m.latency_p95 is None:
        return "-"
    p50, p95 = float(m.latency_p50), float(m.latency_p95)
    if p95 >= 10:
        return f"{p50:.1f}/{p95:.1f}s"
    return f"{p50 * 1000:.0f}/{p95 * 1000:.0f}ms"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(1, width - 1)] + "…"


def _fit_name(text: str, width: int) -> str:
    """Cut in the middle: a ``case/target`` keeps the start of its case and the end of its target."""
    if len(text) <= width:
        return text
    head = (width - 1 + 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


#: The narrowest the Stream column gets before a run's widest table would pass :data:`~.tables.WIDTH`.
_MIN_NAME = 12


def stream_table(summary: RunSummary, width: int = CONSOLE_WIDTH) -> str | None:
    """The console table of every stream, within ``width`` columns (None when the run has no stream targets).

    One ``case/target`` column (cut with ``…`` only when it alone would pass ``width``); latencies
    as p50/p95 (the maximum is in the JSON and HTML reports).
    """
    streams = _streams(summary)
    if not streams:
        return None
    headers = list(STREAM_ROW_HEADERS)
    rows = stream_rows(summary)
    if all(row[3] == "0" for row in rows):
        # No stream repeated itself: the column would say nothing, and its width goes to the names.
        del headers[3]
        for row in rows:
            del row[3]
    rest = sum(max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers) if i) + 2 * (len(headers) - 1)
    room = max(_MIN_NAME, width - rest)
    for row in rows:
        row[0] = _fit_name(row[0], room)
    return table("Streams", headers, rows, [False] + [True] * (len(headers) - 1))


def rounded(value: float) -> str:
    """A rate as people read it: three significant figures, never ``187.97826086956522`` (``188``, ``2.31``)."""
    if value == 0 or abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


#: Missed events and false alarms listed under the Streams table, at most (the rest are in the reports).
STREAM_FINDINGS = 20


@dataclass(frozen=True, slots=True)
class Finding:
    """A missed event, a false alarm or a stopped stream, at its media time (every reporter lists the same)."""

    stream: str
    time: Fraction | None
    kind: str
    detail: str

    @property
    def when(self) -> str:
        return "-" if self.time is None else f"{time_label(float(self.time))}s"


def findings(summary: RunSummary) -> list[Finding]:
    """Each stream's misses and false alarms in time order (a stopped stream's error first), streams in run order."""
    many = len(summary.run.trials) > 1
    out: list[Finding] = []
    for s in _streams(summary):
        name = _label(s, many)
        found = [Finding(name, event.at, "missed event",
                         f"no {compact(event.expect)} in [{time_label(float(event.span[0]))}, "
                         f"{time_label(float(event.span[1]))}]s") for event in s.events if not event.detected]
        found += [Finding(name, alarm.time, "false alarm", compact(alarm.value)) for alarm in s.false_alarms]
        found.sort(key=lambda f: f.time or 0)
        if s.error:
            found.insert(0, Finding(name, None, "stopped", s.error))
        out += found
    return out


def stream_findings(summary: RunSummary, width: int = CONSOLE_WIDTH) -> list[str]:
    """Each missed event and false alarm with its time, so the console says when, not only how many."""
    lines = [_fit(f"  {f.stream}  {f.kind} @ {f.when}: {f.detail}" if f.time is not None
                  else f"  {f.stream}  {f.kind}: {f.detail}", width) for f in findings(summary)]
    if not lines:
        return []
    shown = lines[:STREAM_FINDINGS]
    if len(lines) > len(shown):
        shown.append(f"  ... and {len(lines) - len(shown)} more (JSON report: streams)")
    return ["Missed events and false alarms", *shown]


def stream_rows(summary: RunSummary) -> list[list[str]]:
    """One row per stream, under :data:`STREAM_ROW_HEADERS` (the console's table and the job summary's)."""
    many = len(summary.run.trials) > 1
    rows = []
    for s in _streams(summary):
        m = s.metrics
        per_min = "" if m.false_alarms_per_min is None else f" ({rounded(float(m.false_alarms_per_min))}/min)"
        frames = str(s.frames_delivered) + (f" (-{s.frames_dropped})" if s.frames_dropped else "")
        rows.append([_label(s, many), f"{m.detected}/{m.events}",
                     pct(None if m.recall is None else float(m.recall)), str(m.repeats),
                     f"{m.false_alarms}{per_min}", _latencies(m), frames])
    return rows


STREAM_ROW_HEADERS = ["Stream", "Detected", "Recall", "Repeats", "False alarms", "Latency p50/p95", "Frames"]


@dataclass(frozen=True, slots=True)
class EventCounts:
    """What a run's streams were judged on, over every trial: for the verdict line and the headline."""

    streams: int
    events: int
    missed: int
    false_alarms: int
    stopped: int
    frames: int

    @property
    def bad(self) -> bool:
        return bool(self.missed or self.false_alarms or self.stopped)

    def text(self) -> str:
        """``1 of 4 events missed, 1 false alarm`` (``4 of 4 events detected`` when none was missed)."""
        noun = "event" if self.events == 1 else "events"
        parts = [f"{self.missed} of {self.events} {noun} missed" if self.missed
                 else f"{self.events} of {self.events} {noun} detected"]
        if self.false_alarms:
            parts.append(plural(self.false_alarms, "false alarm"))
        if self.stopped:
            parts.append(f"{plural(self.stopped, 'stream')} stopped")
        return ", ".join(parts)


#: Gates that judge streams (their names end so, whatever the target or arm prefix).
STREAM_GATE_SUFFIXES = ("_min_recall", "_max_false_alarms_per_min", "_max_detection_latency_p95", "stream_errors",
                        "baseline_regressions")


def streams_gated(summary: RunSummary) -> bool:
    """Whether any gate of the run judges its streams."""
    names = [g.name for t in summary.run.trials for g in t.gates] + [g.name for g in summary.run.gates]
    return any(name.endswith(STREAM_GATE_SUFFIXES) for name in names)


def event_counts(summary: RunSummary) -> EventCounts | None:
    """The run's streams counted (None when it has none); with arms the control's alone, as every headline figure."""
    streams = [s for s in _streams(summary) if summary.arm is None or s.arm == summary.arm]
    if not streams:
        return None
    return EventCounts(len(streams), sum(s.metrics.events for s in streams),
                       sum(s.metrics.missed for s in streams), sum(s.metrics.false_alarms for s in streams),
                       sum(1 for s in streams if s.error), sum(s.frames_delivered for s in streams))


def junit_stream_suites(root: ET.Element, summary: RunSummary, locations: Locations, base: str,
                        text: Callable[[str], str]) -> tuple[int, int]:
    """Append the stream suites to ``root``; returns (testcases, failures) to add to its totals."""
    tests = failures = 0
    many = len(summary.run.trials) > 1
    for s in _streams(summary):
        name = f"{s.case} / {stream_name(s.target, s.arm)} stream" + (f" [trial {s.trial}]" if many else "")
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
    rows = [[e["case"], stream_name(e["target"], e.get("arm")), f"{time_label(e['at'])}s", f"{e['detected_trials']}/{e['trials']}",
             "flaky" if e["flaky"] else "missed every trial"]
            for e in stream_stability(summary) if e["detected_trials"] < e["trials"]]
    if not rows:
        return None
    return table("Unstable and missed events", ["Case", "Target", "At", "Detected", "Finding"], rows,
                 [False, False, True, True, False], width=CONSOLE_WIDTH)
