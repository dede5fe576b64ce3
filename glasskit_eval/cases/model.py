"""Case files as frozen models: videos, thresholds, sample blocks, targets and cases.

:mod:`.parse` builds them from a case file; these classes hold no parsing rules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..compare.modes import CompareConfig
from ..support.records import Frozen
from ..support.timevalues import format_time
from ..yamltext.source import YamlDocument

VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".webm", ".mkv")
DEFAULT_EVERY_S = Fraction(1, 2)
MAX_SAMPLES_PER_CASE = 10_000
#: A clip is handed to one adapter call; past this it is a batch job, not a sample.
MAX_CLIP_FRAMES = 1024
CLIP_EDGES = ("error", "clamp")


class LocalVideo(Frozen):
    _fields = ("path",)
    path: Path

    def __init__(self, path: Path) -> None:
        self.__dict__["path"] = path

    def describe(self) -> str:
        return str(self.path)


class CloudVideo(Frozen):
    _fields = ("store", "key", "sha256")
    store: str
    key: str
    sha256: str

    def __init__(self, store: str, key: str, sha256: str) -> None:
        self.__dict__.update(store=store, key=key, sha256=sha256)

    def describe(self) -> str:
        return f"{self.store}:{self.key}"


VideoRef = LocalVideo | CloudVideo


class StreamGates(Frozen):
    """A stream target's gates (``thresholds.per_target.<t>`` keys or the ``run`` options)."""

    _fields = ("min_recall", "max_false_alarms_per_min", "max_detection_latency_p95_s")
    min_recall: float | None
    max_false_alarms_per_min: float | None
    max_detection_latency_p95_s: float | None

    def __init__(self, min_recall: float | None = None, max_false_alarms_per_min: float | None = None,
                 max_detection_latency_p95_s: float | None = None) -> None:
        self.__dict__.update(min_recall=min_recall, max_false_alarms_per_min=max_false_alarms_per_min,
                             max_detection_latency_p95_s=max_detection_latency_p95_s)

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in self._fields)


class Thresholds(Frozen):
    _fields = ("min_pass_rate", "max_failures", "per_target", "max_p95_latency_s", "max_cost", "stream_gates")
    min_pass_rate: float | None
    max_failures: int | None
    per_target: Mapping[str, float] | None
    max_p95_latency_s: float | None
    max_cost: float | None
    #: ``per_target.<t>`` stream keys (min_recall, ...), by target.
    stream_gates: Mapping[str, StreamGates] | None

    def __init__(self, min_pass_rate: float | None = None, max_failures: int | None = None,
                 per_target: Mapping[str, float] | None = None, max_p95_latency_s: float | None = None,
                 max_cost: float | None = None, stream_gates: Mapping[str, StreamGates] | None = None) -> None:
        self.__dict__.update(min_pass_rate=min_pass_rate, max_failures=max_failures, per_target=per_target,
                             max_p95_latency_s=max_p95_latency_s, max_cost=max_cost, stream_gates=stream_gates)


class ClipSpec(Frozen):
    """A sample's ``clip`` setting: the window around the sample time and how it is sampled.

    ``every_s`` None means every decoded frame in ``[t - before_s, t + after_s]``, plus the
    anchor's frame; ``edge`` says whether a window outside the video is an error or clamped.
    """

    _fields = ("before_s", "after_s", "every_s", "edge")
    before_s: Fraction
    after_s: Fraction
    every_s: Fraction | None
    edge: str

    def __init__(self, before_s: Fraction = Fraction(0), after_s: Fraction = Fraction(0),
                 every_s: Fraction | None = None, edge: str = "error") -> None:
        self.__dict__.update(before_s=before_s, after_s=after_s, every_s=every_s, edge=edge)

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


