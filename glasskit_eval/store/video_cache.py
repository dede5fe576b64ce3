"""The per-user, content-addressed download cache.

Layout under the cache root (shared by every eval directory of the user)::

    sha256/ab/abcdef...<64 hex>.mp4                  verified video
    sha256/ab/.abcdef....mp4.partial                 download in progress or interrupted
    sha256/ab/.abcdef....mp4.lock                    held while downloading

A download streams into the ``.partial`` file under an exclusive file lock, is
hashed as it arrives, and is renamed into place only when the SHA-256 matches.
An interrupted download is resumed with a Range request (and restarted once
if the resumed result does not verify); a partial file is never used. A body
that ends before its Content-Length (or Content-Range end) counts as
interrupted, and so does one that stalls: fewer than ``STALL_BYTES`` in
``STALL_TIMEOUT_S`` (total silence is bounded by the request's socket timeout).

A cached video is hashed again every time a command first uses it: a record of
size and mtime beside it (older versions wrote ``.verified.json``) is trusted by
nothing, since whatever replaced the bytes could restore both, or rewrite the
record. Within one process the hash is remembered for the exact file state it
was computed on (device, inode, size, mtime and ctime; ctime cannot be set back
by ``utime``), so a run with many cases on one video hashes it once. Cost:
about 1.9 s per GiB on a loaded 2-core machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from ..errors import StoreError
from ..support.fsio import FileLock
from .progress import format_size
from .transport import HttpResponse, TransportError

if TYPE_CHECKING:
    from hashlib import _Hash as Hash

    from .progress import Progress

CACHE_ENV = "GLASSKIT_EVAL_CACHE_DIR"
_CHUNK = 1024 * 1024
STALL_TIMEOUT_S = 30.0
STALL_BYTES = 64 * 1024
_NAME = re.compile(r"^\.?([0-9a-f]{64})(\.[A-Za-z0-9]{1,10})?(\.partial|\.lock|\.verified\.json)?$")
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$", re.ASCII)
#: (path, dev, inode, size, mtime_ns, ctime_ns) -> SHA-256 hashed in this process.
_HASHED: dict[tuple[str, int, int, int, int, int], str] = {}


def default_cache_dir(environ: Mapping[str, str] | None = None, platform: str | None = None,
                      home: Path | None = None) -> Path:
    """The spec's per-user location; ``GLASSKIT_EVAL_CACHE_DIR`` overrides it."""
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform
    base = Path.home() if home is None else home
    override = env.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    if plat == "darwin":
        return base / "Library" / "Caches" / "glasskit" / "eval" / "videos"
    if plat == "win32":
        local = env.get("LOCALAPPDATA")
        root = Path(local) if local else base / "AppData" / "Local"
        return root / "GlassKit" / "Cache" / "eval" / "videos"
    xdg = env.get("XDG_CACHE_HOME")
    # XDG says relative values are invalid and must be ignored.
    root = Path(xdg) if xdg and os.path.isabs(xdg) else base / ".cache"
    return root / "glasskit" / "eval" / "videos"


#: Opens the object for reading from a byte offset (a Range request when > 0).
Opener = Callable[[int], HttpResponse]


@dataclass(frozen=True)
class PruneResult:
    root: Path
    files: int
    bytes: int
    busy: int


