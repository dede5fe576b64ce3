"""Streams against a baseline report: each event's detection and latency, each stream's false alarms (pure).

Events are matched by (case, target, ``at``), like samples by time (an event added earlier in a
target does not renumber the others). With ``--repeat`` an event counts as detected only when every
trial detected it (a flaky event counts as missed on either side, as a flaky sample counts as
failing); its latency is the mean over the trials that detected it. A detected->missed event is a
regression (``--fail-on-regression``); missed->detected and latency changes are reported. False
alarms are compared per stream (case, target) as the mean count per trial.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..results import StreamResult
from ..statistics.descriptive import mean
from .tables import WIDTH, ms, table, time_label

EVENT_KINDS = ("detected_to_missed", "missed_to_detected", "latency_changed", "added", "removed")
REGRESSION = "detected_to_missed"

EventKey = tuple[str, str, float]


@dataclass(frozen=True, slots=True)
class EventSide:
    """One event on one side: detected in every trial, and its mean latency over the detecting trials."""

    detected: bool
    detected_trials: int
    trials: int
    latency_s: float | None


@dataclass(frozen=True, slots=True)
class EventChange:
    kind: str
    case: str
    target: str
    at: float
    before: EventSide | None
    after: EventSide | None

    @property
    def latency_change_s(self) -> float | None:
        if self.before is None or self.after is None or None in (self.before.latency_s, self.after.latency_s):
            return None
        assert self.before.latency_s is not None and self.after.latency_s is not None
        return self.after.latency_s - self.before.latency_s

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "baseline_detected": None if self.before is None else self.before.detected,
                "baseline_latency_s": None if self.before is None else self.before.latency_s,
                "case": self.case, "detected": None if self.after is None else self.after.detected,
                "kind": self.kind, "latency_change_s": self.latency_change_s,
                "latency_s": None if self.after is None else self.after.latency_s, "target": self.target}


@dataclass(frozen=True, slots=True)
class AlarmChange:
    """A stream's false alarms per trial (mean) on both sides."""

    case: str
    target: str
    before: float
    after: float

    def to_json(self) -> dict[str, Any]:
        return {"baseline_false_alarms": self.before, "case": self.case, "change": self.after - self.before,
                "false_alarms": self.after, "target": self.target}


@dataclass(frozen=True, slots=True)
class StreamDiff:
    events: tuple[EventChange, ...]
    #: Every stream on both sides, changed or not (a per-stream figure, not a list of changes).
    alarms: tuple[AlarmChange, ...]
    matched_events: int

    def count(self, kind: str) -> int:
        return sum(1 for c in self.events if c.kind == kind)

    def counts(self) -> dict[str, int]:
        return {kind: self.count(kind) for kind in EVENT_KINDS}

    @property
    def regressions(self) -> int:
        return self.count(REGRESSION)

    def to_json(self) -> dict[str, Any]:
        return {"counts": self.counts(), "events": [c.to_json() for c in self.events],
                "false_alarms": [a.to_json() for a in self.alarms], "matched_events": self.matched_events,
                "regressions": self.regressions}


def event_sides(streams: Iterable[StreamResult]) -> dict[EventKey, EventSide]:
    found: dict[EventKey, list[float | None]] = {}
    for s in streams:
        for event in s.events:
            key = (s.case, s.target, round(float(event.at), 9))
            found.setdefault(key, []).append(None if event.latency is None else float(event.latency))
    out = {}
    for key, latencies in found.items():
        hits = [x for x in latencies if x is not None]
        out[key] = EventSide(len(hits) == len(latencies), len(hits), len(latencies),
                             mean(hits))
    return out


def _alarms(streams: Iterable[StreamResult]) -> dict[tuple[str, str], float]:
    found: dict[tuple[str, str], list[int]] = {}
    for s in streams:
        found.setdefault((s.case, s.target), []).append(s.metrics.false_alarms)
    return {key: sum(counts) / len(counts) for key, counts in found.items()}