class SampleBlock(Frozen):
    """One entry of a target's ``samples`` list, with inherited settings resolved."""

    _fields = ("target_id", "index", "times", "range", "every_s", "has_expect", "expect", "field",
               "compare", "comment", "ignore", "clip")
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
    clip: ClipSpec | None

    def __init__(self, target_id: str, index: int, times: tuple[Fraction, ...],
                 range: tuple[Fraction, Fraction] | None, every_s: Fraction | None, has_expect: bool,
                 expect: Any, field: str | None, compare: CompareConfig | None, comment: str | None,
                 ignore: str | None, clip: ClipSpec | None = None) -> None:
        self.__dict__.update(target_id=target_id, index=index, times=times, range=range, every_s=every_s,
                             has_expect=has_expect, expect=expect, field=field, compare=compare,
                             comment=comment, ignore=ignore, clip=clip)

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


class EventSpec(Frozen):
    """One entry of a stream target's ``events``: an onset, the emission that notices it, and when.

    ``window`` is relative to ``at`` and closed at both ends: an emission at media time
    ``at + window[0] .. at + window[1]`` may detect the event.
    """

    _fields = ("index", "at", "window", "has_expect", "expect", "compare", "comment")
    index: int
    at: Fraction
    window: tuple[Fraction, Fraction]
    has_expect: bool
    expect: Any
    compare: CompareConfig | None
    comment: str | None

    def __init__(self, index: int, at: Fraction, window: tuple[Fraction, Fraction], has_expect: bool,
                 expect: Any, compare: CompareConfig | None = None, comment: str | None = None) -> None:
        self.__dict__.update(index=index, at=at, window=window, has_expect=has_expect, expect=expect,
                             compare=compare, comment=comment)

    @property
    def span(self) -> tuple[Fraction, Fraction]:
        """The window in media time: ``[at + a, at + b]``."""
        return self.at + self.window[0], self.at + self.window[1]


class StreamSpec(Frozen):
    """A stream target: events scored against what the app emits while it is fed the video in order.

    ``every_s`` None feeds every decoded frame; ``quiet`` None means the whole clip outside the
    windows is quiet time. ``field``/``compare`` apply to emissions (an event's own ``compare`` wins).
    """

    _fields = ("every_s", "events", "quiet", "field", "compare")
    every_s: Fraction | None
    events: tuple[EventSpec, ...]
    quiet: tuple[tuple[Fraction, Fraction], ...] | None
    field: str | None
    compare: CompareConfig | None

    def __init__(self, every_s: Fraction | None, events: tuple[EventSpec, ...],
                 quiet: tuple[tuple[Fraction, Fraction], ...] | None, field: str | None = None,
                 compare: CompareConfig | None = None) -> None:
        self.__dict__.update(every_s=every_s, events=events, quiet=quiet, field=field, compare=compare)


class TargetSpec(Frozen):
    _fields = ("id", "index", "label", "config", "blocks", "stream")
    id: str
    index: int
    label: str | None
    config: Mapping[str, Any]
    blocks: tuple[SampleBlock, ...]
    #: Set for a stream target (``events`` instead of ``samples``; ``blocks`` is then empty).
    stream: StreamSpec | None

    def __init__(self, id: str, index: int, label: str | None, config: Mapping[str, Any],
                 blocks: tuple[SampleBlock, ...], stream: StreamSpec | None = None) -> None:
        self.__dict__.update(id=id, index=index, label=label, config=config, blocks=blocks, stream=stream)


class Case(Frozen):
    _fields = ("name", "path", "video", "description", "targets", "thresholds", "document")
    name: str
    path: Path
    video: VideoRef
    description: str | None
    targets: tuple[TargetSpec, ...]
    thresholds: Thresholds | None
    document: YamlDocument

    def __init__(self, name: str, path: Path, video: VideoRef, description: str | None,
                 targets: tuple[TargetSpec, ...], thresholds: Thresholds | None,
                 document: YamlDocument) -> None:
        self.__dict__.update(name=name, path=path, video=video, description=description, targets=targets,
                             thresholds=thresholds, document=document)

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
