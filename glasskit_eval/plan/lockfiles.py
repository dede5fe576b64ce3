"""Where frame locks live, cheaply: commands ask this before loading the pinning machinery.

Most evals have no lock; ``validate`` and ``run`` must not pay for decoding or for importing
the lock format's modules then (start-up budget).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..cases.model import Case

LOCK_SUFFIX = ".frames.lock"


def lock_path(case: Case) -> Path:
    """``<eval-dir>/cases/<case>.frames.lock``, next to the case file."""
    return case.path.with_name(case.path.stem + LOCK_SUFFIX)


def any_locked(cases: Iterable[Case]) -> bool:
    return any(lock_path(case).exists() for case in cases)
