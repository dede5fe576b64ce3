"""In which order a case's samples reach the adapter, and where their frames come from.

``declaration`` (the default, and the adapter reference's rule) calls the targets one
after the other in case-file order, each target's samples in declaration order.
``time`` (``--order time``) interleaves the targets by sample time, as one decode
produces the frames; adapters that keep per-target state cannot tell the difference
from the first, but it needs no store.

In declaration order one decode still serves several targets when that pays: a *pass*
decodes the frames of its targets once, lazily and in presentation order, and keeps a
frame decoded before its turn (a later target's, or a sample declared out of time
order) in a :class:`~glasskit_eval.evaluation._framestore.FrameStore`. A target joins the
first pass when keeping its frames costs less than decoding them again; otherwise it
gets a pass of its own, decoded when its turn comes (:func:`assign_passes`, costs in
decoded frames as in ``video.strategy``). Single frames and clips (``_clipframes``) are served
by the same :class:`DecodePass`; only their stores differ.

Everything here runs on the decoding thread: generators of ``(sample, frame)`` where
every frame's image belongs to the receiver.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from ..plan.schedule import ScheduledSample
from ..video.frames import DecodedFrame, available_cores, decode_at
from ..video.frametable import FrameTable, frame_table
from ..video.strategy import plan
from ..video.timeline import DEFAULT_RATE, nearest_at_rate, timeline
from ._framestore import FrameStore

DECLARATION = "declaration"
TIME = "time"
ORDERS = (DECLARATION, TIME)

#: Keeping a frame for later, in decoded-frame equivalents: writing it to the spill file
#: (once) and reading it back (per use). Measured on 720p H.264 on two cores (a frame
#: decodes in ~0.6 ms of one core, is spilled in ~1.5 ms and read back in ~0.5 ms); real
#: footage decodes slower, which only makes keeping frames cheaper still.
KEEP_WRITE_COST = 2.5
KEEP_READ_COST = 1.0
#: At most this much spill file per case (and never more than half the free space of the
#: temporary directory); a target that would need more is decoded again.
SPILL_LIMIT = 16 << 30

Items = Generator[tuple[ScheduledSample, DecodedFrame], None, None]
Decoder = Callable[[Path, Sequence[Fraction]], Iterator[tuple[Fraction, DecodedFrame]]]
#: The times a sample's frames are decoded for (one for a single-frame sample).
SampleTimes = Callable[[ScheduledSample], Sequence[Fraction]]
#: What a pass hands out for one use of a frame (its store's choice).
F = TypeVar("F")
F_co = TypeVar("F_co", covariant=True)


def own_time(sample: ScheduledSample) -> Sequence[Fraction]:
    return (sample.time,)


def in_declaration_order(samples: Sequence[ScheduledSample]) -> list[ScheduledSample]:
    """Targets in case-file order, then each target's samples as declared."""
    return sorted(samples, key=lambda s: (s.target.index, s.sample_index))


# --- time order ------------------------------------------------------------------------


def time_order_items(path: Path, samples: Sequence[ScheduledSample], decode: Decoder = decode_at) -> Items:
    """Frames in presentation order; samples sharing a time in declaration order."""
    by_time: dict[Fraction, list[ScheduledSample]] = {}
    for sample in sorted(samples, key=lambda s: s.sample_index):
        by_time.setdefault(sample.time, []).append(sample)
    for want, frame in decode(path, sorted(by_time)):
        group = by_time[want]
        # Copies first: the receiver may close the original as soon as it has it.
        copies = [DecodedFrame(frame.index, frame.media_time, frame.image.copy()) for _ in group[1:]]
        yield group[0], frame
        for sample, copy in zip(group[1:], copies):
            yield sample, copy


# --- declaration order -----------------------------------------------------------------


class _Costs:
    """Decode and keep costs of frame sets, from the video's frame table."""

    def __init__(self, table: FrameTable | None, cores: int) -> None:
        self.table = table
        self.cores = cores
        self._timeline = timeline(table) if table is not None else None

    def index(self, time: Fraction) -> int:
        """The frame ``time`` selects, by the frame engine's one rule (an unreadable video: 30 fps)."""
        if self._timeline is None:
            return nearest_at_rate(time, DEFAULT_RATE)
        return self._timeline.nearest(time)

    def decode(self, indices: set[int]) -> float:
        """Wall cost, in decoded frames, of one decode of these frames."""
        if not indices:
            return 0.0
        table = self.table
        if table is None or not table.seekable:
            return float(max(indices) + 1)  # decoded sequentially from the start
        the_plan = plan(table.keyframes, sorted(indices), cores=self.cores,
                        frame_pixels=table.width * table.height)
        return the_plan.cost / the_plan.workers

    @property
    def frame_bytes(self) -> int:
        """Bytes of one frame in the spill file (RGB, 3 bytes per pixel)."""
        table = self.table
        return table.width * table.height * 3 if table is not None else 0


