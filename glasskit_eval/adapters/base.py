"""What the runner hands an adapter, and the one interface every adapter kind meets.

Python adapters (``adapters.python``) and command adapters (``adapters._process``)
both become an :class:`Evaluator`; the runner never knows which it is talking to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import AdapterError

if TYPE_CHECKING:
    from PIL import Image

T = TypeVar("T")


@dataclass(frozen=True)
class FactoryConfig:
    """The single argument given to an adapter factory."""

    eval_dir: Path
    config: Mapping[str, Any] = field(default_factory=dict)
    artifacts_dir: Path | None = None
    verbose: bool = False


@dataclass(frozen=True)
class Target:
    """A target as the adapter sees it."""

    id: str
    index: int
    label: str | None
    config: Mapping[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "index": self.index, "label": self.label, "config": dict(self.config)}


@dataclass(frozen=True)
class Frame:
    """One frame of a sample: the display-oriented RGB image and where it sits in the video."""

    image: Image.Image
    #: The time asked for (the sample's time for its anchor, a clip time for the others).
    timestamp_s: float
    #: The frame's own presentation time, rebased to the video's first frame.
    media_timestamp_s: float
    frame_index: int

    def wire_fields(self) -> dict[str, Any]:
        """The frame's fields in the command protocol's spelling, without the image."""
        return {"timestampS": self.timestamp_s, "mediaTimestampS": self.media_timestamp_s,
                "frameIndex": self.frame_index}


@dataclass
class Sample:
    """One decoded sample as the adapter sees it.

    ``image`` is the display-oriented RGB frame at the sample's time (the anchor);
    ``frames`` are the sample's frames in time order, each with its image: the clip's
    frames for a clip sample (``is_clip``), else just the anchor. The runner closes the
    images after the call returns, and a frame shared by overlapping clips is the same
    image object in each, so adapters must neither change images in place nor keep them
    without ``copy()``.
    """

    image: Image.Image
    timestamp_s: float
    frame_index: int
    sample_index: int
    video_path: str
    case_name: str
    #: What :meth:`report_usage` has recorded for this sample (summed across retries).
    usage: dict[str, float] = field(default_factory=dict, repr=False)
    #: Empty when made without frames: then the anchor alone.
    frames: tuple[Frame, ...] = field(default=(), repr=False)
    #: The case file gave the sample a ``clip`` (command adapters then get ``frames`` on the wire).
    is_clip: bool = False

    def __post_init__(self) -> None:
        if not self.frames:
            self.frames = (Frame(self.image, self.timestamp_s, self.timestamp_s, self.frame_index),)

    def report_usage(self, *, input_tokens: float | None = None, output_tokens: float | None = None,
                     cost: float | None = None, **other: float) -> None:
        """Record what evaluating this sample used; numbers are added to earlier reports.

        Any keyword is accepted (``cached_tokens=...``); the run sums each name per target,
        case and run, and ``cost`` is what ``--max-cost`` gates.
        """
        numbers = {"input_tokens": input_tokens, "output_tokens": output_tokens, "cost": cost, **other}
        add_usage(self.usage, {k: v for k, v in numbers.items() if v is not None})

    def wire_fields(self) -> dict[str, Any]:
        """The sample's fields in the command protocol's spelling, without the image."""
        return {
            "timestampS": self.timestamp_s,
            "frameIndex": self.frame_index,
            "sampleIndex": self.sample_index,
            "videoPath": self.video_path,
            "caseName": self.case_name,
        }


def add_usage(into: dict[str, float], numbers: Mapping[str, object]) -> None:
    """Add usage numbers into ``into``; raises ValueError naming a key whose value is not a number."""
    for key, value in numbers.items():
        if (not isinstance(key, str) or isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value)):
            raise ValueError(f"usage {key!r} must be a finite number, got {value!r}")
        into[key] = into.get(key, 0) + value


@dataclass(frozen=True)
class StreamInfo:
    """What ``start_stream(target, stream)`` is told about a stream before its first frame."""

    case: str
    video: str
    #: The feed's grid spacing (None: every decoded frame).
    every_s: float | None
    #: ``--pace`` (None: replay, frames as fast as the adapter takes them).
    pace: float | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"case": self.case, "video": self.video, "everyS": self.every_s, "pace": self.pace}


class StreamEvaluator(Protocol):
    """An evaluator that can be fed a stream (``streams`` True when it has ``on_frame``).

    ``on_frame`` returns None, one JSON-like emission, or a list of them; ``end_stream`` may return
    final emissions the same way.
    """

    @property
    def streams(self) -> bool: ...

    async def start_stream(self, target: Target, stream: StreamInfo) -> None: ...

    async def on_frame(self, sample: Sample, target: Target) -> Any: ...

    async def end_stream(self, target: Target) -> Any: ...


def frames_too_large(samples: Sequence[Sample], what: str) -> AdapterError:
    """The error for frames that did not fit in memory while ``what`` (encoding them) ran."""
    sizes = sorted({f"{s.image.width}x{s.image.height}" for s in samples})
    frames = f"{len(samples)} frames" if len(samples) != 1 else "the frame"
    return AdapterError(f"not enough memory for {what} ({frames} of {', '.join(sizes)}); free memory or raise "
                        "the process's memory limit (ulimit -v), lower --concurrency, or re-encode the video "
                        "at a lower resolution")


async def encoded(samples: Sequence[Sample], what: str, encode: Callable[[], T]) -> T:
    """``encode()`` on a worker thread; running out of memory there names the frames."""
    import asyncio

    try:
        return await asyncio.to_thread(encode)
    except MemoryError:
        raise frames_too_large(samples, what) from None


class TransientError(Exception):
    """Raise it from ``evaluate`` for a failure worth retrying (``--retries``): a 429, a 503, a reset.

    Any exception with a true ``transient`` attribute counts too; ``retry_after`` (seconds)
    makes the next attempt wait at least that long.
    """

    transient = True

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Evaluator(Protocol):
    """A constructed adapter, ready for one trial.

    ``batch`` is True when the adapter implements ``evaluate_many`` (which then
    takes precedence over ``evaluate``). Exceptions raised by ``evaluate`` and
    ``evaluate_many`` are the adapter's errors for those samples.
    """

    @property
    def batch(self) -> bool: ...

    async def evaluate(self, sample: Sample, target: Target) -> Any: ...

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]: ...

    async def cancel_pending(self) -> None:
        """Abandon calls still in flight (fail-fast error or interrupt)."""

    async def close(self) -> None: ...


class AdapterSpec(Protocol):
    """Something that can build a fresh :class:`Evaluator` for each trial."""

    def describe(self) -> str: ...

    async def create(self, factory_config: FactoryConfig) -> Evaluator: ...


class SampleEvaluator(Protocol):
    """What an adapter factory returns (the public contract, for type-checking adapters).

    ``evaluate`` may be a plain or an ``async`` method and returns a JSON-like observation.
    Optional methods, found by name: ``evaluate_many(samples, target)`` (see
    :class:`BatchEvaluator`, which then takes precedence) and ``close()`` (plain or async),
    called once after the trial's last sample.
    """

    def evaluate(self, sample: Sample, target: Target) -> Any: ...


class BatchEvaluator(Protocol):
    """An adapter that judges a whole target's samples in one call, one observation per sample."""

    def evaluate_many(self, samples: Sequence[Sample], target: Target) -> Any: ...
