"""Results as data: one frozen record per sample attempt, made once and shared by every consumer.

The runner makes each :class:`SampleResult` once; checkpoints, resume, the reporters and the
review page's report overlay read the same record. Control data lives in enums
(:class:`Status`, :class:`ErrorKind`, :class:`TimingMode`); ``reason`` is text for people and is
never parsed back. Keys and values follow the upstream JSON report (``schema_version`` 1) so
existing tooling keeps working; ``frame_index``, ``media_timestamp_s``, ``error_kind``, ``traceback`` and
``clip`` are ours.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import Any

from .support import strictjson as sj
from .support.strictjson import AnyValue, Arr, Bool, Int, LoadError, MapOf, Num, Obj, Str, check


class Status(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    IGNORED = "ignored"
    #: ``run --early-stop`` decided every gate before this sample's turn: no call, no verdict.
    NOT_EVALUATED = "not_evaluated"

    def __str__(self) -> str:
        return self.value


class ErrorKind(str, enum.Enum):
    """Why a result is an error; an adapter error is retried on resume, a comparison error is not."""

    ADAPTER = "adapter"
    COMPARISON = "comparison"
    #: The adapter call ran past ``--timeout`` and was cancelled (resumable, like ADAPTER).
    TIMEOUT = "timeout"

    def __str__(self) -> str:
        return self.value


class TimingMode(str, enum.Enum):
    """How ``evaluation_duration_seconds`` was measured."""

    INDIVIDUAL = "individual"
    #: One ``evaluate_many`` call's duration divided among its samples (upstream's spelling).
    BATCH = "batch_amortized"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object) -> TimingMode | None:
        if value is None:
            return None
        # Checkpoints written before the upstream spelling was adopted say "batch".
        return cls.BATCH if value == "batch" else cls(value)


class ResultFormatError(ValueError):
    """A stored result (checkpoint record, report) that is not a SampleResult."""


@dataclass(frozen=True, slots=True)
class ClipFrames:
    """A clip sample's frames as the adapter got them: requested times and frame indexes, in time order."""

    timestamps: tuple[float, ...]
    frame_indexes: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"timestamps": list(self.timestamps), "frame_indexes": list(self.frame_indexes)}

    @classmethod
    def from_json(cls, data: object) -> ClipFrames:
        if not isinstance(data, Mapping):
            raise ResultFormatError("a result's clip is not an object")
        times, indexes = data.get("timestamps"), data.get("frame_indexes")
        if (not isinstance(times, list) or not isinstance(indexes, list) or len(times) != len(indexes)
                or not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in times)
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in indexes)):
            raise ResultFormatError("a result's clip needs lists timestamps and frame_indexes of one length")
        return cls(tuple(float(t) for t in times), tuple(indexes))

    def anchor_position(self, timestamp_s: float, frame_index: int | None) -> int:
        """The entry of the sample's own time (the anchor): its time is always one of the clip's."""
        return min(range(len(self.timestamps)),
                   key=lambda i: (abs(self.timestamps[i] - timestamp_s), self.frame_indexes[i] != frame_index, i))

    def artifact_path(self, artifact_image: str, position: int) -> Path:
        """Where ``--save-failures`` keeps the frame of entry ``position``: a folder beside the anchor's
        JPEG, the file named by position (zero-padded), requested time and frame index."""
        path = Path(artifact_image)
        width = len(str(len(self.timestamps)))
        name = f"{position:0{width}d}_{self.timestamps[position]:.3f}s_frame{self.frame_indexes[position]}.jpg"
        return path.with_name(path.stem + "_clip") / name


#: Statuses that are no verdict: they count in no pass rate, failure or error.
_UNJUDGED = frozenset({Status.IGNORED, Status.NOT_EVALUATED})


