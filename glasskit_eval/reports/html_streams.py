"""The HTML report's stream section: per stream (case, target, trial) its figures and timeline data.

The timeline is drawn by the page's script from the data block, as the sample timelines are:
each event's window (detected or missed), each emission coloured by what scoring made of it
(hit, repeat, false alarm), a mark at each missed onset, and the frame at each miss and false
alarm. Those frames are the run's own decode (see :mod:`.stream_frames`); their thumbnails share
the report's image budget with the failed samples' (:func:`~.html_images.allocate`'s ``extra``).
The review page draws the same things from the same JSON report keys (``review.report``).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ..results import StreamResult
from ..summary import RunSummary
from .html_tables import table
from .html_text import clip_time, esc, pct, seconds, value_text
from .stream_frames import StreamKey
from .thumbnails import ThumbKey

#: Emission classes as the page's script numbers them.
HIT, REPEAT, FALSE_ALARM = 0, 1, 2


def streams_of(summary: RunSummary) -> list[StreamResult]:
    return [s for t in summary.run.trials for s in t.streams]


def stream_keys(summary: RunSummary, misses: Mapping[StreamKey, Mapping[int, int]],
                alarms: Mapping[StreamKey, Mapping[Fraction, int]]) -> list[ThumbKey]:
    """The frames the stream section shows, in page order: each stream's misses, then its false alarms."""
    keys: list[ThumbKey] = []
    for s in streams_of(summary):
        key = (s.case, s.target, s.trial, s.arm)
        mine, theirs = misses.get(key, {}), alarms.get(key, {})
        keys += [(s.case, mine[e.index]) for e in s.events if not e.detected and e.index in mine]
        keys += [(s.case, theirs[a.time]) for a in s.false_alarms if a.time in theirs]
    return keys


def _duration(s: StreamResult, durations: Mapping[str, float]) -> float:
    if durations.get(s.case):
        return durations[s.case]
    times = [float(t) for e in s.events for t in e.span] + [float(a.time) for a in (*s.false_alarms, *s.repeats)]
    end = max(times, default=1.0)
    return end * 1.02 if end > 0 else 1.0


def stream_data(summary: RunSummary, *, durations: Mapping[str, float], misses: Mapping[StreamKey, Mapping[int, int]],
                alarms: Mapping[StreamKey, Mapping[Fraction, int]], thumb_of: Mapping[ThumbKey, int]) -> list[dict[str, Any]]:
    """One entry per stream for the page's script.

    ``windows``: [start, end, at, detected, expect, latency or null]; ``emissions``: [time, class,
    value]; ``misses`` (every missed event) and ``alarms`` (the false alarms whose frame the run kept):
    [time, frame index or null, thumbnail index or null, text].
    """
    out = []
    for s in streams_of(summary):
        key = (s.case, s.target, s.trial, s.arm)
        mine, theirs = misses.get(key, {}), alarms.get(key, {})
        windows, emissions, missed, false = [], [], [], []
        for e in s.events:
            latency = None if e.latency is None else float(e.latency)
            windows.append([float(e.span[0]), float(e.span[1]), float(e.at), e.detected, value_text(e.expect), latency])
            if e.emission is not None:
                emissions.append([float(e.emission.time), HIT, value_text(e.emission.value)])
            else:
                frame = mine.get(e.index)
                thumb = None if frame is None else thumb_of.get((s.case, frame))
                missed.append([float(e.at), frame, thumb, f"missed: no {value_text(e.expect)} in "
                               f"[{clip_time(float(e.span[0]))}, {clip_time(float(e.span[1]))}]"])
        emissions += [[float(r.time), REPEAT, value_text(r.value)] for r in s.repeats]
        for a in s.false_alarms:
            emissions.append([float(a.time), FALSE_ALARM, value_text(a.value)])
            frame = theirs.get(a.time)
            if frame is not None:  # a misbehaving adapter's thousands are counted, not listed
                false.append([float(a.time), frame, thumb_of.get((s.case, frame)), f"false alarm: {value_text(a.value)}"])
        emissions.sort(key=lambda e: (e[0], e[1]))
        target = s.target_label or s.target
        out.append({"case": s.case, "target": target if s.arm is None else f"{target} · {s.arm}", "trial": s.trial,
                    "duration": _duration(s, durations), "windows": windows, "emissions": emissions,
                    "misses": missed, "alarms": false, "error": s.error})
    return out


def _ms(value: Fraction | None) -> str:
    return "–" if value is None else seconds(float(value))


def stream_section(summary: RunSummary) -> str:
    """The figures of every stream as a table, and the place the timelines are drawn; empty without streams."""
    streams = streams_of(summary)
    if not streams:
        return ""
    many = summary.run.repeat > 1
    rows = []
    for s in streams:
        m = s.metrics
        per_min = "–" if m.false_alarms_per_min is None else f"{float(m.false_alarms_per_min):.2f}"
        frames = f"{s.frames_delivered}" + (f" ({s.frames_dropped} dropped)" if s.frames_dropped else "")
        arm = "" if s.arm is None else f" · {s.arm}"
        rows.append([esc(s.case), esc((s.target_label or s.target) + arm) + (f" · trial {s.trial}" if many else ""),
                     f"{m.detected}/{m.events}", pct(None if m.recall is None else float(m.recall)), str(m.repeats),
                     str(m.false_alarms), per_min, pct(None if m.precision is None else float(m.precision)),
                     _ms(m.latency_p50), _ms(m.latency_p95), _ms(m.latency_max), frames])
    figures = table("stream-figures", "Streams", ["Case", "Target", "Detected", "Recall", "Repeats", "False alarms",
                                                  "FA/min", "Precision", "Latency p50", "p95", "max", "Frames"],
                    rows, fold=False)
    return (figures + '<section id="streams"><h2>Stream timelines</h2><p class="hint">One strip per stream: '
            "shaded bands are event windows (green detected, red missed, a cross at a missed onset), marks are "
            "emissions: green the hit, grey a repeat, red a false alarm. Below each strip, the frame at each "
            'miss (its onset) and each false alarm (the frame the app answered).</p><div id="stream-root"></div>'
            "</section>")