def spill_limit() -> int:
    try:
        free = shutil.disk_usage(tempfile.gettempdir()).free
    except OSError:
        return 0
    return min(SPILL_LIMIT, free // 2)


def assign_passes(targets: Sequence[Sequence[ScheduledSample]], costs: _Costs,
                  limit: int = SPILL_LIMIT, times: SampleTimes = own_time, once: bool = False) -> list[int]:
    """Per target (in call order), the pass that decodes its frames: 0 shared, else its own.

    Greedy in call order. When target ``t``'s turn comes, the shared pass has decoded up
    to the furthest frame of the earlier targets in it; ``t``'s frames up to there were
    kept for it (written once, read per use), the rest arrive live. ``t`` joins the shared
    pass when that plus the extra decoding it adds costs less than decoding its frames
    again, and the spill stays under ``limit`` bytes. With ``once`` (clips: each distinct
    frame of a run is decoded once) every target joins while the spill stays under the limit.
    """
    passes: list[int] = []
    shared: set[int] = set()
    kept: set[int] = set()  # frames the shared pass keeps for a later use
    reach = -1
    spill_bytes = 0
    for number, samples in enumerate(targets):
        indices = [costs.index(t) for s in samples for t in dict.fromkeys(times(s))]
        distinct = set(indices)
        if number == 0:
            passes.append(0)
        else:
            early = [i for i in indices if i <= reach]
            new_kept = {i for i in early if i not in kept}
            keep = (costs.decode(shared | distinct) - costs.decode(shared)
                    + KEEP_WRITE_COST * len(new_kept) + KEEP_READ_COST * len(early))
            again = costs.decode(distinct)
            more_bytes = len(new_kept) * costs.frame_bytes
            if (once or keep <= again) and spill_bytes + more_bytes <= limit:
                passes.append(0)
                kept |= new_kept
                spill_bytes += more_bytes
            else:
                passes.append(number)
                continue
        shared |= distinct
        reach = max(reach, max(distinct))
    return passes


class PassStore(Protocol[F_co]):
    """Where a pass keeps the frames it decodes before their turn, and how it hands one out."""

    def __contains__(self, key: Hashable) -> bool: ...

    def put(self, key: Hashable, frame: DecodedFrame, uses: int) -> None:
        """Keep ``frame`` (the store's now) for ``uses`` takes."""

    def take(self, key: Hashable) -> F_co:
        """A kept frame for one use."""

    def serve(self, key: Hashable, frame: DecodedFrame, uses: int) -> F_co:
        """``frame`` for the use at hand, kept for ``uses`` more (none: not kept)."""


class DecodePass(Generic[F]):
    """One lazy decode serving its samples in call order: each distinct time decoded once, a frame
    decoded before its turn kept in the store for every use still to come.

    ``times`` says which frames a sample needs (its own time, or a clip's entries); the store
    says what a use gets (a frame of its own, or a share of one image).
    """

    def __init__(self, number: int, path: Path, samples: Sequence[ScheduledSample], decode: Decoder,
                 store: PassStore[F], times: SampleTimes = own_time) -> None:
        self._number = number  # passes share the store (and its budget), keyed apart
        self._uses = Counter(t for s in samples for t in set(times(s)))
        self._frames = iter(decode(path, sorted(self._uses)))
        self._store = store

    def take(self, time: Fraction) -> F:
        self._uses[time] -= 1
        if (self._number, time) in self._store:
            return self._store.take((self._number, time))
        for want, frame in self._frames:
            if want == time:
                return self._store.serve((self._number, time), frame, self._uses[time])
            # Decoded before its turn: kept for every use still to come.
            self._store.put((self._number, want), frame, self._uses[want])
        raise AssertionError(f"the decoder never produced the frame for {time}s")

    def close(self) -> None:
        close = getattr(self._frames, "close", None)
        if close is not None:
            close()


def target_groups(samples: Sequence[ScheduledSample]) -> list[list[ScheduledSample]]:
    """The samples in declaration order, one list per target."""
    groups: list[list[ScheduledSample]] = []
    for sample in in_declaration_order(samples):
        if not groups or groups[-1][0].target.id != sample.target.id:
            groups.append([])
        groups[-1].append(sample)
    return groups


def plan_passes(path: Path, groups: Sequence[Sequence[ScheduledSample]], times: SampleTimes = own_time,
                once: bool = False) -> list[int]:
    """:func:`assign_passes` for this video, on the cores available and within the spill limit."""
    try:
        table: FrameTable | None = frame_table(path)
    except Exception:
        table = None  # the decoder will report what is wrong with the video
    return assign_passes(groups, _Costs(table, available_cores()), spill_limit(), times, once)


def declaration_order_items(path: Path, samples: Sequence[ScheduledSample], decode: Decoder = decode_at,
                            store: FrameStore | None = None) -> Items:
    """Samples in declaration order, each with its frame; one decode where it pays."""
    groups = target_groups(samples)
    mine = store if store is not None else FrameStore()
    yield from served_in_passes(groups, plan_passes(path, groups),
                                lambda number, members: DecodePass(number, path, members, decode, mine),
                                lambda current, sample: current.take(sample.time), mine.close)


P = TypeVar("P", bound="_Closing")
X = TypeVar("X")


class _Closing(Protocol):
    def close(self) -> None: ...


def served_in_passes(groups: Sequence[Sequence[ScheduledSample]], numbers: Sequence[int],
                     open_pass: Callable[[int, list[ScheduledSample]], P], take: Callable[[P, ScheduledSample], X],
                     close_store: Callable[[], None]) -> Iterator[tuple[ScheduledSample, X]]:
    """Each group's samples with what ``take`` gets them from their pass (``numbers[i]``: group i's).

    Pass 0 is shared and opened once for all its groups' samples; any other pass serves one
    target and is closed after it. Every pass still open, and then the store, is closed at the end.
    """
    passes: dict[int, P] = {}
    try:
        for number, group in zip(numbers, groups):
            if number not in passes:
                members = [s for n, g in zip(numbers, groups) if n == number for s in g]
                passes[number] = open_pass(number, members)
            current = passes[number]
            for sample in group:
                yield sample, take(current, sample)
            if number != 0:
                current.close()  # an own pass serves one target
                del passes[number]
    finally:
        for each in passes.values():
            each.close()
        close_store()
