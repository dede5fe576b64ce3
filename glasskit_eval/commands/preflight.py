"""Checks a run makes before its first adapter call, so a mistake costs no paid call.

Each refuses what would otherwise fail or do harm only after the adapter has been called:
a ``--cache`` folder that is not an observation cache (its pruning would delete files).
"""

from __future__ import annotations

from pathlib import Path

from .requests import RunRequest


def preflight(request: RunRequest) -> None:
    """Raise the :class:`~glasskit_eval.errors.EvalError` the first failing check finds."""
    if request.cache_dir is not None:
        from ..evaluation.observation_store import ObservationStore

        ObservationStore(Path(request.cache_dir)).check_is_cache()
