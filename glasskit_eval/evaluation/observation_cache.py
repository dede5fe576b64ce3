"""``run --cache``: reuse observations of frames an adapter has already judged.

:class:`CachingSpec` wraps an :class:`~glasskit_eval.adapters.base.AdapterSpec`; its evaluators
are :class:`~glasskit_eval.adapters.base.Evaluator` wrappers, so the runner does not know the
cache exists. An observation is keyed by the exact pixels handed to the adapter (SHA-256; for a
clip sample, those of every clip frame with its requested time),
the target's id and config, the adapter's identity and the adapter (factory) config; in a run
with arms, each arm keys on its own adapter and config, and a perturbation arm on its
perturbations and the perturbed pixels themselves (hashed per call, never from the per-frame
memo of the decoded pixels). The
identity of a Python adapter is the hash of its file and the package sources beside it; a
command adapter must declare ``adapterVersion`` (or ``version``) in its ``initialize``
result, else it is not cached (its command line alone says nothing about the code it runs).

Only observations go through the cache: comparison always runs, so a changed ``expect``
re-judges a cached observation without an adapter call. A hit is a
:class:`~glasskit_eval.adapters.calls.Call` marked ``cached``, so its result says so from the start.
Hits are served before the call policy (no rate-limit token, no retry); only a fresh, successful
observation is stored.

Ahead of decoding (``run --early-stop``): each frame hashed for a key is also noted for the
store's frame index (:meth:`ObservationStore.put_frame_page`, written once the run is over) under
its identity: the video's content SHA-256, the decoder (:func:`decode_identity`) and the frame's
index in the video's frame table. :meth:`CachingCaller.answer_ahead` then finds a sample's key, and so its observation, with
no frame decoded. Only videos whose frame table the engine trusts and seeks by are indexed or
read ahead (the table's frame for a time is the one decoding gives); anything unknown is a miss.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.resources
import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ..adapters.base import AdapterSpec, Evaluator, Sample, Target
from ..adapters.calls import Call, Caller
from ..plan.schedule import ScheduledSample
from ..support.jsonvalues import checked_steps, json_problem, to_plain
from ..video.fingerprint import pixel_sha256
from ..video.frametable import frame_table
from ._judge import walk_on_loop
from .case import target_of
from .observation_store import ObservationStore, key_digest

MODES = ("read", "write", "readwrite")
#: Frames per page of the frame index (a page is two small files: its entry and its witness).
PAGE_FRAMES = 256


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    #: Whole replay streams (``_streamcache``): answered from the cache, fed afresh, stored.
    stream_hits: int = 0
    stream_misses: int = 0
    stream_writes: int = 0
    #: Why the cache was off for this run's adapter, if it was.
    disabled: str | None = None


@functools.cache
def decode_identity() -> str | None:
    """What the pixels of a frame index depend on besides the video: PyAV and the FFmpeg libraries it
    runs, Pillow, and the frame engine's own sources (frame table, conversion, display orientation);
    None (no frame index) when they cannot be read."""
    try:
        import av
        import PIL

        digest = hashlib.sha256(repr((str(av.__version__), getattr(av, "ffmpeg_version_info", None),
                                      sorted(av.library_versions.items()), PIL.__version__)).encode())
        engine = importlib.resources.files(__package__.rpartition(".")[0] + ".video")
        for source in sorted((f for f in engine.iterdir() if f.name.endswith(".py")), key=lambda f: f.name):
            digest.update(f"{source.name}\n".encode())
            digest.update(source.read_bytes())
    except Exception:  # any doubt about the decoder: no index
        return None
    return digest.hexdigest()


@dataclass
class _Shared:
    """What every trial's caller shares."""

    store: ObservationStore
    mode: str
    stats: CacheStats = field(default_factory=CacheStats)
    #: Pixel hashes by (video path, size, mtime, frame index): the targets sharing a frame
    #: (and later trials) hash its pixels once. Hashing a 720p frame costs milliseconds.
    frame_hashes: dict[tuple[str, int, int, int], str] = field(default_factory=dict)
    #: The frames noted for the frame index by this run; the pages still to write (by name); the
    #: pages read (by name, verified).
    indexed: set[tuple[str, int, int, int]] = field(default_factory=set)
    unwritten: dict[str, tuple[dict[str, Any], dict[int, str]]] = field(default_factory=dict)
    pages: dict[str, dict[int, str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def pixel_hash(self, video_path: str, frame_index: int, image: Any) -> str:
        key = self._memo_key(video_path, frame_index)
        if key is None:
            return pixel_sha256(image)
        found = self.frame_hashes.get(key)
        if found is None:
            found = self.frame_hashes[key] = pixel_sha256(image)
        return found

    def page_identity(self, video_path: str, frame_index: int) -> dict[str, Any] | None:
        """The frame index page a decoded frame belongs to; None for a video the engine does not seek by
        its table (or whose decoder or content cannot be named)."""
        decoder = decode_identity()
        if decoder is None or not frame_table(Path(video_path)).seekable:
            return None
        video = self.store.video_identity(video_path, remember=self.writes)
        return None if video is None else {"decoder": decoder, "page": frame_index // PAGE_FRAMES, "video": video}

    def index_frame(self, video_path: str, frame_index: int, pixels: str) -> None:
        """Note a decoded frame's pixel hash for the frame index (written by :meth:`settle`)."""
        key = self._memo_key(video_path, frame_index)
        if not self.writes or key is None or key in self.indexed:
            return
        self.indexed.add(key)
        page = self.page_identity(video_path, frame_index)
        if page is not None:
            with self.lock:
                self.unwritten.setdefault(key_digest(page), (page, {}))[1][frame_index] = pixels

    def settle(self) -> None:
        """Write the frame index pages this run added to (two small files a page, each merged with what the
        store holds: a decode just made wins)."""
        with self.lock:
            pages, self.unwritten = self.unwritten, {}
        for page, pixels in pages.values():
            held = self.store.frame_page(page) or {}
            merged = held | pixels
            if merged != held:
                self.store.put_frame_page(page, merged)

    def indexed_pixels(self, video_path: str, frame_index: int) -> str | None:
        """A frame's pixel hash from the frame index (or this run's decodes), without decoding it."""
        page = self.page_identity(video_path, frame_index)
        if page is None:
            return None
        name = key_digest(page)
        with self.lock:
            fresh = self.unwritten.get(name, (page, {}))[1].get(frame_index)
            if fresh is not None:
                return fresh
            if name not in self.pages:
                self.pages[name] = self.store.frame_page(page) or {}
            return self.pages[name].get(frame_index)

    def known_hash(self, video_path: str, frame_index: int) -> str | None:
        """The memoized pixel hash of a frame, if it was hashed in this run (no decode)."""
        key = self._memo_key(video_path, frame_index)
        return None if key is None else self.frame_hashes.get(key)

    @staticmethod
    def _memo_key(video_path: str, frame_index: int) -> tuple[str, int, int, int] | None:
        try:
            st = os.stat(video_path)
        except OSError:
            return None
        return (video_path, st.st_size, st.st_mtime_ns, frame_index)

    @property
    def reads(self) -> bool:
        return self.mode in ("read", "readwrite")

    @property
    def writes(self) -> bool:
        return self.mode in ("write", "readwrite")


def plain_config(config: Any) -> Any:
    """A config as a key holds it: its plain JSON, or its repr when it is not JSON-like."""
    config = dict(config)
    return to_plain(config) if json_problem(config) is None else repr(config)


# -- adapter identity --------------------------------------------------------------------


def python_identity(target: str) -> str | None:
    """Hash of a ``module-or-file:callable`` adapter's sources; None when they cannot be found."""
    module, _sep, attr = target.rpartition(":")
    files: list[Path]
    if module.endswith(".py") or "/" in module or "\\" in module:
        path = Path(module).expanduser().resolve()
        if not path.is_file():
            return None
        files = [path, *_package_sources(path.parent)]
        base = path.parent
    else:
        try:
            spec = importlib.util.find_spec(module.split(".")[0])
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        if spec.submodule_search_locations:
            roots = [Path(p) for p in spec.submodule_search_locations]
            files = [f for root in roots for f in root.rglob("*.py")]
            base = roots[0].parent
        elif spec.origin and spec.origin.endswith(".py"):
            files = [Path(spec.origin)]
            base = files[0].parent
        else:
            return None
    digest = hashlib.sha256(f"python {attr}\n".encode())
    for path in sorted(set(files)):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        name = path.relative_to(base) if path.is_relative_to(base) else path
        digest.update(f"{name.as_posix()} {len(data)}\n".encode())
        digest.update(data)
    return "python:" + digest.hexdigest()


def _package_sources(directory: Path) -> list[Path]:
    """The ``.py`` files beside an adapter file and in the packages under it (what it can import)."""
    found = [p for p in directory.glob("*.py")]
    for sub in directory.iterdir():
        if sub.is_dir() and (sub / "__init__.py").is_file():
            found.extend(sub.rglob("*.py"))
    return found


def command_identity(command: str, initialize_result: Any) -> str | None:
    """The command line plus the version its ``initialize`` result declares; None without one."""
    if not isinstance(initialize_result, dict):
        return None
    version = initialize_result.get("adapterVersion", initialize_result.get("version"))
    if not isinstance(version, (str, int, float)) or isinstance(version, bool) or version == "":
        return None
    return "command:" + key_digest({"command": command, "version": str(version)})


# -- the wrappers --------------------------------------------------------------------------


class ObservationCache:
    """The observation cache of one run: its store and mode, and the adapter it keys on."""

    def __init__(self, spec: AdapterSpec, store: ObservationStore, mode: str, err: TextIO) -> None:
        if mode not in MODES:
            raise ValueError(f"cache mode {mode!r}")
        self.spec = spec
        self._shared = _Shared(store, mode)
        self._err = err
        self._told = False

    @property
    def stats(self) -> CacheStats:
        return self._shared.stats

    @property
    def store(self) -> ObservationStore:
        return self._shared.store

    @property
    def shared(self) -> _Shared:
        """What every trial's callers share (the stream cache keys and counts through it too)."""
        return self._shared

    def identity(self, evaluator: Evaluator, spec: AdapterSpec | None = None) -> str | None:
        """The adapter identity entries are keyed on; None (said once on the console) when it has none."""
        found = self._identity(evaluator, spec if spec is not None else self.spec)
        if found is None and not self._told:
            self._told = True
            print(f"observation cache off: {self._shared.stats.disabled}", file=self._err)
        return found

    def _identity(self, evaluator: Evaluator, spec: AdapterSpec) -> str | None:
        from ..adapters.command import CommandAdapterSpec
        from ..adapters.python import PythonAdapterSpec

        if isinstance(spec, PythonAdapterSpec):
            found = python_identity(spec.target)
            if found is None:
                self._shared.stats.disabled = f"the sources of Python adapter {spec.target} could not be read"
                return None
            # A declared version covers what the sources cannot show (weights, a remote model).
            declared = getattr(evaluator, "declared_version", None)
            return found if declared is None else key_digest({"sources": found, "version": declared})
        if isinstance(spec, CommandAdapterSpec):
            found = command_identity(spec.command, getattr(evaluator, "initialize_result", None))
            if found is None:
                self._shared.stats.disabled = (
                    f"adapter command `{spec.command}` declares no adapterVersion (or version) in "
                    "its initialize result; return one to let --cache reuse its observations")
            return found
        self._shared.stats.disabled = f"adapter {spec.describe()} has no known identity"
        return None

    def caller(self, inner: Caller, evaluator: Evaluator, config: Any, trial: int, *,
               spec: AdapterSpec | None = None, perturb: str | None = None) -> Caller:
        """``inner``, answered from the cache first; ``evaluator`` is the trial's own adapter.

        Later trials of ``--repeat`` get their own entries: each trial's answers are reused by the
        same trial of the next run, so flakiness stays measurable with a warm cache. An arm passes
        its own adapter ``spec`` (default: the run's) and its ``perturb`` chain.
        """
        identity = self.identity(evaluator, spec)
        if identity is None:
            return inner
        return CachingCaller(inner, self._shared, identity, config, trial, perturb)


class CachingCaller:
    """A :class:`~glasskit_eval.adapters.calls.Caller` that answers from the cache, asking ``inner`` on a miss."""

    def __init__(self, inner: Caller, shared: _Shared, identity: str, config: Any, trial: int = 1,
                 perturb: str | None = None) -> None:
        self.inner = inner
        self._trial = trial
        self._shared = shared
        self._identity = identity
        self._perturb = perturb
        self._config = plain_config(config)

    @property
    def batch(self) -> bool:
        return self.inner.batch

    def _pixels(self, video_path: str, frame_index: int, image: Any) -> str:
        if self._perturb is not None:
            return pixel_sha256(image)  # the perturbed pixels, not the decoded frame's memo
        pixels = self._shared.pixel_hash(video_path, frame_index, image)
        self._shared.index_frame(video_path, frame_index, pixels)
        return pixels

    def _key(self, target: Target, pixels: str, clip: list[list[Any]] | None) -> str:
        material: dict[str, Any] = {
            "adapter": self._identity, "adapter_config": self._config, "pixels": pixels,
            "target": {"id": target.id, "config": plain_config(dict(target.config))},
        }
        if clip is not None:
            # Every frame, in order, with the time it was asked for: the adapter sees both.
            material["clip"] = clip
        if self._perturb is not None:
            material["perturb"] = self._perturb
        if self._trial > 1:
            material["trial"] = self._trial  # trial 1 shares its entries with runs without --repeat
        return key_digest(material)

    def _digest(self, sample: Sample, target: Target) -> str:
        clip = ([[f.timestamp_s, self._pixels(sample.video_path, f.frame_index, f.image)] for f in sample.frames]
                if sample.is_clip else None)
        return self._key(target, self._pixels(sample.video_path, sample.frame_index, sample.image), clip)

    @property
    def answers_ahead(self) -> bool:
        """Whether :meth:`answer_ahead` can answer at all (lookups on, the decoded pixels unperturbed)."""
        return self._perturb is None and self._shared.reads

    def answer_ahead(self, sample: ScheduledSample, video_path: Path) -> tuple[Call, int, float] | None:
        """``sample``'s cached observation found with no frame decoded, with its anchor frame's index and
        media time; None when the frame index or the cache does not know it. Counts nothing."""
        if not self.answers_ahead:
            return None
        started = time.perf_counter()
        path = str(video_path)
        table = frame_table(video_path)
        if not table.seekable:
            return None  # the table's frame for a time may not be the one decoding gives
        anchor = table.select(sample.time)
        pixels = self._shared.indexed_pixels(path, anchor)
        clip: list[list[Any]] | None = None
        if sample.clip is not None:
            clip = []
            for entry in sample.clip.entries:
                # The planned frame must be the one decoding gives the time now.
                found = self._shared.indexed_pixels(path, entry.frame_index) if table.select(
                    entry.time) == entry.frame_index else None
                if found is None:
                    return None
                clip.append([float(entry.time), found])
            if sample.clip.entries[sample.clip.anchor].frame_index != anchor:
                return None
        if pixels is None:
            return None
        hit, observation = self._shared.store.get(self._key(target_of(sample), pixels, clip))
        if not hit:
            return None
        return (Call(observation, seconds=time.perf_counter() - started, cached=True), anchor,
                float(table.time_of(anchor)))

    def _lookup(self, sample: Sample, target: Target) -> tuple[str, bool, Any, float]:
        started = time.perf_counter()
        digest = self._digest(sample, target)
        if not self._shared.reads:
            return digest, False, None, 0.0
        hit, observation = self._shared.store.get(digest)
        return digest, hit, observation, time.perf_counter() - started

    async def _remember(self, digest: str, call: Call) -> None:
        if call.error is not None:
            return
        stats = self._shared.stats
        stats.misses += 1
        if not self._shared.writes:
            return
        # Checked with pauses: a huge observation must not hold up the loop (and Ctrl+C).
        problem, plain = await walk_on_loop(checked_steps(call.observation, copy=True))
        if problem is None:
            # On a thread: a slow disk must not stall decoding and other calls. Counted here,
            # on the event loop, so concurrent calls never race on the counters.
            stored = await asyncio.to_thread(self._shared.store.put, digest, plain)
            stats.writes += stored

    async def call(self, sample: Sample, target: Target) -> Call:
        digest, hit, observation, seconds = await asyncio.to_thread(self._lookup, sample, target)
        if hit:
            self._shared.stats.hits += 1
            return Call(observation, seconds=seconds, cached=True)
        done = await self.inner.call(sample, target)
        await self._remember(digest, done)
        return done

    async def call_many(self, samples: Sequence[Sample], target: Target) -> list[Call]:
        looked = await asyncio.to_thread(lambda: [self._lookup(s, target) for s in samples])
        missing = [i for i, (_digest, hit, _obs, _s) in enumerate(looked) if not hit]
        calls: list[Call | None] = [None] * len(samples)
        if missing:
            fresh = await self.inner.call_many([samples[i] for i in missing], target)
            for i, done in zip(missing, fresh):
                calls[i] = done
                await self._remember(looked[i][0], done)
        for i, (_digest, hit, observation, seconds) in enumerate(looked):
            if hit:
                self._shared.stats.hits += 1
                calls[i] = Call(observation, seconds=seconds, cached=True, batch_size=len(samples))
        return [c for c in calls if c is not None]

    async def cancel_pending(self) -> None:
        await self.inner.cancel_pending()