class VideoCache:
    def __init__(self, root: Path, *, resume_attempts: int = 5, stall_timeout_s: float = STALL_TIMEOUT_S,
                 stall_bytes: int = STALL_BYTES, clock: Callable[[], float] = time.monotonic) -> None:
        self.root = Path(root)
        self.resume_attempts = resume_attempts
        #: A transfer that brings fewer than ``stall_bytes`` in ``stall_timeout_s`` is dropped
        #: and resumed: a trickling server would otherwise hold a download for ever.
        self.stall_timeout_s = stall_timeout_s
        self.stall_bytes = stall_bytes
        self.clock = clock

    def path_for(self, sha256: str, key: str) -> Path:
        suffix = Path(key).suffix.lower()
        return self.root / "sha256" / sha256[:2] / f"{sha256}{suffix}"

    def _sidecar(self, final: Path, kind: str) -> Path:
        return final.with_name(f".{final.name}.{kind}")

    def lookup(self, sha256: str, key: str) -> Path | None:
        """The cached file if its bytes hash to ``sha256`` now, else None (a damaged file is removed)."""
        final = self.path_for(sha256, key)
        if not final.is_file():
            return None
        if _verified_hash(final) == sha256:
            return final
        with contextlib.suppress(OSError):
            final.unlink()
        return None

    def fetch(self, sha256: str, key: str, opener: Opener, *, describe: str,
              notify: Callable[[str], None] | None = None, progress: Progress | None = None) -> Path:
        """The cached file for ``sha256``, downloading it with ``opener`` when missing.

        ``progress`` hears (bytes so far, total or None) while downloading, and close() after.
        """
        found = self.lookup(sha256, key)
        if found is not None:
            return found
        final = self.path_for(sha256, key)
        try:
            final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            lock = FileLock(self._sidecar(final, "lock"))
            lock.acquire()
        except OSError as exc:
            raise StoreError(f"cannot use the video cache at {self.root}: {exc.strerror or exc}; "
                             f"set {CACHE_ENV} to a writable directory") from None
        try:
            # Another process may have finished the same download while we waited.
            found = self.lookup(sha256, key)
            if found is not None:
                return found
            if notify is not None:
                notify(f"Downloading {describe} into the video cache")
            try:
                self._download(final, sha256, opener, describe, progress)
            finally:
                if progress is not None:
                    progress.close()
            return final
        finally:
            lock.release()

    def _download(self, final: Path, sha256: str, opener: Opener, describe: str,
                  progress: Progress | None) -> None:
        partial = self._sidecar(final, "partial")
        resumed = partial.exists() and partial.stat().st_size > 0
        try:
            digest = self._transfer(partial, opener, describe, progress)
            if digest != sha256 and resumed:
                # The kept bytes may be from a damaged or older download: start over once.
                partial.unlink()
                digest = self._transfer(partial, opener, describe, progress)
        except BaseException as exc:
            # Keep bytes worth resuming; an empty partial is just clutter.
            with contextlib.suppress(OSError):
                if partial.stat().st_size == 0:
                    partial.unlink()
            if isinstance(exc, OSError):
                raise StoreError(f"cannot write to the video cache at {self.root}: "
                                 f"{exc.strerror or exc}; free some space or set {CACHE_ENV}") from None
            raise
        if digest != sha256:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise StoreError(f"downloaded video {describe} has SHA-256 {digest}, but the case file "
                             f"declares {sha256}; the download was deleted. Check that the case's "
                             "video key and sha256 match what `video-store upload` printed")
        os.chmod(partial, 0o600)
        os.replace(partial, final)
        _remember(final, sha256)
        # Records of older versions: trusted by nothing now, so not left to look authoritative.
        with contextlib.suppress(OSError):
            self._sidecar(final, "verified.json").unlink()

    def _transfer(self, partial: Path, opener: Opener, describe: str, progress: Progress | None) -> str:
        """Bring ``partial`` to the whole object, resuming where possible; returns its SHA-256."""
        hasher = hashlib.sha256()
        with open(partial, "ab+") as out:
            out.seek(0)
            for chunk in iter(lambda: out.read(_CHUNK), b""):
                hasher.update(chunk)
            failures = 0
            while True:
                start = out.tell()
                response = opener(start)
                with response:
                    if response.status == 416:
                        break  # nothing after ``start``: the partial file holds the whole object
                    if response.status == 200 or not _range_starts_at(response, start):
                        # The whole object came back (no Range support), or a range we did not
                        # ask for: start again from the first byte.
                        out.seek(0)
                        out.truncate()
                        hasher = hashlib.sha256()
                        if response.status != 200:
                            failures += 1
                            if failures >= self.resume_attempts:
                                raise StoreError(f"download of {describe} got an unexpected "
                                                 "Content-Range from the store; retry later")
                            continue
                    end, total = _expected_end(response)
                    try:
                        self._copy(response, out, hasher, total, progress)
                        if end is not None and out.tell() < end:
                            # A clean close before Content-Length: urllib reports no error.
                            raise TransportError(f"the connection closed after {out.tell()} of {end} "
                                                 "bytes", retryable=True)
                        break
                    except TransportError as exc:
                        out.flush()
                        failures += 1
                        if failures >= self.resume_attempts:
                            raise StoreError(f"download of {describe} kept failing ({exc}); run the "
                                             "command again to resume it") from None
            out.flush()
            os.fsync(out.fileno())
        return hasher.hexdigest()

    def _copy(self, response: HttpResponse, out: BinaryIO, hasher: Hash, total: int | None,
              progress: Progress | None) -> None:
        """Append the body to ``out``; TransportError when it stalls (see ``stall_timeout_s``)."""
        mark_time, mark_size = self.clock(), out.tell()
        if progress is not None:
            progress.update(mark_size, total)
        for chunk in response.iter_chunks(_CHUNK):
            out.write(chunk)
            hasher.update(chunk)
            size, now = out.tell(), self.clock()
            if progress is not None:
                progress.update(size, total)
            if size - mark_size >= self.stall_bytes:
                mark_time, mark_size = now, size
            elif now - mark_time >= self.stall_timeout_s:
                raise TransportError(f"stalled: less than {format_size(self.stall_bytes)} in "
                                     f"{self.stall_timeout_s:g} s", retryable=True)

    def prune(self, *, everything: bool = False) -> PruneResult:
        """Remove interrupted downloads and stale locks; with ``everything``, videos too.

        Files of a download that another process is running are left alone, and so is
        anything in the directory that does not follow the cache's own naming.
        """
        try:
            return self._prune(everything)
        except OSError as exc:
            raise StoreError(f"cannot prune the video cache at {self.root}: {exc.strerror or exc}") from None

    def _prune(self, everything: bool) -> PruneResult:
        files = size = busy = 0
        for directory in self._shard_dirs():
            groups: dict[str, list[Path]] = {}
            for entry in directory.iterdir():
                match = _NAME.match(entry.name)
                if match and entry.is_file():
                    groups.setdefault(match.group(1) + (match.group(2) or ""), []).append(entry)
            for name, entries in sorted(groups.items()):
                lock = FileLock(directory / f".{name}.lock")
                try:
                    if not lock.acquire(blocking=False):
                        busy += 1
                        continue
                except OSError:
                    busy += 1
                    continue
                try:
                    for entry in entries:
                        if entry.name.endswith(".lock"):
                            continue
                        if everything or entry.name.endswith(".partial"):
                            size += entry.stat().st_size
                            entry.unlink()
                            files += 1
                    lock.release(remove=True)
                finally:
                    lock.release()
            with contextlib.suppress(OSError):
                directory.rmdir()
        with contextlib.suppress(OSError):
            (self.root / "sha256").rmdir()
        return PruneResult(self.root, files, size, busy)

    def _shard_dirs(self) -> Iterator[Path]:
        base = self.root / "sha256"
        if not base.is_dir():
            return
        for entry in sorted(base.iterdir()):
            if entry.is_dir() and re.fullmatch(r"[0-9a-f]{2}", entry.name):
                yield entry


