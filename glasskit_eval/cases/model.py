"""Case files as frozen models: videos, thresholds, sample blocks, targets and cases.

:mod:`.parse` builds them from a case file; these classes hold no parsing rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..compare.modes import CompareConfig
from ..support.timevalues import format_time
from ..yamltext.source import YamlDocument

VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".webm", ".mkv")
DEFAULT_EVERY_S = Fraction(1, 2)
MAX_SAMPLES_PER_CASE = 10_000
#: A clip is handed to one adapter call; past this it is a batch job, not a sample.
MAX_CLIP_FRAMES = 1024
CLIP_EDGES = ("error", "clamp")


@dataclass(frozen=True, slots=True)
class LocalVideo:
    """A case's video on this machine, as its ``video:`` path names it."""

    path: Path

    def describe(self) -> str:
        return str(self.path)


@dataclass(frozen=True, slots=True)
class CloudVideo:
    """A case's video in a configured video store: the store, the object key and its SHA-256."""

    store: str
    key: str
    sha256: str

    def describe(self) -> str:
        return f"{self.store}:{self.key}"


VideoRef = LocalVideo | CloudVideo


@dataclass(frozen=True, slots=True)
class StreamGates:
    """A stream target's gates (``thresholds.per_target.<t>`` keys or the ``run`` options)."""

    min_recall: float | None = None
    max_false_alarms_per_min: float | None = None
    max_detection_latency_p95_s: float | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in STREAM_GATE_NAMES)


#: The stream gates, in the order reports list them.
STREAM_GATE_NAMES = tuple(f.name for f in fields(StreamGates))


@dataclass(frozen=True, slots=True)
class Thresholds:
    """``thresholds:`` of config.yaml or a case file: the gates' settings (None: not set)."""

    min_pass_rate: float | None = None
    max_failures: int | None = None
    per_target: Mapping[str, float] | None = None
    max_p95_latency_s: float | None = None
    max_cost: float | None = None
    #: ``per_target.<t>`` stream keys (min_recall, ...), by target.
    stream_gates: Mapping[str, StreamGates] | None = None


@dataclass(frozen=True, slots=True)
class ClipSpec:
    """A sample's ``clip`` setting: the window around the sample time and how it is sampled.

    ``every_s`` None means every decoded frame in ``[t - before_s, t + after_s]``, plus the
    anchor's frame; ``edge`` says whether a window outside the video is an error or clamped.
    """

    before_s: Fraction = Fraction(0)
    after_s: Fraction = Fraction(0)
    every_s: Fraction | None = None
    edge: str = "error"

    @property
    def grid_count(self) -> int | None:
        """Requested times of an ``every_s`` grid (None: every frame, counted from the video)."""
        if self.every_s is None:
            return None
        # floor division of Fractions is exact: j*every_s <= before_s for j up to this.
        return int(self.before_s // self.every_s) + int(self.after_s // self.every_s) + 1

    def describe(self) -> str:
        span = f"[t-{format_time(self.before_s)}, t+{format_time(self.after_s)}]"
        sampling = "every frame" if self.every_s is None else f"every {format_time(self.every_s)}s"
        return f"{span} {sampling}" + (", clamped" if self.edge == "clamp" else "")


@dataclass(frozen=True, slots=True)
class SampleBlock:
    """One entry of a target's ``samples`` list, with inherited settings resolved."""

    target_id: str
    index: int
    times: tuple[Fraction, ...]
    range: tuple[Fraction, Fraction] | None
    every_s: Fraction | None
    has_expect: bool
    expect: Any
    field: str | None
    compare: CompareConfig | None
    comment: str | None
    ignore: str | None
    clip: ClipSpec | None = None

    def source(self) -> str:
        if self.range is not None:
            start, end = self.range
            assert self.every_s is not None
            return f"range [{format_time(start)}, {format_time(end)}) every {format_time(self.every_s)}"
        if len(self.times) == 1:
            return "at"
        return "at list"


#: An event's window when neither it nor its target's ``stream`` sets one: the second after onset.
DEFAULT_WINDOW = (Fraction(0), Fraction(1))


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One entry of a stream target's ``events``: an onset, the emission that notices it, and when.

    ``window`` is relative to ``at`` and closed at both ends: an emission at media time
    ``at + window[0] .. at + window[1]`` may detect the event.
    """

    index: int
    at: Fraction
    window: tuple[Fraction, Fraction]
    has_expect: bool
    expect: Any
    compare: CompareConfig | None = None
    comment: str | None = None

    @property
    def span(self) -> tuple[Fraction, Fraction]:
        """The window in media time: ``[at + a, at + b]``."""
        return self.at + self.window[0], self.at + self.window[1]


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """A stream target: events scored against what the app emits while it is fed the video in order.

    ``every_s`` None feeds every decoded frame; ``quiet`` None means the whole clip outside the
    windows is quiet time. ``field``/``compare`` apply to emissions (an event's own ``compare`` wins).
    """

    every_s: Fraction | None
    events: tuple[EventSpec, ...]
    quiet: tuple[tuple[Fraction, Fraction], ...] | None
    field: str | None = None
    compare: CompareConfig | None = None


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """One entry of a case's ``targets``: its sample blocks, or its events for a stream target."""

    id: str
    index: int
    label: str | None
    config: Mapping[str, Any]
    blocks: tuple[SampleBlock, ...]
    #: Set for a stream target (``events`` instead of ``samples``; ``blocks`` is then empty).
    stream: StreamSpec | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """A parsed case file: its video, targets and thresholds, and the YAML it came from."""

    name: str
    path: Path
    video: VideoRef
    description: str | None
    targets: tuple[TargetSpec, ...]
    thresholds: Thresholds | None
    document: YamlDocument

    def target(self, target_id: str) -> TargetSpec | None:
        for target in self.targets:
            if target.id == target_id:
                return target
        return None


def range_count(start: Fraction, end: Fraction, every: Fraction) -> int:
    """Number of samples in the half-open range, computed without materialising them."""
    return math.ceil((end - start) / every)


def block_count(block: SampleBlock) -> int:
    if block.range is not None:
        assert block.every_s is not None
        return range_count(block.range[0], block.range[1], block.every_s)
    return len(block.times)


def block_times(block: SampleBlock) -> tuple[Fraction, ...]:
    """Expanded times of a block, exact: start + k * every_s, never accumulated."""
    if block.range is None:
        return block.times
    start, _end = block.range
    assert block.every_s is not None
    return tuple(start + k * block.every_s for k in range(block_count(block)))
