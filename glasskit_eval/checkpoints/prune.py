"""Pruning: completed checkpoints beyond the most recent few are deleted at the end of a run.

Every run leaves a completed checkpoint behind (it is the record of what the adapter said),
so a CI machine that keeps its eval directory would otherwise collect them forever. Only
complete checkpoints of the same kind are pruned: an unfinished one may still be resumed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import CheckpointError
from .store import COMPLETE, checkpoints_root, read_manifest

#: Completed checkpoints kept by default (``--keep-checkpoints``).
DEFAULT_KEEP = 10


def prune_completed(eval_dir: Path, kind: str, keep: int, *, current: Path | None = None) -> list[Path]:
    """Delete the completed ``kind`` checkpoints beyond the ``keep`` most recent; 0 keeps all.

    ``current`` (the checkpoint of the run that is ending) is never deleted. Returns the
    directories deleted. Directories without a readable manifest are left alone.
    """
    root = checkpoints_root(eval_dir)
    if keep <= 0 or not root.is_dir():
        return []
    done = []
    for folder in root.iterdir():
        if not folder.is_dir():
            continue
        try:
            manifest = read_manifest(folder)
        except CheckpointError:
            continue
        if manifest.kind == kind and manifest.status == COMPLETE:
            done.append((manifest.updated_at, manifest.id, folder))
    done.sort(reverse=True)
    keep_path = current.resolve() if current is not None else None
    removed = []
    for _updated, _id, folder in done[keep:]:
        if folder.resolve() == keep_path:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
