"""``run --cache`` for stream targets: a replay stream is cached whole, keyed on its frame sequence.

An app fed a stream answers from everything it saw before, so the unit is the stream, never one
frame. Its key is the adapter's identity and config and the target's id and config (as the sample
cache keys them), the feed rate (``every_s``), the trial (after the first, as the sample cache), the
clip's end (``end_stream``'s emissions are timed at it) and every fed frame, in order, as its exact
media time and the SHA-256 of its pixels (the sample cache's hash and its per-run memo). The value is
the stream's record (:mod:`._streamrecord`) holding every emission the stream made, scored or not,
so a later run with other windows, quiet spans or expectations rescores it exactly. A hit makes no
adapter call for its stream (no start, frame or end); the others are fed as usual and stored when
they ran to the end without an adapter error. Paced streams are never cached: their emissions'
times come from the wall clock.

Cost: the key needs every fed frame's hash before the stream's first call, so with lookups on
(``read``, ``readwrite``) the case's fed frames are decoded and hashed once before any stream
starts; streams that miss are decoded a second time as they are fed (their hashes are memoized,
not computed again). ``write`` looks nothing up and hashes the frames as they are fed: one decode.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from ..adapters.base import Evaluator
from ..adapters.calls import StreamCaller
from ..cases.model import TargetSpec
from ..plan.feeds import FeedFrame, feed
from ..plan.planning import CasePlan
from ..results import StreamResult
from ..support import strictjson
from ..video.frametable import frame_table
from ._streamrecord import RecordError, emission_records, exact, rescore
from .observation_cache import ObservationCache, _Shared, plain_config
from .observation_store import key_digest
from .streams import Stream, StreamWork, decoded, onset_frames, run_streams

#: False alarms per cached stream whose frames are decoded for the HTML report's keeper, which keeps
#: no more than that many per stream either.
KEPT_FALSE_ALARMS = 50


def stream_cache(cache: ObservationCache, evaluator: Evaluator, config: Mapping[str, Any],
                 trial: int) -> StreamCache | None:
    """The trial's stream cache; None when the adapter has no identity (the console says so once)."""
    identity = cache.identity(evaluator)
    return None if identity is None else StreamCache(cache.shared, identity, config, trial)


