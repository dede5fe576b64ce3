"""Stream targets in case files: ``events`` (with ``stream`` and ``quiet``) parsed into a :class:`StreamSpec`.

A target is a stream target when it has ``events`` instead of ``samples``. Every problem is
located like a sample block's; rules that relate two entries (overlapping windows, quiet
time over a window) name the other entry's line too, so both can be found from one message.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from ..support.jsonvalues import type_name
from ..support.timevalues import format_time, to_fraction
from ..yamltext.source import PathKey, format_path
from .checks import UNSET, Checker
from .model import DEFAULT_WINDOW, EventSpec, StreamSpec

#: Keys a target may have only when it is a stream target.
STREAM_TARGET_KEYS = {"stream", "events", "quiet"}
_STREAM_KEYS = {"every_s", "window"}
_EVENT_KEYS = {"at", "expect", "window", "compare", "comment"}


def parse_stream(c: Checker, path: PathKey, mapping: dict[str, Any], defaults: dict[str, Any],
                 allow_empty: bool) -> StreamSpec | None:
    """The stream of target ``mapping`` (at ``path``), or None with its problems added to ``c``."""
    before = len(c.problems)
    if "samples" in mapping:
        c.add((*path, "events"), "a target has either `samples` (one frame at a time) or `events` (a stream "
              "fed in order), not both; move the samples to a target of their own")
    if defaults.get("clip") is not None and "clip" in (_own_defaults(mapping) or {}):
        c.add((*path, "sample_defaults", "clip"), "clip applies to samples; a stream target is fed every "
              "frame (or the stream.every_s grid) in order, so remove clip here")
    every_s: Fraction | None = None
    window = DEFAULT_WINDOW
    raw_stream = mapping.get("stream")
    if raw_stream is not None:
        spath = (*path, "stream")
        stream = c.section(raw_stream, spath, "stream", _STREAM_KEYS)
        if stream is not None:
            if stream.get("every_s") is not None:
                every_s = c.positive_interval(stream["every_s"], (*spath, "every_s"))
            if stream.get("window") is not None:
                window = _window(c, stream["window"], (*spath, "window")) or window
    events: list[EventSpec] = []
    raw_events = mapping.get("events", UNSET)
    epath = (*path, "events")
    if raw_events is None or raw_events is UNSET:
        c.add(epath, "events must be a list of {at, expect} entries")
    elif not isinstance(raw_events, list):
        c.add(epath, f"events must be a list, got {type_name(raw_events)}")
    else:
        if not raw_events and not allow_empty:
            c.add(epath, "events is empty; add an event or pass --allow-empty")
        for i, raw in enumerate(raw_events):
            event = _event(c, i, raw, (*epath, i), window, defaults)
            if event is not None:
                events.append(event)
    times = _Times(events)
    if isinstance(raw_events, list):
        _check_window_overlaps(c, events, times, epath)
    quiet = None
    if mapping.get("quiet") is not None:
        quiet = _quiet(c, mapping["quiet"], (*path, "quiet"))
        if quiet is not None:
            _check_quiet_windows(c, quiet, events, times.with_quiet(quiet), path)
    if len(c.problems) > before:
        return None
    by_onset = sorted(range(len(events)), key=times.ats.__getitem__)  # stable: file order among equal onsets
    return StreamSpec(every_s=every_s, events=tuple(events[k] for k in by_onset), quiet=quiet,
                      field=defaults.get("field"), compare=defaults.get("compare"))


class _Times:
    """The events' onsets and windows in media time (and the quiet spans) as exact numbers that compare fast.

    Integers of a common 1/``scale`` s where the times allow one (every decimal a YAML file
    holds does), else the Fractions themselves: a target may have 100,000 events, and one
    Fraction sum or comparison costs a microsecond or two. Either way every comparison is exact.
    """

    def __init__(self, events: list[EventSpec], quiet: tuple[tuple[Fraction, Fraction], ...] = ()) -> None:
        self.events = events
        windows = {id(e.window): e.window for e in events}
        self.scale = _common_denominator(itertools.chain((e.at for e in events), *windows.values(), *quiet))
        self.quiet: list[tuple[Any, Any]] = [(self.exact(a), self.exact(b)) for a, b in quiet]
        if self.scale is None:
            self.ats: list[Any] = [e.at for e in events]
            self.spans: list[tuple[Any, Any]] = [e.span for e in events]
            return
        edges = {key: (self.exact(a), self.exact(b)) for key, (a, b) in windows.items()}
        self.ats = [self.exact(e.at) for e in events]
        self.spans = [(at + edges[id(e.window)][0], at + edges[id(e.window)][1]) for at, e in zip(self.ats, events)]

    def exact(self, value: Fraction) -> Any:
        return value if self.scale is None else value.numerator * (self.scale // value.denominator)

    def with_quiet(self, quiet: tuple[tuple[Fraction, Fraction], ...]) -> _Times:
        """These times with the quiet spans on the same scale."""
        if self.scale is not None and any(self.scale % t.denominator for span in quiet for t in span):
            return _Times(self.events, quiet)
        self.quiet = [(self.exact(a), self.exact(b)) for a, b in quiet]
        return self


def event_seconds(events: tuple[EventSpec, ...]) -> dict[int, tuple[float, float, float]]:
    """Each event's onset and window in media time as floats, by index: ``float()`` of the exact times."""
    times = _Times(list(events))
    if times.scale is None:
        return {e.index: (float(e.at), float(e.span[0]), float(e.span[1])) for e in events}
    scale = times.scale
    # An integer quotient is correctly rounded, as float() of the reduced Fraction is.
    return {e.index: (at / scale, start / scale, end / scale)
            for e, at, (start, end) in zip(events, times.ats, times.spans)}


