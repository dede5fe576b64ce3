"""Fingerprints of a run's inputs, so a resume can refuse inputs that changed.

Case files and config are hashed whole (SHA-256). Videos are hashed whole up to
``FULL_HASH_LIMIT`` and by size plus head and tail above it: container headers and
indexes sit at the ends, a re-encode changes them and usually the size, and hashing
gigabytes on every run would cost more than it buys.

Hashing reads the file and ``hashlib`` releases the GIL, so :class:`VideoDigests`
hashes videos on a background thread from the moment planning learns their paths,
while planning itself reads frame tables.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..support.fsio import sha256_file
from ..video.frametable import FileKey, file_key

#: Videos up to this size are hashed whole; larger ones by size plus head and tail.
FULL_HASH_LIMIT = 8 << 20
EDGE_BYTES = 1 << 20


def video_digest(path: Path, size: int) -> str:
    if size <= FULL_HASH_LIMIT:
        return sha256_file(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        digest.update(handle.read(EDGE_BYTES))
        handle.seek(size - EDGE_BYTES)
        digest.update(handle.read(EDGE_BYTES))
    return "edges:" + digest.hexdigest()


class VideoDigests:
    """Video digests computed ahead on one background thread.

    :meth:`start` queues a video as soon as its path is known; :meth:`digest` returns
    its result (waiting if needed). A file whose size or modification time changed
    in between is hashed again, so a digest always belongs to the file as it is.
    The thread ends when the queue is empty.
    """

    def __init__(self) -> None:
        self._futures: dict[FileKey, Future[str]] = {}
        self._queue: queue.SimpleQueue[tuple[Path, int, Future[str]]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None

    def start(self, path: Path) -> None:
        key = file_key(path)
        if key[1] < 0:
            return  # missing: the fingerprint records that, planning reports it
        with self._lock:
            if key in self._futures:
                return
            future: Future[str] = Future()
            self._futures[key] = future
            self._queue.put((path, key[1], future))
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="glasskit-digest", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                try:
                    path, size, future = self._queue.get_nowait()
                except queue.Empty:
                    self._worker = None
                    return
            try:
                future.set_result(video_digest(path, size))
            except BaseException as exc:  # delivered to whoever asks for this digest
                future.set_exception(exc)

    def digest(self, path: Path, size: int) -> str:
        """The digest of ``path`` as it is now (``size`` just read), computed once."""
        key = file_key(path)
        if key[1] != size:
            return video_digest(path, size)  # changing under us: no caching
        with self._lock:
            future = self._futures.get(key)
            if future is None:
                future = self._futures[key] = Future()
                future.set_running_or_notify_cancel()
                mine = True
            else:
                mine = False
        if mine:
            try:
                future.set_result(video_digest(path, size))
            except BaseException as exc:
                future.set_exception(exc)
        return future.result()


def fingerprint(root: Path, files: Iterable[Path], videos: Iterable[Path],
                digests: VideoDigests | None = None) -> dict[str, Any]:
    """Content fingerprints of input files (full SHA-256) and videos (size and hash).

    Paths are recorded relative to ``root`` when they are inside it, so a moved or
    copied eval directory still matches.
    """

    def name(path: Path) -> str:
        resolved = path.resolve()
        try:
            return resolved.relative_to(root.resolve()).as_posix()
        except ValueError:
            return str(resolved)

    digest = digests.digest if digests is not None else video_digest
    result: dict[str, Any] = {"files": {}, "videos": {}}
    for path in files:
        result["files"][name(path)] = sha256_file(path) if path.is_file() else None
    for path in videos:
        if not path.is_file():
            result["videos"][name(path)] = None
            continue
        size = path.stat().st_size
        result["videos"][name(path)] = {"size": size, "sha256": digest(path, size)}
    return result


def describe_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two fingerprints, one human sentence per input."""
    changes: list[str] = []
    for section, noun in (("files", "file"), ("videos", "video")):
        before: Mapping[str, Any] = old.get(section) or {}
        after: Mapping[str, Any] = new.get(section) or {}
        for path in sorted(set(before) | set(after)):
            if path not in after:
                changes.append(f"{noun} {path} is no longer selected")
            elif path not in before or (before[path] is None and after[path] is not None):
                changes.append(f"{noun} {path} was added")
            elif after[path] is None and before[path] is not None:
                changes.append(f"{noun} {path} was removed")
            elif before[path] != after[path]:
                detail = ""
                old_size = before[path].get("size") if isinstance(before[path], dict) else None
                new_size = after[path].get("size") if isinstance(after[path], dict) else None
                if section == "videos" and old_size != new_size:
                    detail = f" (size {old_size} -> {new_size} bytes)"
                changes.append(f"{noun} {path} changed{detail}")
    return changes
