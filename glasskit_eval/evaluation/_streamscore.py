"""Scoring one stream: events against timed emissions, in exact rational time (pure, no I/O).

Each event takes the earliest emission inside its closed window whose value matches its
``expect`` (after ``field``, by ``compare``); latency is that emission's time minus ``at``.
Every other emission inside a window is a repeat. An emission outside every window is a false
alarm when it falls in quiet time: the ``quiet`` spans when given (other emissions are then not
scored), else the whole clip outside the windows. The figures are :func:`~glasskit_eval.summary.stream_metrics`'
(percentiles the latency summary's nearest rank).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..cases.model import EventSpec
from ..compare.modes import CompareConfig, infer_mode
from ..compare.values import MissingField, compare_values, extract_field
from ..results import Emission, EventOutcome, StreamMetrics
from ..summary import stream_metrics

Span = tuple[Fraction, Fraction]


@dataclass(frozen=True, slots=True)
class StreamScore:
    events: tuple[EventOutcome, ...]
    repeats: tuple[Emission, ...]
    false_alarms: tuple[Emission, ...]
    #: Emissions outside every window and outside the given quiet spans: not scored.
    unscored: tuple[Emission, ...]
    metrics: StreamMetrics


def matches(value: Any, event: EventSpec, field: str | None, compare: CompareConfig | None) -> bool:
    """Whether an emission's value is the one ``event`` expects (a missing field or a crash: no)."""
    try:
        observed = extract_field(value, field)
    except MissingField:
        return False
    config = event.compare or compare or CompareConfig(mode=infer_mode(event.expect))
    try:
        return compare_values(event.expect, observed, config).passed
    except (ValueError, TypeError):
        return False


def score_stream(events: Sequence[EventSpec], emissions: Sequence[Emission], *, clip_end: Fraction,
                 quiet: Sequence[Span] | None = None, field: str | None = None,
                 compare: CompareConfig | None = None) -> StreamScore:
    """Score ``emissions`` (any order; equal times keep their order) against ``events`` (non-overlapping windows)."""
    ordered = sorted(emissions, key=lambda e: e.time)
    windows = sorted(events, key=lambda e: e.span[0])
    hits: dict[int, Emission] = {}
    repeats: list[Emission] = []
    outside: list[Emission] = []
    for emission in ordered:
        event = _window_of(windows, emission.time)
        if event is None:
            outside.append(emission)
        elif event.index not in hits and matches(emission.value, event, field, compare):
            hits[event.index] = emission
        else:
            repeats.append(emission)
    if quiet is None:
        false_alarms = outside
        unscored: list[Emission] = []
    else:
        false_alarms = [e for e in outside if any(s <= e.time <= t for s, t in quiet)]
        unscored = [e for e in outside if not any(s <= e.time <= t for s, t in quiet)]
    outcomes = tuple(EventOutcome(e.index, e.at, e.span, e.expect, hits.get(e.index))
                     for e in sorted(events, key=lambda e: e.at))
    quiet_s = quiet_seconds(clip_end, [e.span for e in events], quiet)
    return StreamScore(outcomes, tuple(repeats), tuple(false_alarms), tuple(unscored),
                       stream_metrics(outcomes, len(repeats), len(false_alarms), quiet_s))


def false_alarm_at(events: Sequence[EventSpec], quiet: Sequence[Span] | None, time: Fraction) -> bool:
    """Whether an emission at ``time`` is a false alarm: outside every (closed) window, in quiet time.

    :func:`score_stream`'s rule, decidable when the emission is made (the stream engine keeps the
    frames of false alarms as they happen, without holding every emission's frame until scoring).
    """
    if any(start <= time <= end for start, end in (e.span for e in events)):
        return False
    return quiet is None or any(s <= time <= t for s, t in quiet)


def quiet_seconds(clip_end: Fraction, windows: Sequence[Span], quiet: Sequence[Span] | None) -> Fraction:
    """Seconds of quiet time within ``[0, clip_end]``: the given spans, else the clip minus the windows."""
    if quiet is not None:
        return _measure(_clamped(quiet, clip_end))
    return clip_end - _measure(_clamped(windows, clip_end))


def _window_of(windows: Sequence[EventSpec], time: Fraction) -> EventSpec | None:
    # Windows never overlap, so at most one contains ``time``; a handful per stream, a linear scan.
    for event in windows:
        start, end = event.span
        if start <= time <= end:
            return event
        if start > time:
            return None
    return None


def _clamped(spans: Sequence[Span], clip_end: Fraction) -> list[Span]:
    out = []
    for start, end in spans:
        start, end = max(start, Fraction(0)), min(end, clip_end)
        if end > start:
            out.append((start, end))
    return out


def _measure(spans: Sequence[Span]) -> Fraction:
    """Length of the union of closed spans (endpoints have no length)."""
    total = Fraction(0)
    reach: Fraction | None = None
    for start, end in sorted(spans):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total