class StreamCache:
    """One trial's cache of whole replay streams, keyed as the module says."""

    def __init__(self, shared: _Shared, identity: str, config: Mapping[str, Any], trial: int) -> None:
        self._shared = shared
        self._identity = identity
        self._config = plain_config(config)
        self._trial = trial

    def digest(self, spec: TargetSpec, frames: Sequence[FeedFrame], hashes: Mapping[int, str],
               end_time: Fraction) -> str:
        """The entry name of a stream fed ``frames``, whose pixel ``hashes`` are by frame index."""
        assert spec.stream is not None
        every = spec.stream.every_s
        material: dict[str, Any] = {
            "kind": "stream", "adapter": self._identity, "adapter_config": self._config,
            "target": {"id": spec.id, "config": plain_config(spec.config)},
            "stream": {"every_s": None if every is None else exact(Fraction(every))},
            "end": exact(end_time),
            "frames": [[exact(f.media_time), hashes[f.frame_index]] for f in frames],
        }
        if self._trial > 1:
            material["trial"] = self._trial  # trial 1 shares its entries with runs without --repeat
        return key_digest(material)

    async def run(self, work: StreamWork, caller: StreamCaller) -> list[StreamResult]:
        """The case's streams in declaration order: hits rescored from the cache, the rest fed and stored."""
        plan, shared = work.plan, self._shared
        assert work.pace is None and plan.video is not None
        end = plan.video.end_time
        table = frame_table(plan.video_path)
        feeds = {s.id: feed(table, end, s.stream.every_s) for s in plan.streams if s.stream is not None}
        found: dict[str, StreamResult] = {}
        digests: dict[str, str] = {}
        if shared.reads:
            hashes = await self._hash_frames(work, feeds)
            for spec in plan.streams:
                digests[spec.id] = self.digest(spec, feeds[spec.id], hashes, end)
                hit = await asyncio.to_thread(self._lookup, plan, spec, digests[spec.id], len(feeds[spec.id]))
                if hit is not None:
                    shared.stats.stream_hits += 1
                    found[spec.id] = hit
            if work.keep_frame is not None and found:
                await self._keep_frames(work, [found[s.id] for s in plan.streams if s.id in found], feeds)
        missed = tuple(s for s in plan.streams if s.id not in found)
        if missed:
            tap = _Recorder(str(plan.video_path), shared)
            mine = CasePlan(plan.case, plan.samples, plan.video_path, plan.video, missed)
            for result in await run_streams(dataclasses.replace(work, plan=mine, tap=tap), caller):
                found[result.target] = result
            for spec in missed:
                await self._store(spec, tap.records.get(spec.id), feeds[spec.id], digests.get(spec.id),
                                  str(plan.video_path), end)
        return [found[s.id] for s in plan.streams]

    async def _hash_frames(self, work: StreamWork, feeds: Mapping[str, Sequence[FeedFrame]]) -> dict[int, str]:
        """Every fed frame's pixel hash by frame index, decoding only frames not hashed yet in this run.

        The HTML report's keeper gets each event's onset frame on the way (a hit is never fed).
        """
        video = str(work.plan.video_path)
        keeper = work.keep_frame
        onsets: dict[int, list[tuple[str, int]]] = {}
        if keeper is not None:
            for spec in work.plan.streams:
                assert spec.stream is not None
                events = [(e.index, e.at) for e in spec.stream.events]
                for index, mine in onset_frames(feeds[spec.id], events).items():
                    onsets.setdefault(index, []).extend((spec.id, event) for event in mine)
        hashes: dict[int, str] = {}
        wanted: dict[Fraction, FeedFrame] = {}
        for frames in feeds.values():
            for frame in frames:
                known = self._shared.known_hash(video, frame.frame_index)
                if known is not None:
                    hashes[frame.frame_index] = known
                if known is None or frame.frame_index in onsets:
                    wanted[frame.media_time] = frame
        async for want, got in decoded(work, sorted(wanted)):
            try:
                frame = wanted[want]
                hashes[frame.frame_index] = self._shared.pixel_hash(video, frame.frame_index, got.image)
                if keeper is not None:
                    for target, event in onsets.get(frame.frame_index, ()):
                        keeper.onset((work.plan.case.name, target, work.trial, work.arm), event, frame, got.image)
            finally:
                got.image.close()
        return hashes

    def _lookup(self, plan: CasePlan, spec: TargetSpec, digest: str, fed: int) -> StreamResult | None:
        """The stream rescored from its entry; None on a miss (a damaged entry is one)."""
        assert plan.video is not None
        hit, record = self._shared.store.get(digest, strictjson.STREAM_CACHE_ENTRY)
        if not hit or not isinstance(record, dict):
            return None
        try:
            result = rescore(plan.case.name, spec, plan.video.end_time, record, trial=self._trial, pace=None)
        except RecordError:
            return None
        if result.frames_delivered != fed or result.frames_dropped or result.error is not None:
            return None  # not a record this cache writes for this feed
        return result

    async def _store(self, spec: TargetSpec, stream: Stream | None, frames: Sequence[FeedFrame],
                     digest: str | None, video: str, end: Fraction) -> None:
        """Count a fresh stream and store it when it ran to its end without an adapter error."""
        if stream is None or stream.error is not None or stream.delivered != len(frames):
            return
        shared = self._shared
        shared.stats.stream_misses += 1
        if not shared.writes:
            return
        if digest is None:
            hashes = {}
            for frame in frames:
                known = shared.known_hash(video, frame.frame_index)
                if known is None:
                    return  # the video changed on disk while it was fed: no key to store it under
                hashes[frame.frame_index] = known
            digest = self.digest(spec, frames, hashes, end)
        record = {"emissions": emission_records(stream.emissions), "frames_delivered": stream.delivered,
                  "frames_dropped": 0, "staleness": None, "error": None}
        stored = await asyncio.to_thread(shared.store.put, digest, record, strictjson.STREAM_CACHE_ENTRY)
        shared.stats.stream_writes += stored

    async def _keep_frames(self, work: StreamWork, hits: Sequence[StreamResult],
                           feeds: Mapping[str, Sequence[FeedFrame]]) -> None:
        """Hand the HTML report's keeper the frames of cached streams' false alarms, then their results.

        The frames are known only once the entries are read, so they are decoded again: at most
        :data:`KEPT_FALSE_ALARMS` per stream, and only with ``--html``.
        """
        keeper = work.keep_frame
        assert keeper is not None
        wanted: dict[Fraction, list[tuple[StreamResult, FeedFrame, Fraction]]] = {}
        for result in hits:
            by_time = {f.media_time: f for f in feeds[result.target]}
            times = sorted({e.time for e in result.false_alarms if e.time in by_time})[:KEPT_FALSE_ALARMS]
            for time in times:
                wanted.setdefault(time, []).append((result, by_time[time], time))
        async for want, got in decoded(work, sorted(wanted)):
            try:
                for result, frame, time in wanted[want]:
                    keeper.false_alarm((result.case, result.target, result.trial, result.arm), time, frame, got.image)
            finally:
                got.image.close()
        for result in hits:
            keeper.finished(result)


class _Recorder:
    """The tap of a fed (missed) stream: hashes its frames as they go by, keeps each stream at its end."""

    def __init__(self, video: str, shared: _Shared) -> None:
        self.video = video
        self.shared = shared
        self.records: dict[str, Stream] = {}

    def frame(self, frame: FeedFrame, image: Any) -> None:
        # Memoized: with lookups on, the hashing pass did this already and it costs a dict lookup.
        self.shared.pixel_hash(self.video, frame.frame_index, image)

    def finished(self, stream: Stream) -> None:
        self.records[stream.target.id] = stream
