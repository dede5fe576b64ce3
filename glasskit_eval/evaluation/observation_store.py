"""The content-keyed observation store on disk (no adapters here; see ``run.cache``).

Layout under the cache root::

    v1/ab/ab12...<64 hex>.json     one observation, named by the SHA-256 of its key

An entry is written to a temporary file in its directory and renamed into place, so a
reader sees a whole entry or none; two runs that write the same key write the same
observation, and there is no shared index to lose updates to. A hit refreshes the
entry's mtime, which is what the LRU pruning orders by. An unreadable entry is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Default bound of the observation cache, pruned least recently used first.
DEFAULT_MAX_MB = 512
_VERSION_DIR = "v1"
#: Temporary files older than this are left over from a killed writer.
_STALE_TEMP_S = 3600.0


def default_observation_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$GLASSKIT_EVAL_CACHE_DIR/observations``, else beside the per-user video cache."""
    from ..store.video_cache import CACHE_ENV, default_cache_dir

    env = os.environ if environ is None else environ
    override = env.get(CACHE_ENV)
    if override:
        return Path(override).expanduser() / "observations"
    return default_cache_dir(env).parent / "observations"


def key_digest(material: Mapping[str, Any]) -> str:
    """The entry name for a key: canonical JSON (sorted keys), hashed."""
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PruneStats:
    root: Path
    files: int
    bytes: int
    kept_bytes: int


class ObservationStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, digest: str) -> Path:
        return self.root / _VERSION_DIR / digest[:2] / f"{digest}.json"

    def get(self, digest: str) -> tuple[bool, Any]:
        """``(True, observation)`` for a readable entry, else ``(False, None)``."""
        path = self._path(digest)
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return False, None
        if not isinstance(data, dict) or data.get("key") != digest or "observation" not in data:
            return False, None
        with contextlib.suppress(OSError):
            os.utime(path)  # the LRU clock
        return True, data["observation"]

    def put(self, digest: str, observation: Any) -> bool:
        """Store a JSON-plain observation; False (and nothing changed) when the disk refuses."""
        path = self._path(digest)
        data = json.dumps({"key": digest, "observation": observation}, sort_keys=True,
                          ensure_ascii=False, allow_nan=False).encode("utf-8")
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "xb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True

    def _entries(self) -> Iterator[os.DirEntry[str]]:
        base = self.root / _VERSION_DIR
        try:
            shards = list(os.scandir(base))
        except OSError:
            return
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                yield from os.scandir(shard.path)

    def size(self) -> int:
        total = 0
        for entry in self._entries():
            with contextlib.suppress(OSError):
                total += entry.stat(follow_symlinks=False).st_size
        return total

    def prune(self, max_bytes: int) -> PruneStats:
        """Remove least recently used entries until at most ``max_bytes`` remain (0: all).

        Safe beside running writers and readers: a removed entry is a later miss.
        """
        now = time.time()
        live: list[tuple[float, int, str]] = []
        removed = removed_bytes = 0
        for entry in self._entries():
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.name.endswith(".tmp"):
                if now - st.st_mtime > _STALE_TEMP_S and _unlink(entry.path):
                    removed, removed_bytes = removed + 1, removed_bytes + st.st_size
                continue
            live.append((st.st_mtime, st.st_size, entry.path))
        total = sum(size for _mtime, size, _path in live)
        for _mtime, size, path in sorted(live):
            if total <= max_bytes:
                break
            if _unlink(path):
                removed, removed_bytes = removed + 1, removed_bytes + size
            total -= size
        return PruneStats(self.root, removed, removed_bytes, total)


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError:
        return False
    return True