def stream_diff(before: Iterable[StreamResult], after: Iterable[StreamResult]) -> StreamDiff | None:
    """The streams' changes; None when neither side has streams (reports keep their keys)."""
    before, after = list(before), list(after)
    if not before and not after:
        return None
    old, new = event_sides(before), event_sides(after)
    changes: list[EventChange] = []
    matched = 0
    for key, now in new.items():
        was = old.get(key)
        if was is None:
            changes.append(EventChange("added", *key, None, now))
            continue
        matched += 1
        if was.detected and not now.detected:
            changes.append(EventChange("detected_to_missed", *key, was, now))
        elif now.detected and not was.detected:
            changes.append(EventChange("missed_to_detected", *key, was, now))
        elif was.latency_s != now.latency_s and None not in (was.latency_s, now.latency_s):
            changes.append(EventChange("latency_changed", *key, was, now))
    changes += [EventChange("removed", *key, was, None) for key, was in old.items() if key not in new]
    order = {kind: i for i, kind in enumerate(EVENT_KINDS)}
    changes.sort(key=lambda c: order[c.kind])
    old_alarms, new_alarms = _alarms(before), _alarms(after)
    alarms = tuple(AlarmChange(*key, old_alarms[key], count) for key, count in new_alarms.items() if key in old_alarms)
    return StreamDiff(tuple(changes), alarms, matched)


def _yes(side: EventSide | None) -> str:
    if side is None:
        return "-"
    word = "detected" if side.detected else "missed"
    return word if side.trials == 1 else f"{word} ({side.detected_trials}/{side.trials})"


def event_rows(d: StreamDiff) -> list[list[str]]:
    return [[c.kind, c.case, c.target, f"{time_label(c.at)}s", _yes(c.before), _yes(c.after),
             ms(c.before.latency_s if c.before else None), ms(c.after.latency_s if c.after else None),
             ms(c.latency_change_s, "+")] for c in d.events]


EVENT_HEADERS = ["Change", "Case", "Target", "At", "Before", "After", "Latency before", "after", "change"]


def alarm_rows(d: StreamDiff) -> list[list[str]]:
    return [[a.case, a.target, f"{a.before:g}", f"{a.after:g}", f"{a.after - a.before:+g}"]
            for a in d.alarms if a.after != a.before]


ALARM_HEADERS = ["Case", "Target", "False alarms before", "after", "change"]


def summary_line(d: StreamDiff) -> str:
    counts = ", ".join(f"{n} {kind.replace('_to_', '->').replace('_', ' ')}" for kind, n in d.counts().items() if n)
    changed = sum(1 for a in d.alarms if a.after != a.before)
    alarms = f"; false alarms changed in {changed} of {len(d.alarms)} streams" if d.alarms else ""
    return f"Streams: {d.matched_events} events matched; {counts or 'no changes'}{alarms}"


def _latency_change(c: EventChange) -> str:
    """``0ms -> 200ms (+200ms)``; one side alone when the other has none."""
    before = c.before.latency_s if c.before else None
    after = c.after.latency_s if c.after else None
    if before is None and after is None:
        return "-"
    change = c.latency_change_s
    return f"{ms(before)} -> {ms(after)}" + (f" ({ms(change, '+')})" if change is not None else "")


def console_event_rows(d: StreamDiff) -> list[list[str]]:
    """The event changes within the console's 80 columns: one ``case/target`` column, latency as one change."""
    return [[c.kind.replace("_to_", "->").replace("_", " "), f"{c.case}/{c.target}", f"{time_label(c.at)}s",
             _yes(c.before), _yes(c.after), _latency_change(c)] for c in d.events]


def format_stream_diff(d: StreamDiff) -> str:
    parts = [summary_line(d)]
    if d.events:
        parts.append(table("Event changes against the baseline",
                           ["Change", "Stream", "At", "Before", "After", "Latency"], console_event_rows(d),
                           [False, False, True, False, False, False], width=WIDTH))
    rows = alarm_rows(d)
    if rows:
        parts.append(table("False alarm changes against the baseline", ALARM_HEADERS, rows,
                           [False, False, True, True, True], width=WIDTH))
    return "\n\n".join(parts)
