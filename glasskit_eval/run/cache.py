"""``run --cache``: reuse observations of frames an adapter has already judged.

:class:`CachingSpec` wraps an :class:`~glasskit_eval.adapters.base.AdapterSpec`; its evaluators
are :class:`~glasskit_eval.adapters.base.Evaluator` wrappers, so the runner does not know the
cache exists. An observation is keyed by the exact pixels handed to the adapter (SHA-256),
the target's id and config, the adapter's identity and the adapter (factory) config. The
identity of a Python adapter is the hash of its file and the package sources beside it; a
command adapter must declare ``adapterVersion`` (or ``version``) in its ``initialize``
result, else it is not cached (its command line alone says nothing about the code it runs).

Only observations go through the cache: comparison always runs, so a changed ``expect``
re-judges a cached observation without an adapter call. The judge wrapper marks those
results ``cached: true`` through a side channel keyed by the sample.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from ..adapters.base import AdapterSpec, Evaluator, FactoryConfig, Sample, Target
from ..plan.schedule import ScheduledSample
from ..results import SampleResult, TimingMode
from ..support.jsonvalues import json_problem, to_plain
from ..video.fingerprint import pixel_sha256
from ..video.frames import DecodedFrame
from .judge import Judge
from .obscache import ObservationStore, key_digest

MODES = ("read", "write", "readwrite")


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    #: Why the cache was off for this run's adapter, if it was.
    disabled: str | None = None


@dataclass
class _Shared:
    """What every trial's evaluator and the judge wrapper share."""

    store: ObservationStore
    mode: str
    stats: CacheStats = field(default_factory=CacheStats)
    #: (case, target, sample index) of observations served from the cache, until judged.
    served: set[tuple[str, str, int]] = field(default_factory=set)
    #: Pixel hashes by (video path, size, mtime, frame index): the targets sharing a frame
    #: (and later trials) hash its pixels once. Hashing a 720p frame costs milliseconds.
    frame_hashes: dict[tuple[str, int, int, int], str] = field(default_factory=dict)

    def pixel_hash(self, sample: Sample) -> str:
        try:
            st = os.stat(sample.video_path)
        except OSError:
            return pixel_sha256(sample.image)
        key = (sample.video_path, st.st_size, st.st_mtime_ns, sample.frame_index)
        found = self.frame_hashes.get(key)
        if found is None:
            found = self.frame_hashes[key] = pixel_sha256(sample.image)
        return found

    @property
    def reads(self) -> bool:
        return self.mode in ("read", "readwrite")

    @property
    def writes(self) -> bool:
        return self.mode in ("write", "readwrite")


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


class CachingSpec:
    """An adapter spec whose evaluators consult the observation cache first."""

    def __init__(self, inner: AdapterSpec, store: ObservationStore, mode: str, err: TextIO) -> None:
        if mode not in MODES:
            raise ValueError(f"cache mode {mode!r}")
        self.inner = inner
        self._shared = _Shared(store, mode)
        self._err = err
        self._told = False
        #: The trial whose evaluator ``create`` makes next (see :meth:`trial_started`).
        self._trial = 1

    @property
    def stats(self) -> CacheStats:
        return self._shared.stats

    @property
    def store(self) -> ObservationStore:
        return self._shared.store

    def describe(self) -> str:
        return self.inner.describe()

    def trial_started(self, trial: int) -> None:
        """Later trials of ``--repeat`` get their own entries: each trial's answers are reused
        by the same trial of the next run, so flakiness stays measurable with a warm cache."""
        self._trial = trial

    def _identity(self, evaluator: Evaluator) -> str | None:
        from ..adapters.command import CommandAdapterSpec
        from ..adapters.python import PythonAdapterSpec

        # Other wrappers (timeouts, retries) may sit between us and the real adapter; by
        # convention they keep what they wrap in ``inner``.
        spec, core = _innermost(self.inner), _innermost(evaluator)
        if isinstance(spec, PythonAdapterSpec):
            found = python_identity(spec.target)
            if found is None:
                self._shared.stats.disabled = f"the sources of Python adapter {spec.target} could not be read"
                return None
            # A declared version covers what the sources cannot show (weights, a remote model).
            declared = getattr(core, "declared_version", None)
            return found if declared is None else key_digest({"sources": found, "version": declared})
        if isinstance(spec, CommandAdapterSpec):
            found = command_identity(spec.command, getattr(core, "initialize_result", None))
            if found is None:
                self._shared.stats.disabled = (
                    f"adapter command `{spec.command}` declares no adapterVersion (or version) in "
                    "its initialize result; return one to let --cache reuse its observations")
            return found
        self._shared.stats.disabled = f"adapter {self.inner.describe()} has no known identity"
        return None

    async def create(self, factory_config: FactoryConfig) -> Evaluator:
        evaluator = await self.inner.create(factory_config)
        identity = self._identity(evaluator)
        if identity is None:
            if not self._told:
                self._told = True
                print(f"observation cache off: {self._shared.stats.disabled}", file=self._err)
            return evaluator
        return CachingEvaluator(evaluator, self._shared, identity, factory_config.config, self._trial)

    def judge(self, base: Judge) -> Judge:
        """``base``, marking results whose observation came from the cache."""
        served = self._shared.served

        def cached_judge(sample: ScheduledSample, observation: Any, frame: DecodedFrame, duration: float,
                         timing_mode: TimingMode) -> SampleResult:
            key = (sample.case.name, sample.target.id, sample.sample_index)
            # Taken before judging: a judge that raises must not leave the mark for a later trial.
            hit = key in served
            served.discard(key)
            result = base(sample, observation, frame, duration, timing_mode)
            return replace(result, cached=True) if hit else result

        return cached_judge


