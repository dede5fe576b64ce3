"""Atomic file replacement, directory fsync and the one file lock every writer uses.

A reader sees the old file or the new one, never half of one.

Every file we write (case files, reports, checkpoints' manifests, exported frames,
failure artifacts) goes through :func:`replace_file`: a temporary file next to the
target, fsynced, renamed over it, and the directory fsynced so the rename survives a
power cut. An existing file keeps its permissions (and owner, where we may set it);
a new one gets the umask's permissions, not a temp file's 0600.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import sys
from pathlib import Path

from ..errors import OutputError


def replace_file(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Atomically replace ``path`` with ``data``; raises OSError (nothing changed) on failure.

    A symlink is followed: its target is replaced and the link kept (a case file shared
    through a link must get the edit). A destination that exists and is not a regular file
    (``/dev/null``, ``/dev/stdout``, a FIFO, ``>(wc -c)``) is written through, never renamed
    over: replacing a device node or a pipe with a regular file breaks whoever reads it.
    """
    path = Path(path)
    try:
        st: os.stat_result | None = path.stat()  # follows links
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        with open(path, "wb") as handle:  # through to the device or pipe
            handle.write(data)
        return
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif st is not None:
            os.chmod(tmp, st.st_mode & 0o7777)
        if st is not None:
            with contextlib.suppress(OSError, AttributeError):
                os.chown(tmp, st.st_uid, st.st_gid)  # only works where we may; best effort
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def _create_temp(path: Path) -> tuple[int, str]:
    # Not mkstemp: its 0o600 would stick to a new file; 0o666 lets the umask decide.
    for _attempt in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file next to {path}")


def fsync_dir(directory: Path) -> None:
    # Makes a rename durable; not possible on every platform or filesystem.
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_bytes_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    path = Path(path)
    try:
        if not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data, mode=mode)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_text_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode)


# --- locks ----------------------------------------------------------------------------


class FileLock:
    """An exclusive advisory lock on a lock file (flock on POSIX, msvcrt on Windows).

    The lock file may be deleted by ``prune-cache``; after locking we check that
    the path still names the file we locked, and lock again if not.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, *, blocking: bool = True) -> bool:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            if not lock_fd(fd, blocking):
                os.close(fd)
                return False
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return True
            os.close(fd)

    def release(self, *, remove: bool = False) -> None:
        if self._fd is None:
            return
        if remove:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        unlock_fd(self._fd)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_fd(fd: int, blocking: bool) -> bool:
    """An exclusive lock on an open file (flock on POSIX, a one-byte msvcrt lock on Windows).

    Returns False when ``blocking`` is False and another process holds it.
    """
    if sys.platform == "win32":
        import msvcrt
        import time

        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                if not blocking:
                    return False
                time.sleep(0.1)
    else:
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True


def unlock_fd(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        with contextlib.suppress(OSError):
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
