"""Where pin files live, cheaply: commands ask this before loading the pinning machinery.

The vocabulary: a *pin* records the exact frame a sample resolved to; a case's pins live in
its *pin file*, ``<case>.frames.lock``. Most evals have no pin file; ``validate`` and ``run``
must not pay for decoding or for importing the pin format's modules then.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..cases.model import Case

PIN_FILE_SUFFIX = ".frames.lock"


def pin_file_path(case: Case) -> Path:
    """``<eval-dir>/cases/<case>.frames.lock``, next to the case file."""
    return case.path.with_name(case.path.stem + PIN_FILE_SUFFIX)


def any_pinned(cases: Iterable[Case]) -> bool:
    return any(pin_file_path(case).exists() for case in cases)


def read_pin_bytes(path: Path) -> bytes | None:
    """A pin file's bytes through the strict loader's file checks; None when there is none.

    Raises :class:`~glasskit_eval.support.strictjson.LoadError` for a FIFO, a device, a directory
    or a file over the frame-lock limit, without blocking on it.
    """
    # Here: the strict JSON reader is for evals that have pin files.
    from ..support import strictjson

    try:
        return strictjson.read_file(path, strictjson.FRAME_LOCK.max_bytes)
    except strictjson.NotFound:
        return None