def _innermost(obj: Any) -> Any:
    """Follow ``inner`` attributes to the wrapped adapter spec or evaluator."""
    for _depth in range(16):
        inner = getattr(obj, "inner", None)
        if inner is None:
            return obj
        obj = inner
    return obj


class CachingEvaluator:
    """An :class:`Evaluator` that answers from the cache and asks ``inner`` only on a miss."""

    def __init__(self, inner: Evaluator, shared: _Shared, identity: str, config: Any, trial: int = 1) -> None:
        self.inner = inner
        self._trial = trial
        self._shared = shared
        self._identity = identity
        self._config = to_plain(dict(config)) if json_problem(dict(config)) is None else repr(dict(config))

    @property
    def batch(self) -> bool:
        return self.inner.batch

    def _digest(self, sample: Sample, target: Target) -> str:
        config = dict(target.config)
        material: dict[str, Any] = {
            "adapter": self._identity, "adapter_config": self._config,
            "pixels": self._shared.pixel_hash(sample),
            "target": {"id": target.id, "config": to_plain(config) if json_problem(config) is None
                       else repr(config)},
        }
        if self._trial > 1:
            material["trial"] = self._trial  # trial 1 shares its entries with runs without --repeat
        return key_digest(material)

    def _lookup(self, sample: Sample, target: Target) -> tuple[str, bool, Any]:
        digest = self._digest(sample, target)
        if not self._shared.reads:
            return digest, False, None
        hit, observation = self._shared.store.get(digest)
        return digest, hit, observation

    def _served(self, sample: Sample, target: Target) -> None:
        self._shared.stats.hits += 1
        self._shared.served.add((sample.case_name, target.id, sample.sample_index))

    async def _remember(self, digest: str, observation: Any) -> None:
        stats = self._shared.stats
        stats.misses += 1
        if self._shared.writes and json_problem(observation) is None:
            # On a thread: a slow disk must not stall decoding and other calls. Counted here,
            # on the event loop, so concurrent calls never race on the counters.
            stored = await asyncio.to_thread(self._shared.store.put, digest, to_plain(observation))
            stats.writes += stored

    async def evaluate(self, sample: Sample, target: Target) -> Any:
        digest, hit, observation = await asyncio.to_thread(self._lookup, sample, target)
        if hit:
            self._served(sample, target)
            return observation
        observation = await self.inner.evaluate(sample, target)
        await self._remember(digest, observation)
        return observation

    async def evaluate_many(self, samples: Sequence[Sample], target: Target) -> list[Any]:
        looked = await asyncio.to_thread(lambda: [self._lookup(s, target) for s in samples])
        missing = [i for i, (_digest, hit, _obs) in enumerate(looked) if not hit]
        answers: list[Any] = [obs for _digest, _hit, obs in looked]
        if missing:
            fresh = await self.inner.evaluate_many([samples[i] for i in missing], target)
            if len(fresh) != len(missing):
                # The runner reports the count mismatch; it must see the adapter's own answer.
                return list(fresh)
            for i, observation in zip(missing, fresh):
                answers[i] = observation
                await self._remember(looked[i][0], observation)
        for i, (_digest, hit, _obs) in enumerate(looked):
            if hit:
                self._served(samples[i], target)
        return answers

    async def cancel_pending(self) -> None:
        await self.inner.cancel_pending()

    async def close(self) -> None:
        await self.inner.close()