@dataclass(frozen=True, slots=True)
class SampleResult:
    case: str
    target: str
    target_label: str | None
    sample_index: int
    timestamp_s: float
    source: str
    status: Status
    expected: Any
    field: str | None
    compare_mode: str | None
    reason: str
    observed: Any = None
    observed_value: Any = None
    evaluation_duration_seconds: float | None = None
    evaluation_timing_mode: TimingMode | None = None
    frame_index: int | None = None
    media_timestamp_s: float | None = None
    error_kind: ErrorKind | None = None
    artifact_image: str | None = None
    artifact_json: str | None = None
    #: Ours: the traceback of an adapter exception (Python), or the ``stack`` of a command
    #: adapter's error answer.
    traceback: str | None = None
    #: The observation came from ``run --cache`` (judged afresh, not from the adapter).
    cached: bool = False
    #: Adapter calls made for this sample (1 + retries); None when no call was made or the
    #: result predates retries.
    attempts: int | None = None
    #: Numbers the adapter reported for this sample (``input_tokens``, ``output_tokens``,
    #: ``cost``, ...), summed over its attempts; None when nothing was reported.
    usage: dict[str, float] | None = None
    #: A batch sample's whole ``evaluate_many`` call duration (``evaluation_duration_seconds`` is
    #: its amortized share); None for individual calls.
    call_duration_seconds: float | None = None
    #: The arm that made this result (``run --arm``/``--perturb``); None in a run without arms.
    arm: str | None = None
    #: A clip sample's frames (None for single-frame samples, whose reports keep upstream's keys).
    clip: ClipFrames | None = None

    @property
    def evaluated(self) -> bool:
        return self.status not in _UNJUDGED

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.case, self.target, self.sample_index)

    @property
    def resumable_error(self) -> bool:
        """An adapter error: a resume calls the adapter for this sample again."""
        return self.status is Status.ERROR and self.error_kind is not ErrorKind.COMPARISON

    @property
    def judged(self) -> bool:
        """Adapter work a resume reuses: an observation that was judged."""
        return self.status in (Status.PASSED, Status.FAILED) or (
            self.status is Status.ERROR and self.error_kind is ErrorKind.COMPARISON)

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _FIELD_NAMES}
        # Optional fields are left out while unset, so reports of runs without retries or
        # usage keep upstream's exact keys.
        for name in _OPTIONAL:
            if data[name] is None:
                del data[name]
        if self.usage is not None:
            data["usage"] = dict(self.usage)
        if self.clip is not None:
            data["clip"] = self.clip.to_json()
        for name in ("status", "evaluation_timing_mode", "error_kind"):
            value = data[name]
            if value is not None:
                data[name] = value.value
        if not self.cached:
            # Only cache hits carry the key, so reports without --cache stay upstream's shape.
            del data["cached"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SampleResult:
        """Read a stored result; raises :class:`ResultFormatError` (naming the key) for anything else."""
        try:
            check(data, RESULT_SHAPE)
        except LoadError as exc:
            raise ResultFormatError(str(exc)) from None
        values = {name: data[name] for name in _FIELD_NAMES if name in data}
        values["status"] = Status(values["status"])
        values["evaluation_timing_mode"] = TimingMode.parse(values.get("evaluation_timing_mode"))
        kind = values.get("error_kind")
        values["error_kind"] = None if kind is None else ErrorKind(kind)
        usage = values.get("usage")
        if usage is not None:
            values["usage"] = dict(usage)
        clip = values.get("clip")
        if clip is not None:
            values["clip"] = ClipFrames.from_json(clip)
        return cls(**values)


_FIELD_NAMES = tuple(f.name for f in fields(SampleResult))
_OPTIONAL = ("attempts", "usage", "call_duration_seconds", "arm", "clip")
_SECONDS = sj.Seconds(nullable=True)

#: Every key of a stored result (reports, checkpoint records), as :meth:`SampleResult.to_json` writes
#: it; the keys without a default are upstream's and always written. Times and durations are
#: non-negative, indexes and counts non-negative integers.
RESULT_SHAPE = Obj(
    required={"case": Str(), "target": Str(), "target_label": Str(nullable=True), "sample_index": Int(),
              "timestamp_s": sj.Seconds(), "source": Str(), "status": Str(choices=tuple(s.value for s in Status)),
              "expected": AnyValue(), "field": Str(nullable=True), "compare_mode": Str(nullable=True),
              "reason": Str()},
    optional={"observed": AnyValue(), "observed_value": AnyValue(),
              "evaluation_duration_seconds": _SECONDS,
              "evaluation_timing_mode": Str(nullable=True, choices=(*(m.value for m in TimingMode), "batch")),
              "frame_index": Int(nullable=True), "media_timestamp_s": sj.Time(nullable=True),
              "error_kind": Str(nullable=True, choices=tuple(k.value for k in ErrorKind)),
              "artifact_image": Str(nullable=True), "artifact_json": Str(nullable=True),
              "traceback": Str(nullable=True), "cached": Bool(), "attempts": Int(nullable=True),
              "usage": MapOf(Num(), nullable=True), "call_duration_seconds": _SECONDS,
              "arm": Str(nullable=True),
              "clip": Obj({"timestamps": Arr(sj.Seconds()), "frame_indexes": Arr(Int())})})


@dataclass(frozen=True, slots=True)
class Gate:
    name: str
    passed: bool
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"message": self.message, "name": self.name, "passed": self.passed}

    @classmethod
    def recorded(cls, name: str, passed: bool, message: str) -> Gate:
        """A gate as a report recorded it, read back: its verdict was made when the report was written."""
        return cls(name, passed, message)