#: Past this many bits a common denominator costs more than the Fractions it stands for.
_MAX_SCALE_BITS = 256


def _common_denominator(values: Iterable[Fraction]) -> int | None:
    scale = 1
    for denominator in {v.denominator for v in values}:
        scale = math.lcm(scale, denominator)
        if scale.bit_length() > _MAX_SCALE_BITS:
            return None
    return scale


def stream_keys_without_events(c: Checker, path: PathKey, mapping: dict[str, Any]) -> None:
    """``stream`` or ``quiet`` on a target without ``events``: say what they belong to."""
    for key in ("stream", "quiet"):
        if key in mapping:
            c.add((*path, key), f"{key} applies to stream targets; add `events:` (onsets to detect) or "
                  f"remove {key}")


def _own_defaults(mapping: dict[str, Any]) -> dict[str, Any] | None:
    value = mapping.get("sample_defaults")
    return value if isinstance(value, dict) else None


def _seconds(c: Checker, value: Any, path: PathKey, what: str) -> Fraction | None:
    """A finite number of seconds, negative allowed (window edges are relative to onset)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        c.add(path, f"{what} must be a finite number of seconds, got {type_name(value)}")
        return None
    if isinstance(value, int) and abs(value) > 10**15:
        c.add(path, f"{what} must be a plausible number of seconds, got {value}")
        return None
    return to_fraction(value)


def _window(c: Checker, value: Any, path: PathKey) -> tuple[Fraction, Fraction] | None:
    if not isinstance(value, list) or len(value) != 2:
        c.add(path, "window must be a two-element list [a, b] of seconds relative to the event's `at` "
              "(for example [-0.2, 1.5])")
        return None
    a = _seconds(c, value[0], (*path, 0), "window start")
    b = _seconds(c, value[1], (*path, 1), "window end")
    if a is None or b is None:
        return None
    if b <= a:
        c.add(path, f"window end must be greater than its start, got [{value[0]}, {value[1]}]")
        return None
    return a, b


def _event(c: Checker, index: int, raw: Any, path: PathKey, window: tuple[Fraction, Fraction],
           defaults: dict[str, Any]) -> EventSpec | None:
    mapping = c.section(raw, path, "an event", _EVENT_KEYS)
    if mapping is None:
        return None
    before = len(c.problems)
    at = None
    if "at" not in mapping:
        c.add(path, "an event needs `at:`, its onset in seconds")
    else:
        at = c.time(mapping["at"], (*path, "at"), "at")
    if mapping.get("window") is not None:
        window = _window(c, mapping["window"], (*path, "window")) or window
    has_expect, expect = c.expectation(mapping, path)
    compare = c.given(mapping, "compare", c.compare, path, defaults.get("compare"))
    if has_expect and compare is not None:
        c.expect_fits(compare.mode, expect, (*path, "expect"))
    comment = None
    if mapping.get("comment") is not None:
        comment = c.text(mapping["comment"], (*path, "comment"), "comment")
    if len(c.problems) > before or at is None:
        return None
    return EventSpec(index=index, at=at, window=window, has_expect=has_expect, expect=expect,
                     compare=compare if "compare" in mapping else None, comment=comment)


def _quiet(c: Checker, value: Any, path: PathKey) -> tuple[tuple[Fraction, Fraction], ...] | None:
    if not isinstance(value, list):
        c.add(path, f"quiet must be a list of [start, end] spans in seconds, got {type_name(value)}")
        return None
    before = len(c.problems)
    spans: list[tuple[Fraction, Fraction, int]] = []
    for i, raw in enumerate(value):
        qpath = (*path, i)
        if not isinstance(raw, list) or len(raw) != 2:
            c.add(qpath, "each quiet span must be a two-element list [start, end] in seconds")
            continue
        start = c.time(raw[0], (*qpath, 0), "quiet start")
        end = c.time(raw[1], (*qpath, 1), "quiet end")
        if start is None or end is None:
            continue
        if end <= start:
            c.add(qpath, f"quiet span end must be greater than its start, got [{raw[0]}, {raw[1]}]")
            continue
        spans.append((start, end, i))
    ordered = sorted(spans)
    for (_s1, e1, i1), (s2, _e2, i2) in itertools.pairwise(ordered):
        if s2 < e1:
            later, earlier = max(i1, i2), min(i1, i2)
            c.add((*path, later), f"quiet[{later}] overlaps quiet[{earlier}] (line {c.doc.line((*path, earlier))}); "
                  "merge them into one span")
    if len(c.problems) > before:
        return None
    return tuple((s, e) for s, e, _i in ordered)


def _describe_span(span: tuple[Fraction, Fraction]) -> str:
    return f"[{format_time(span[0])}, {format_time(span[1])}]s"


def _check_window_overlaps(c: Checker, events: list[EventSpec], times: _Times, path: PathKey) -> None:
    # Closed windows: touching ends overlap (one emission at that instant could detect both).
    # Sorted by start, then file order (the sort is stable; events are in file order).
    spans = times.spans
    reach: int | None = None
    for k in sorted(range(len(events)), key=lambda k: spans[k][0]):
        if reach is not None and spans[k][0] <= spans[reach][1]:
            first, second = sorted((events[reach], events[k]), key=lambda e: e.index)
            other = (*path, first.index)
            c.add((*path, second.index), f"the window {_describe_span(second.span)} of events[{second.index}] "
                  f"overlaps the window {_describe_span(first.span)} of events[{first.index}] "
                  f"({format_path(other)}, line {c.doc.line(other)}); windows of one target may not overlap "
                  "(both ends are closed): narrow a window or move an event")
        if reach is None or spans[k][1] > spans[reach][1]:
            reach = k


def _check_quiet_windows(c: Checker, quiet: tuple[tuple[Fraction, Fraction], ...], events: list[EventSpec],
                         times: _Times, path: PathKey) -> None:
    raw = c.doc.value
    written = _written_quiet(raw, path)
    for span, (quiet_start, quiet_end) in zip(quiet, times.quiet):
        index = written.get(span, 0)
        for event, (start, end) in zip(events, times.spans):
            if quiet_start <= end and start <= quiet_end:
                other = (*path, "events", event.index)
                c.add((*path, "quiet", index), f"quiet span {_describe_span(span)} overlaps the window "
                      f"{_describe_span(event.span)} of events[{event.index}] ({format_path(other)}, line "
                      f"{c.doc.line(other)}); quiet time may not overlap a window (both are closed): shorten "
                      "the span")
                break


def _written_quiet(root: Any, path: PathKey) -> dict[tuple[Fraction, Fraction], int]:
    """Each parsed quiet span's position in the file (spans are sorted once parsed)."""
    node = root
    for part in (*path, "quiet"):
        node = node[part]
    out: dict[tuple[Fraction, Fraction], int] = {}
    for i, item in enumerate(node):
        start, end = to_fraction(item[0]), to_fraction(item[1])
        if start is not None and end is not None:
            out.setdefault((start, end), i)
    return out
