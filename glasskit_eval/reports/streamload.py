"""A report's ``streams`` read back into :class:`~glasskit_eval.results.StreamResult` records (pure).

:data:`STREAM_SHAPE` is every key :meth:`StreamResult.to_json` writes, checked by the strict loader
(``report``, ``merge-reports``, ``--baseline``, ``compare``), so damage is refused naming its JSON
path. A time comes back as the simplest rational that the report's float stands for (media times
and typed onsets are small-denominator rationals, so they come back exact, and a latency recomputed
from them is the one the run reported); a report rendered again writes the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ..results import Emission, EventOutcome, StreamMetrics, StreamResult
from ..support import strictjson as sj

_TIME = sj.Time()
_SECONDS = sj.Time(nullable=True)
_EMISSION = sj.Obj({"time_s": _TIME, "value": sj.AnyValue()})
_COUNT = sj.Int()
EVENT_SHAPE = sj.Obj({"at": _TIME, "status": sj.Str(choices=("detected", "missed")), "latency_s": _SECONDS,
                      "emission": sj.Obj({"time_s": _TIME, "value": sj.AnyValue()}, nullable=True)},
                     optional={"index": _COUNT, "expect": sj.AnyValue(), "window_s": sj.Arr(_TIME)})
METRICS_SHAPE = sj.Obj({"events": _COUNT, "detected": _COUNT, "repeats": _COUNT, "false_alarms": _COUNT,
                        "recall": sj.Num(0, 1, nullable=True), "precision": sj.Num(0, 1, nullable=True),
                        "false_alarms_per_min": sj.Num(0, nullable=True), "latency_p50_s": _SECONDS,
                        "latency_p95_s": _SECONDS, "latency_max_s": _SECONDS},
                       optional={"missed": _COUNT, "quiet_s": sj.Seconds()})
#: One entry of a report's ``streams`` list.
STREAM_SHAPE = sj.Obj(
    required={"case": sj.Str(), "target": sj.Str(), "trial": sj.Int(1), "events": sj.Arr(EVENT_SHAPE),
              "false_alarms": sj.Arr(_EMISSION), "repeats": sj.Arr(_EMISSION), "metrics": METRICS_SHAPE},
    optional={"target_label": sj.Str(nullable=True), "pace": sj.Num(0, nullable=True),
              "frames_delivered": _COUNT, "frames_dropped": _COUNT, "error": sj.Str(nullable=True),
              "staleness": sj.Obj({"p50_s": _SECONDS, "p95_s": _SECONDS}, nullable=True),
              "arm": sj.Str()})


def rational(value: float) -> Fraction:
    """The simplest fraction (smallest denominator bound tried first) that is ``value`` as a float."""
    whole = Fraction(value)
    for limit in (10**3, 10**6, 10**9, 10**12):
        found = whole.limit_denominator(limit)
        if float(found) == value:
            return found
    return whole


def _exact(value: Any) -> Fraction | None:
    return None if value is None else rational(value)


def _emission(data: Mapping[str, Any]) -> Emission:
    return Emission(rational(data["time_s"]), data["value"])


def _event(index: int, data: Mapping[str, Any]) -> EventOutcome:
    at = rational(data["at"])
    window = data.get("window_s")
    span = (rational(window[0]), rational(window[1])) if isinstance(window, list) and len(window) == 2 else (at, at)
    emission = data.get("emission")
    return EventOutcome(data.get("index", index), at, span, data.get("expect"),
                        None if emission is None else _emission(emission))


def stream_from_json(data: Mapping[str, Any]) -> StreamResult:
    """One ``streams`` entry as a result; raises :class:`~glasskit_eval.support.strictjson.LoadError`
    naming the JSON path (below the entry) of anything that is not as ``run`` writes it."""
    sj.check(data, STREAM_SHAPE)
    events = tuple(_event(i, e) for i, e in enumerate(data["events"]))
    m = data["metrics"]
    if m["events"] != len(events) or m["detected"] != sum(1 for e in events if e.detected):
        raise sj.LoadError("events and detected do not count the stream's events", "metrics")
    metrics = StreamMetrics(
        events=m["events"], detected=m["detected"], repeats=m["repeats"], false_alarms=m["false_alarms"],
        quiet_s=rational(m.get("quiet_s", 0)), recall=_exact(m["recall"]), precision=_exact(m["precision"]),
        false_alarms_per_min=_exact(m["false_alarms_per_min"]), latency_p50=_exact(m["latency_p50_s"]),
        latency_p95=_exact(m["latency_p95_s"]), latency_max=_exact(m["latency_max_s"]),
        latencies=tuple(sorted(e.latency for e in events if e.latency is not None)))
    stale = data.get("staleness")
    return StreamResult(
        case=data["case"], target=data["target"], target_label=data.get("target_label"), trial=data["trial"],
        events=events, false_alarms=tuple(_emission(e) for e in data["false_alarms"]),
        repeats=tuple(_emission(e) for e in data["repeats"]), metrics=metrics, pace=data.get("pace"),
        frames_delivered=data.get("frames_delivered", 0), frames_dropped=data.get("frames_dropped", 0),
        staleness_p50=None if stale is None else _exact(stale["p50_s"]),
        staleness_p95=None if stale is None else _exact(stale["p95_s"]), error=data.get("error"),
        arm=data.get("arm"))