@dataclass(frozen=True, slots=True)
class GateDecision:
    """One pass-rate (or failure-count) gate as ``run --early-stop`` left it."""

    name: str
    #: ``pass``, ``fail`` or ``undecided``.
    verdict: str
    #: The anytime-valid bounds on the whole planned set's pass rate (a count gate: failures seen).
    low: float
    high: float
    #: The gate's threshold, and the samples of its scope evaluated when it was decided / planned.
    minimum: float
    after: int
    planned: int
    #: True when decided before every sample of its scope was evaluated.
    early: bool
    #: Of ``after``, the samples read from the observation cache before the first block.
    cached: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "cached": self.cached, "early": self.early, "high": self.high, "low": self.low,
                "minimum": self.minimum, "name": self.name, "planned": self.planned, "verdict": self.verdict}


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """What ``run --early-stop`` did in one trial."""

    samples_evaluated: int
    samples_planned: int
    seed: int
    block_s: float
    alpha: float
    gates: tuple[GateDecision, ...]
    #: Of ``samples_evaluated``, those read from the observation cache before the first block.
    samples_cached: int = 0


@dataclass(frozen=True, slots=True)
class TrialResult:
    trial: int
    results: tuple[SampleResult, ...]
    gates: tuple[Gate, ...]
    duration_seconds: float
    #: None when nothing in the trial was evaluated.
    timing_mode: TimingMode | None
    #: One per (case, stream target) of the trial, in run order.
    streams: tuple[StreamResult, ...] = ()
    #: ``run --early-stop``: the decisions and how many samples they took (None otherwise).
    early_stop: EarlyStop | None = None

    @property
    def success(self) -> bool:
        return all(g.passed for g in self.gates)


@dataclass(frozen=True, slots=True)
class Stability:
    """One logical sample across all trials."""

    first: SampleResult
    statuses: tuple[Status, ...]

    @property
    def evaluated(self) -> int:
        return sum(1 for s in self.statuses if s not in _UNJUDGED)

    @property
    def flaky(self) -> bool:
        return len({s for s in self.statuses if s not in _UNJUDGED}) > 1

    @property
    def consistently_passed(self) -> bool:
        return self.evaluated > 0 and all(s is Status.PASSED for s in self.statuses)

    @property
    def consistently_failed(self) -> bool:
        return self.evaluated > 0 and all(s is Status.FAILED for s in self.statuses)

    @property
    def has_errors(self) -> bool:
        return Status.ERROR in self.statuses

    def to_json(self) -> dict[str, Any]:
        passed = self.statuses.count(Status.PASSED)
        evaluated = self.evaluated
        return {
            "case": self.first.case,
            "consistently_failed": self.consistently_failed,
            "consistently_passed": self.consistently_passed,
            "errors": self.statuses.count(Status.ERROR),
            "evaluated": evaluated,
            "expected": self.first.expected,
            "failed": self.statuses.count(Status.FAILED),
            "flaky": self.flaky,
            "ignored": self.first.status is Status.IGNORED,
            "pass_rate": passed / evaluated if evaluated else None,
            "passed": passed,
            "sample_index": self.first.sample_index,
            "source": self.first.source,
            "statuses": [s.value for s in self.statuses],
            "target": self.first.target,
            "target_label": self.first.target_label,
            "timestamp_s": self.first.timestamp_s,
        }


def stability(trials: Iterable[TrialResult]) -> tuple[Stability, ...]:
    """Each logical sample's statuses across trials, in first-seen order."""
    firsts: dict[tuple[str | None, str, str, int], SampleResult] = {}
    statuses: dict[tuple[str | None, str, str, int], list[Status]] = {}
    for trial in trials:
        for result in trial.results:
            # Arms evaluate the same sample side by side: each arm's attempts are their own sample.
            key = (result.arm, *result.key)
            if key not in firsts:
                firsts[key] = result
                statuses[key] = []
            statuses[key].append(result.status)
    return tuple(Stability(firsts[k], tuple(statuses[k])) for k in firsts)


