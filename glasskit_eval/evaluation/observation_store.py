"""The content-keyed observation store on disk (no adapters here; see ``run.cache``).

Layout under the cache root::

    CACHEDIR.TAG                   marks the folder as ours (and as a cache to backup tools)
    v1/ab/ab12...<64 hex>.json     one observation, named by the SHA-256 of its key

The same kind of entry holds the frame index ``run --early-stop`` reads ahead with, in pages: a
page names a video's content SHA-256, the decoder and a run of frame indexes, and holds the
SHA-256 of each of those frames' pixels that a decode has seen; beside it a *witness* is named by
the page and the digest of everything it holds. A page is believed only when its witness exists:
a page edited or copied to point a frame at other pixels names a witness no run wrote, so the
whole page is a miss. A video's content SHA-256 is kept too, by its path, size, times and inode,
so a file is hashed once.

An entry is written to a temporary file in its directory and renamed into place, so a
reader sees a whole entry or none; two runs that write the same key write the same
observation, and there is no shared index to lose updates to. A hit refreshes the
entry's mtime, which is what the LRU pruning orders by. An entry the strict loader
(``support.strictjson``) refuses, or that is not the entry of its key, is a miss.

``--cache DIR`` may name any folder, so pruning deletes only what this module wrote: entry
and temporary files by their exact name pattern, in shard folders of the version folder, none
of them reached through a symlink, and only in a folder that is a cache (it carries our tag, or
holds nothing but the version folder of a cache written before the tag existed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..support import strictjson
from ..support.fsio import sha256_file

#: Default bound of the observation cache, pruned least recently used first.
DEFAULT_MAX_MB = 512
_VERSION_DIR = "v1"
#: Temporary files older than this are left over from a killed writer.
_STALE_TEMP_S = 3600.0
_TAG_NAME = "CACHEDIR.TAG"
#: The signature line of the Cache Directory Tagging Specification, then the line that makes the tag ours.
_TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
             "# This folder is a glasskit_eval observation cache (run --cache); its entries may be pruned.\n")
_SHARD = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"([0-9a-f]{64})\.json")
_TEMP = re.compile(r"\.([0-9a-f]{64})\.json\.[0-9a-f]{12}\.tmp")
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Unlinking by name inside an opened folder keeps a folder swapped for a symlink mid-prune harmless.
_DIR_FD = os.unlink in os.supports_dir_fd and os.open in os.supports_dir_fd


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
        self._tagged = False
        self._videos: dict[tuple[Any, ...], str | None] = {}
        self._videos_lock = threading.Lock()
        self._hashing: dict[tuple[Any, ...], threading.Lock] = {}

    def check_is_cache(self) -> None:
        """Raise ``UsageError`` unless the root is missing, empty or an observation cache."""
        reason = _not_a_cache(self.root)
        if reason is not None:
            raise UsageError(f"--cache {self.root}: not an observation cache ({reason}); "
                             "name a new or empty folder, or one a run with --cache made")

    def _path(self, digest: str) -> Path:
        return self.root / _VERSION_DIR / digest[:2] / f"{digest}.json"

    def get(self, digest: str, kind: strictjson.Kind = strictjson.CACHE_ENTRY) -> tuple[bool, Any]:
        """``(True, observation)`` for a readable entry, else ``(False, None)``."""
        path = self._path(digest)
        try:
            # Through no symlink: entries are files this store wrote (a FIFO or a link to a device is a miss).
            data = strictjson.load(path, kind, follow_symlinks=False)
        except strictjson.LoadError:
            return False, None
        if not isinstance(data, dict) or data.get("key") != digest or "observation" not in data:
            return False, None
        with contextlib.suppress(OSError):
            os.utime(path)  # the LRU clock
        return True, data["observation"]

    def put(self, digest: str, observation: Any, kind: strictjson.Kind = strictjson.CACHE_ENTRY) -> bool:
        """Store a JSON-plain observation; False (and nothing changed) when the disk refuses."""
        path = self._path(digest)
        data = json.dumps({"key": digest, "observation": observation}, sort_keys=True,
                          ensure_ascii=False, allow_nan=False).encode("utf-8")
        if len(data) > kind.max_bytes:
            return False  # the loader would refuse it: every later run would miss it anyway
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._tag()
            with open(tmp, "xb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True

    def frame_page(self, page: Mapping[str, Any]) -> dict[int, str] | None:
        """A page of the frame index (``page`` names the video, the decoder and the page): frame index ->
        pixel hash, when the page and its witness agree; else None."""
        hit, entry = self.get(key_digest({"frame_page": page}))
        pixels = entry.get("pixels") if hit and isinstance(entry, dict) and entry.get("page") == page else None
        if not isinstance(pixels, dict) or not all(
                k.isdigit() and isinstance(v, str) and _SHA256.fullmatch(v) for k, v in pixels.items()):
            return None
        witness = {"page": page, "pixels_sha256": key_digest(pixels)}
        seen, found = self.get(key_digest(witness))
        return {int(k): v for k, v in pixels.items()} if seen and found == witness else None

    def put_frame_page(self, page: Mapping[str, Any], pixels: Mapping[int, str]) -> None:
        """Write a page of the frame index: its witness (named by the page and the digest of its
        pixel hashes) first, then the page."""
        plain = {str(k): v for k, v in sorted(pixels.items())}
        witness = {"page": dict(page), "pixels_sha256": key_digest(plain)}
        if self.put(key_digest(witness), witness):
            self.put(key_digest({"frame_page": page}), {"page": dict(page), "pixels": plain})

    def video_identity(self, path: str, *, remember: bool) -> str | None:
        """The SHA-256 of a video file's content, computed once per file (by its real path, size,
        modification and change times and inode; kept in the store when ``remember``); None when the
        file cannot be read or changes while it is hashed."""
        stamp = _file_stamp(path)
        if stamp is None:
            return None
        with self._videos_lock:
            if stamp in self._videos:
                return self._videos[stamp]
            # One file's hash at a time, while lookups of other videos (and of frames) go on.
            hashing = self._hashing.setdefault(stamp, threading.Lock())
        with hashing:
            with self._videos_lock:
                if stamp in self._videos:
                    return self._videos[stamp]
            named = {"video_file": list(stamp)}
            hit, entry = self.get(key_digest(named))
            found = entry.get("sha256") if hit and isinstance(entry, dict) and entry.get("file") == named else None
            if not isinstance(found, str) or not _SHA256.fullmatch(found):
                try:
                    found = sha256_file(Path(stamp[0]))
                except OSError:
                    found = None
                if _file_stamp(path) != stamp:
                    found = None  # written to while it was read: no identity
                elif found is not None and remember:
                    self.put(key_digest(named), {"file": named, "sha256": found})
            with self._videos_lock:
                self._videos[stamp] = found
            return found

    def _tag(self) -> None:
        if self._tagged:
            return
        tag = self.root / _TAG_NAME
        if not tag.exists():
            with contextlib.suppress(FileExistsError), open(tag, "x", encoding="ascii") as handle:
                handle.write(_TAG_TEXT)
        self._tagged = True

    def _entries(self) -> Iterator[os.DirEntry[str]]:
        """Regular files named like our entries or temporaries, in real shard folders."""
        base = self.root / _VERSION_DIR
        try:
            if not stat.S_ISDIR(os.lstat(base).st_mode):
                return
            shards = list(os.scandir(base))
        except OSError:
            return
        for shard in shards:
            if not _SHARD.fullmatch(shard.name) or not shard.is_dir(follow_symlinks=False):
                continue
            try:
                names = list(os.scandir(shard.path))
            except OSError:
                continue
            for entry in names:
                match = _ENTRY.fullmatch(entry.name) or _TEMP.fullmatch(entry.name)
                if match and match.group(1).startswith(shard.name) and entry.is_file(follow_symlinks=False):
                    yield entry

    def size(self) -> int:
        total = 0
        for entry in self._entries():
            with contextlib.suppress(OSError):
                total += entry.stat(follow_symlinks=False).st_size
        return total

    def prune(self, max_bytes: int) -> PruneStats:
        """Remove least recently used entries until at most ``max_bytes`` remain (0: all).

        Safe beside running writers and readers: a removed entry is a later miss. Raises
        ``UsageError`` (and removes nothing) when the root is not an observation cache.
        """
        self.check_is_cache()
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


def _file_stamp(path: str) -> tuple[str, int, int, int, int, int] | None:
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return real, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


def _not_a_cache(root: Path) -> str | None:
    """Why ``root`` is not a folder pruning may touch, or None."""
    try:
        names = set(os.listdir(root))
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return "not a folder"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if _TAG_NAME in names:
        # Another run may be writing the tag this moment (created, not yet filled): give it a second.
        for _attempt in range(20):
            try:
                with open(root / _TAG_NAME, "rb") as handle:
                    text = handle.read(len(_TAG_TEXT) + 1).decode("ascii", "replace")
            except OSError:
                break
            if text == _TAG_TEXT:
                return None
            if not _TAG_TEXT.startswith(text):
                break
            time.sleep(0.05)
        return f"its {_TAG_NAME} was not written by glasskit_eval"
    if not names <= {_VERSION_DIR}:
        return f"it holds other files, e.g. {sorted(names - {_VERSION_DIR})[0]!r}"
    if names:
        base = root / _VERSION_DIR
        try:
            if not stat.S_ISDIR(os.lstat(base).st_mode):
                return f"{_VERSION_DIR} is not a folder"
            inside = os.listdir(base)
        except OSError as exc:
            return exc.strerror or type(exc).__name__
        if not all(_SHARD.fullmatch(name) for name in inside):
            return f"{_VERSION_DIR} holds other files"
    return None


def _unlink(path: str) -> bool:
    """Remove one entry file by name, reaching it from the root through no symlink."""
    try:
        if not _DIR_FD:
            os.unlink(path)
            return True
        shard_path, name = os.path.split(path)
        base_path, shard = os.path.split(shard_path)
        root, version = os.path.split(base_path)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        with contextlib.ExitStack() as fds:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
            fds.callback(os.close, fd)
            for folder in (version, shard):
                fd = os.open(folder, flags, dir_fd=fd)
                fds.callback(os.close, fd)
            os.unlink(name, dir_fd=fd)
    except OSError:
        return False
    return True
