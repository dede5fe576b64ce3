"""The stream cache's key (glasskit_eval.evaluation._streamcache): what a cached stream is reused for.

End-to-end behaviour (hits, misses, modes, damage, paced runs) is in ``test_e2e_stream_cache.py``.
"""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path
from typing import Any

from glasskit_eval.cases.model import EventSpec, StreamSpec, TargetSpec
from glasskit_eval.evaluation._streamcache import StreamCache
from glasskit_eval.evaluation.observation_cache import _Shared
from glasskit_eval.evaluation.observation_store import ObservationStore
from glasskit_eval.plan.feeds import FeedFrame

FRAMES = (FeedFrame(0, F(0)), FeedFrame(1, F(1, 25)), FeedFrame(2, F(2, 25)))
HASHES = {0: "a" * 64, 1: "b" * 64, 2: "c" * 64}
END = F(3, 25)


def spec(*, every: F | None = None, config: dict[str, Any] | None = None, label: str | None = None,
         window: tuple[F, F] = (F(0), F(1)), quiet: Any = None, index: int = 0) -> TargetSpec:
    events = (EventSpec(0, F(1, 25), window, True, "boiling", None, None),)
    return TargetSpec("pan", index, label, config or {}, (), StreamSpec(every, events, quiet, "alert"))


def cache(tmp_path: Path, *, identity: str = "python:x", config: dict[str, Any] | None = None,
          trial: int = 1) -> StreamCache:
    return StreamCache(_Shared(ObservationStore(tmp_path), "readwrite"), identity, config or {}, trial)


def test_the_key_names_adapter_target_feed_rate_trial_end_and_every_frame(tmp_path: Path) -> None:
    base = cache(tmp_path).digest(spec(), FRAMES, HASHES, END)
    assert base == cache(tmp_path).digest(spec(), FRAMES, dict(HASHES), END)
    others = [
        cache(tmp_path, identity="python:y").digest(spec(), FRAMES, HASHES, END),
        cache(tmp_path, config={"model": "b"}).digest(spec(), FRAMES, HASHES, END),
        cache(tmp_path, trial=2).digest(spec(), FRAMES, HASHES, END),
        cache(tmp_path).digest(spec(config={"k": 1}), FRAMES, HASHES, END),
        cache(tmp_path).digest(spec(every=F(1, 5)), FRAMES, HASHES, END),
        cache(tmp_path).digest(spec(), FRAMES, HASHES, F(4, 25)),
        cache(tmp_path).digest(spec(), FRAMES[:2], HASHES, END),
        cache(tmp_path).digest(spec(), FRAMES, {**HASHES, 1: "d" * 64}, END),
        cache(tmp_path).digest(spec(), (FRAMES[0], FeedFrame(1, F(1, 20)), FRAMES[2]), HASHES, END),
    ]
    assert len({base, *others}) == len(others) + 1


def test_scoring_settings_and_the_label_are_not_in_the_key(tmp_path: Path) -> None:
    """Windows, quiet spans and expectations rescore the stored emissions; like the sample cache,
    the key holds the target's id and config, not its label or place in the case."""
    base = cache(tmp_path).digest(spec(), FRAMES, HASHES, END)
    assert cache(tmp_path).digest(spec(window=(F(-1), F(2)), quiet=((F(0), F(1, 50)),)), FRAMES, HASHES, END) == base
    assert cache(tmp_path).digest(spec(label="Pan", index=3), FRAMES, HASHES, END) == base

