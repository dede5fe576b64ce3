"""A finished stream kept as what the adapter emitted, in exact time, and scored again when read.

Checkpoints and the observation cache keep this record rather than the scored result: scoring is
pure, so rescoring a record against its case gives the stream's result exactly (times stay rational;
a report's floats would not). A record is::

    {"emissions": [{"time": "n/d", "value": ...}, ...], "frames_delivered": n, "frames_dropped": n,
     "staleness": ["n/d", "n/d"] | null, "error": str | null}

A checkpoint's record is made from the result (its hits, repeats and false alarms: the emissions
that can count for the same case); the cache's from every emission the stream made, so a later run
with other windows or quiet spans rescores it correctly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from ..cases.model import TargetSpec
from ..results import Emission, StreamResult
from ..support import strictjson as sj
from ._streamscore import score_stream

_EXACT = re.compile(r"-?\d{1,40}/\d{1,40}")

#: The record's shape, checked before any of it is used (a damaged record is never rescored).
RECORD_SHAPE = sj.Obj(
    required={"emissions": sj.Arr(sj.Obj({"time": sj.Str(), "value": sj.AnyValue()})),
              "frames_delivered": sj.Int(), "frames_dropped": sj.Int()},
    optional={"staleness": sj.Arr(sj.Str(), nullable=True), "error": sj.Str(nullable=True)})


class RecordError(ValueError):
    """A stream record that is not one this program writes."""


def exact(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"


def parse_exact(text: str, where: str) -> Fraction:
    if not _EXACT.fullmatch(text) or text.split("/")[1].lstrip("0") == "":
        raise RecordError(f"{where} is not an exact time (n/d), got {text[:40]!r}")
    return Fraction(text)


def emission_records(emissions: Iterable[Emission]) -> list[dict[str, Any]]:
    return [{"time": exact(e.time), "value": e.value} for e in emissions]


def record_of(result: StreamResult) -> dict[str, Any]:
    """A checkpoint's record of ``result``: hits first, so an equal-time repeat stays a repeat."""
    hits = [e.emission for e in result.events if e.emission is not None]
    staleness = None
    if result.staleness_p50 is not None and result.staleness_p95 is not None:
        staleness = [exact(result.staleness_p50), exact(result.staleness_p95)]
    return {"emissions": emission_records([*hits, *result.repeats, *result.false_alarms]),
            "frames_delivered": result.frames_delivered, "frames_dropped": result.frames_dropped,
            "staleness": staleness, "error": result.error}


def emissions_from(record: Mapping[str, Any]) -> list[Emission]:
    try:
        sj.check(record, RECORD_SHAPE)
    except sj.LoadError as exc:
        raise RecordError(str(exc)) from None
    return [Emission(parse_exact(item["time"], f"emissions[{i}].time"), item["value"])
            for i, item in enumerate(record["emissions"])]


def rescore(case: str, spec: TargetSpec, clip_end: Fraction, record: Mapping[str, Any], *, trial: int,
            pace: float | None, arm: str | None = None) -> StreamResult:
    """The stream's result from its record, scored against ``spec`` (RecordError when damaged, or
    when an emission's time is not a time of the video: before its first frame or after its end)."""
    emissions = emissions_from(record)
    for i, emission in enumerate(emissions):
        if not 0 <= emission.time <= clip_end:
            raise RecordError(f"emissions[{i}].time {float(emission.time):g}s is outside the video "
                              f"(0 to {float(clip_end):g}s)")
    stream = spec.stream
    assert stream is not None
    score = score_stream(stream.events, emissions, clip_end=clip_end, quiet=stream.quiet, field=stream.field,
                         compare=stream.compare)
    stale = record.get("staleness")
    p50 = p95 = None
    if stale is not None:
        if len(stale) != 2:
            raise RecordError("staleness must be [p50, p95]")
        p50, p95 = (parse_exact(t, f"staleness[{i}]") for i, t in enumerate(stale))
    return StreamResult(case=case, target=spec.id, target_label=spec.label, trial=trial, events=score.events,
                        false_alarms=score.false_alarms, repeats=score.repeats, metrics=score.metrics, pace=pace,
                        frames_delivered=record["frames_delivered"], frames_dropped=record["frames_dropped"],
                        staleness_p50=p50, staleness_p95=p95, error=record.get("error"), arm=arm)