def _expected_end(response: HttpResponse) -> tuple[int | None, int | None]:
    """(offset one past the body's last byte, size of the whole object), None where unknown."""
    if response.status == 206:
        match = _CONTENT_RANGE.match(response.headers.get("content-range", "").strip())
        if match is None:
            return None, None
        total = match.group(3)
        return int(match.group(2)) + 1, None if total == "*" else int(total)
    raw = response.headers.get("content-length", "").strip()
    length = int(raw) if raw.isascii() and raw.isdigit() else None
    return length, length


def _range_starts_at(response: HttpResponse, start: int) -> bool:
    if response.status != 206:
        return False
    match = _CONTENT_RANGE.match(response.headers.get("content-range", "").strip())
    return match is not None and int(match.group(1)) == start


def _stat_key(path: Path) -> tuple[str, int, int, int, int, int]:
    st = path.stat()
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _verified_hash(path: Path) -> str:
    """The SHA-256 of ``path``, hashed unless this process hashed the very same file state."""
    before = _stat_key(path)
    known = _HASHED.get(before)
    if known is not None:
        return known
    digest = _hash_file(path)
    # Bytes written while we hashed would change the ctime: remember only a stable state.
    if _stat_key(path) == before:
        _HASHED[before] = digest
    return digest


def _remember(path: Path, sha256: str) -> None:
    _HASHED[_stat_key(path)] = sha256


def _hash_file(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def hash_stream(stream: Readable) -> tuple[str, int]:
    hasher = hashlib.sha256()
    size = 0
    for chunk in iter(lambda: stream.read(_CHUNK), b""):
        hasher.update(chunk)
        size += len(chunk)
    return hasher.hexdigest(), size