# --- streams -----------------------------------------------------------------------------------


def _seconds(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True)
class Emission:
    """One thing a stream emitted, at the media time it counts at (exact)."""

    time: Fraction
    #: The whole emission as the adapter returned it (``field`` is applied only to compare).
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {"time_s": float(self.time), "value": self.value}


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """One event of a stream: detected by ``emission`` (the earliest match in its window) or missed."""

    index: int
    at: Fraction
    #: The window in media time, closed: ``[at + a, at + b]``.
    span: tuple[Fraction, Fraction]
    expect: Any
    emission: Emission | None

    @property
    def detected(self) -> bool:
        return self.emission is not None

    @property
    def latency(self) -> Fraction | None:
        return None if self.emission is None else self.emission.time - self.at

    def to_json(self) -> dict[str, Any]:
        return {"at": float(self.at), "emission": None if self.emission is None else self.emission.to_json(),
                "expect": self.expect, "index": self.index, "latency_s": _seconds(self.latency),
                "status": "detected" if self.detected else "missed",
                "window_s": [float(self.span[0]), float(self.span[1])]}


@dataclass(frozen=True, slots=True)
class StreamMetrics:
    """A stream's figures (exact; ``None`` where a figure has nothing to be computed from)."""

    events: int
    detected: int
    repeats: int
    false_alarms: int
    #: Seconds of quiet time (the ``quiet`` spans within the clip, else the clip outside the windows).
    quiet_s: Fraction
    recall: Fraction | None
    precision: Fraction | None
    false_alarms_per_min: Fraction | None
    #: Nearest-rank percentiles of the detected events' latencies, as the latency summary's.
    latency_p50: Fraction | None
    latency_p95: Fraction | None
    latency_max: Fraction | None
    #: The detected events' latencies, sorted (gates pool them across cases).
    latencies: tuple[Fraction, ...] = ()

    @property
    def missed(self) -> int:
        return self.events - self.detected

    def to_json(self) -> dict[str, Any]:
        return {"detected": self.detected, "events": self.events, "false_alarms": self.false_alarms,
                "false_alarms_per_min": _seconds(self.false_alarms_per_min),
                "latency_max_s": _seconds(self.latency_max), "latency_p50_s": _seconds(self.latency_p50),
                "latency_p95_s": _seconds(self.latency_p95), "missed": self.missed,
                "precision": _seconds(self.precision), "quiet_s": float(self.quiet_s),
                "recall": _seconds(self.recall), "repeats": self.repeats}


@dataclass(frozen=True, slots=True)
class StreamResult:
    """One stream (case, target, trial): its scored events, the emissions that were not hits, and how it was fed."""

    case: str
    target: str
    target_label: str | None
    trial: int
    events: tuple[EventOutcome, ...]
    false_alarms: tuple[Emission, ...]
    repeats: tuple[Emission, ...]
    metrics: StreamMetrics
    #: ``--pace`` (None: replay).
    pace: float | None = None
    frames_delivered: int = 0
    frames_dropped: int = 0
    #: Paced runs: answer arrival minus its frame's media time, nearest-rank p50 and p95 (seconds).
    staleness_p50: Fraction | None = None
    staleness_p95: Fraction | None = None
    #: Why the stream stopped early (an adapter error under ``--keep-going``); None when it ran to the end.
    error: str | None = None
    #: The arm whose adapter was fed this stream; None without arms (and then not in the JSON).
    arm: str | None = None

    def to_json(self) -> dict[str, Any]:
        staleness = None
        if self.staleness_p50 is not None:
            staleness = {"p50_s": _seconds(self.staleness_p50), "p95_s": _seconds(self.staleness_p95)}
        data = {"case": self.case, "error": self.error, "events": [e.to_json() for e in self.events],
                "false_alarms": [e.to_json() for e in self.false_alarms],
                "frames_delivered": self.frames_delivered, "frames_dropped": self.frames_dropped,
                "metrics": self.metrics.to_json(), "pace": self.pace,
                "repeats": [e.to_json() for e in self.repeats], "staleness": staleness,
                "target": self.target, "target_label": self.target_label, "trial": self.trial}
        if self.error is None:
            del data["error"]
        if self.arm is not None:
            data["arm"] = self.arm
        return data
