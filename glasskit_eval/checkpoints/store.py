"""Durable, append-only checkpoints shared by the long commands, ``run`` and ``seed``.

A checkpoint is a directory ``<eval-dir>/runs/checkpoints/<id>/`` (0700) holding

* ``manifest.json`` (0600, replaced atomically): format version, ``kind``, the
  invocation to restore on resume, fingerprints of the inputs and a status;
* ``records.jsonl`` (0600, append-only): a header line, then one line per
  finished sample, ``<crc32 hex> <json>``, keyed by (trial, case, target,
  sample index), and in a run with arms the arm that made it as a fifth element
  (a plain run's records keep the four-element key older versions read); and one per
  finished stream, keyed by (trial, case, target, ``"stream"``), with arms the arm's name
  fifth. A later record for the same key supersedes an earlier one.

The manifest is written last when a checkpoint is created, so a directory
without one was never usable. Records are written and fsynced by a writer
thread in groups (everything that finished within a few milliseconds, or while
the previous fsync ran, goes into the next one), so durability costs one fsync
per burst instead of one per sample; :meth:`Checkpoint.flush` waits until everything appended so far is on
disk. A torn tail (power loss or SIGKILL mid-write) fails its CRC or has no
newline; it is ignored and cut off before new records are appended.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..errors import CheckpointError, OutputError
from ..support import strictjson
from ..support.fsio import fsync_dir, lock_fd, write_text_atomic
from ..support.jsonvalues import json_problem
from .framing import decode_records, encode_record

FORMAT_NAME = "glasskit_eval-checkpoint"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
RECORDS_NAME = "records.jsonl"
IN_PROGRESS = "in_progress"
COMPLETE = "complete"

#: (trial, case, target, sample_index, arm): one attempt of one sample by one arm (None without arms).
Key = tuple[int, str, str, int, "str | None"]
#: (trial, case, target, arm): one stream (a stream target fed one case's video in one trial, by one arm
#: or None without arms).
StreamKey = tuple[int, str, str, "str | None"]
#: A stream record's last key element, where a sample's index would be.
STREAM = "stream"

#: How long the writer lets results accumulate before one write and fsync. A crash loses at
#: most this much finished work; nothing is reported as saved before its fsync returns.
GROUP_WINDOW_S = 0.005

def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_id(kind: str) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{kind}-{stamp}-{secrets.token_hex(4)}"


def checkpoints_root(eval_dir: Path, override: Path | None = None) -> Path:
    """Where checkpoints go: ``--checkpoint-dir`` (for a read-only eval directory), else the eval's runs/."""
    return override if override is not None else eval_dir / "runs" / "checkpoints"


# --- manifest ---------------------------------------------------------------------------


@dataclass
class Manifest:
    id: str
    kind: str
    eval_dir: str
    invocation: dict[str, Any]
    fingerprints: dict[str, Any]
    total: int
    status: str = IN_PROGRESS
    created_at: str = field(default_factory=utc_now)
    updated_at: str = field(default_factory=utc_now)
    resumes: int = 0
    #: ``run --early-stop --cache``: per trial (as text), per arm ("" in a plain run), the blocks read
    #: from the cache before the trial's first call, fixed then so a resume reads the same ones.
    read_ahead: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "id": self.id, "kind": self.kind,
                "eval_dir": self.eval_dir, "invocation": self.invocation, "fingerprints": self.fingerprints,
                "total": self.total, "status": self.status, "created_at": self.created_at,
                "updated_at": self.updated_at, "resumes": self.resumes} | (
                    {"read_ahead": self.read_ahead} if self.read_ahead else {})

    @classmethod
    def from_json(cls, data: Any, where: Path) -> Manifest:
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise CheckpointError(f"{where} is not a glasskit_eval checkpoint manifest; pass the directory "
                                  "printed after `Checkpoint:`")
        version = data.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise CheckpointError(f"{where}: format_version is missing or not an integer")
        if version > FORMAT_VERSION:
            raise CheckpointError(f"{where} was written by a newer glasskit_eval (checkpoint format "
                                  f"{version}; this version reads up to {FORMAT_VERSION}); upgrade "
                                  "glasskit_eval to resume it, or start a new run")
        # Every field is checked as strictly as we wrote it: a hand-edited manifest must be
        # refused here, not crash whatever reads the field later.
        problem = _manifest_problem(data)
        if problem is not None:
            raise CheckpointError(f"{where} is incomplete or damaged ({problem}); start a new run")
        return cls(id=data["id"], kind=data["kind"], eval_dir=data["eval_dir"],
                   invocation=data["invocation"], fingerprints=data["fingerprints"],
                   total=data["total"], status=data["status"], created_at=data["created_at"],
                   updated_at=data["updated_at"], resumes=data.get("resumes", 0),
                   read_ahead=data.get("read_ahead", {}))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _manifest_problem(data: dict[str, Any]) -> str | None:
    problem = json_problem(data)
    if problem is not None:
        return problem
    for name in ("id", "kind", "eval_dir", "status", "created_at", "updated_at"):
        if name not in data:
            return f"{name} is missing"
        if not isinstance(data[name], str) or not data[name]:
            return f"{name} is not a non-empty string"
    if data["status"] not in (IN_PROGRESS, COMPLETE):
        return f"status is neither {IN_PROGRESS!r} nor {COMPLETE!r}"
    for name in ("invocation", "fingerprints"):
        if not isinstance(data.get(name), dict):
            return f"{name} is missing or not an object"
    for section in ("files", "videos"):
        value = data["fingerprints"].get(section)
        if value is not None and not isinstance(value, dict):
            return f"fingerprints.{section} is not an object"
    if not _is_count(data.get("total")):
        return "total is missing or not a non-negative integer"
    if "resumes" in data and not _is_count(data["resumes"]):
        return "resumes is not a non-negative integer"
    ahead = data.get("read_ahead", {})
    if not (isinstance(ahead, dict) and all(
            trial.isdigit() and isinstance(arms, dict) and all(
                isinstance(ids, list) and all(_is_count(n) for n in ids) for ids in arms.values())
            for trial, arms in ahead.items())):
        return "read_ahead is not an object of trials, arms and block numbers"
    return None


def _record_key(record: dict[str, Any]) -> tuple[Key | StreamKey, bool] | None:
    """The record's key (a sample's or a stream's), or None when the record is not shaped as we write them."""
    key, payload = record.get("key"), record.get("payload")
    if not isinstance(key, list) or len(key) not in (4, 5) or not isinstance(payload, dict):
        return None
    trial, case, target, index = key[:4]
    arm = key[4] if len(key) == 5 else None
    if not (_is_count(trial) and trial >= 1 and isinstance(case, str) and isinstance(target, str)
            and (_is_count(index) or index == STREAM)):
        return None
    if len(key) == 5 and not (isinstance(arm, str) and arm):
        return None
    if index == STREAM:
        return ((trial, case, target, arm), True) if json_problem(payload) is None else None
    if json_problem(payload) is not None or payload.get("arm") != arm:
        return None  # a result's own ``arm`` must be the key's: a record is never reused for another arm
    return (trial, case, target, index, arm), False


# --- the writer -------------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _sync(fd: int) -> None:
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


class _GroupWriter:
    """Appends encoded records on a thread; one write and one fsync per group."""

    def __init__(self, fd: int, where: Path, window_s: float) -> None:
        self._fd = fd
        self._where = where
        self._window = window_s
        self._waiters = 0
        self._cond = threading.Condition()
        self._queue: list[bytes] = []
        self._queued_completed = 0
        self.appended = 0
        self.durable = 0
        self.durable_completed = 0
        self._closing = False
        self._idle = False
        self._error: OutputError | None = None
        self._thread = threading.Thread(target=self._loop, name="glasskit-checkpoint", daemon=True)
        self._thread.start()

    def append(self, line: bytes, completed: bool) -> None:
        with self._cond:
            if self._error is not None:
                raise self._error
            self._queue.append(line)
            self._queued_completed += completed
            self.appended += 1
            if self._idle:  # a busy writer takes the whole queue when its fsync returns
                self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._idle = True
                    self._cond.wait()
                self._idle = False
                if not self._queue:
                    return
                # Results finishing within the window share this fsync, unless someone waits.
                deadline = time.monotonic() + self._window
                while not self._closing and not self._waiters:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                batch, self._queue = self._queue, []
                completed, self._queued_completed = self._queued_completed, 0
            try:
                view = memoryview(b"".join(batch))
                while view:
                    view = view[os.write(self._fd, view):]
                _sync(self._fd)
            except OSError as exc:
                with self._cond:
                    self._error = OutputError(f"cannot write checkpoint {self._where}: {exc.strerror or exc}; "
                                              "free disk space or check permissions")
                    self._closing = True
                    self._cond.notify_all()
                return
            with self._cond:
                self.durable += len(batch)
                self.durable_completed += completed
                self._cond.notify_all()

    def wait(self, target: int) -> None:
        with self._cond:
            self._waiters += 1
            self._cond.notify_all()
            try:
                while self.durable < target and self._error is None:
                    self._cond.wait()
            finally:
                self._waiters -= 1
            if self._error is not None:
                raise self._error

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()


# --- the checkpoint ---------------------------------------------------------------------


def _lock(fd: int, where: Path) -> None:
    if not lock_fd(fd, blocking=False):
        raise CheckpointError(f"checkpoint {where} is in use by another glasskit_eval process; wait for it "
                              "to finish")


class Checkpoint:
    """An open checkpoint: previous records, and an appender for new ones."""

    def __init__(self, path: Path, manifest: Manifest, fd: int, previous: dict[Key, dict[str, Any]],
                 resumed: bool, streams: dict[StreamKey, dict[str, Any]] | None = None) -> None:
        self.path = path
        self.manifest = manifest
        self.previous = previous
        #: Finished streams' records, by (trial, case, target, arm).
        self.streams = streams or {}
        self.resumed = resumed
        self._fd = fd
        self._closed_completed = 0
        self._writer: _GroupWriter | None = _GroupWriter(fd, path / RECORDS_NAME, GROUP_WINDOW_S)

    @property
    def id(self) -> str:
        return self.manifest.id

    # -- creating and opening

    @classmethod
    def create(cls, eval_dir: Path, kind: str, invocation: dict[str, Any], fingerprints: dict[str, Any],
               total: int, *, root: Path | None = None) -> Checkpoint:
        root = checkpoints_root(eval_dir, root)
        manifest = Manifest(id=new_id(kind), kind=kind, eval_dir=str(eval_dir), invocation=invocation,
                            fingerprints=fingerprints, total=total)
        path = root / manifest.id
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.mkdir(mode=0o700)
            os.chmod(path, 0o700)
            fd = os.open(path / RECORDS_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except OSError as exc:
            raise OutputError(f"cannot create checkpoint under {root}: {exc.strerror or exc}") from None
        try:
            _lock(fd, path)
            _write_all(fd, encode_record({"format": FORMAT_NAME, "format_version": FORMAT_VERSION,
                                          "id": manifest.id, "kind": kind}))
            _sync(fd)
            write_text_atomic(path / MANIFEST_NAME, _manifest_text(manifest), mode=0o600)
            fsync_dir(path)
            fsync_dir(root)
        except BaseException as exc:
            os.close(fd)
            shutil.rmtree(path, ignore_errors=True)
            if isinstance(exc, OSError):  # disk full, quota, I/O error: nothing was kept
                raise OutputError(f"cannot create checkpoint under {root}: {exc.strerror or exc}; free disk "
                                  "space, or pass --checkpoint-dir on another file system") from None
            raise
        return cls(path, manifest, fd, {}, resumed=False)

    @classmethod
    def open(cls, path: Path, kind: str) -> Checkpoint:
        manifest = read_manifest(path)
        if manifest.kind != kind:
            raise CheckpointError(f"{path} is a {manifest.kind!r} checkpoint, not a {kind!r} one; resume it "
                                  f"with `{manifest.kind} --resume`")
        if manifest.status == COMPLETE:
            raise CheckpointError(f"checkpoint is already complete: {path}")
        records_path = path / RECORDS_NAME
        limit = strictjson.CHECKPOINT_RECORDS.max_bytes
        try:
            # Checked before opening (a FIFO or a device is never opened for writing) and after.
            strictjson.stat_regular(records_path, limit)
            fd = os.open(records_path, os.O_RDWR | os.O_APPEND | getattr(os, "O_NONBLOCK", 0))
        except strictjson.LoadError as exc:
            raise CheckpointError(f"{records_path} {exc}; start a new run") from None
        except OSError as exc:
            raise CheckpointError(f"cannot open {records_path}: {exc.strerror or exc}") from None
        try:
            try:
                strictjson.check_regular(os.fstat(fd), limit)
                _lock(fd, path)
                data = strictjson.read_fd(fd, limit)
            except strictjson.LoadError as exc:
                raise CheckpointError(f"{records_path} {exc}; start a new run") from None
            decoded = decode_records(data, records_path)
            header = decoded.header or {}
            if header.get("format") != FORMAT_NAME or header.get("id") != manifest.id:
                raise CheckpointError(f"{records_path} does not belong to checkpoint {manifest.id}; "
                                      "start a new run")
            if decoded.torn:
                # Cut the torn tail so new records start on a line of their own.
                os.ftruncate(fd, decoded.good_bytes)
                _sync(fd)
            previous: dict[Key, dict[str, Any]] = {}
            streams: dict[StreamKey, dict[str, Any]] = {}
            for number, record in enumerate(decoded.records, start=2):
                found = _record_key(record)
                if found is None:
                    raise CheckpointError(f"{records_path}: record {number} passes its checksum but is not a "
                                          "record this program writes (edited by hand?); it cannot be resumed "
                                          "safely, start a new run")
                key, stream = found
                if stream:
                    streams[cast(StreamKey, key)] = record["payload"]
                else:
                    previous[cast(Key, key)] = record["payload"]
            manifest.resumes += 1
            manifest.updated_at = utc_now()
            write_text_atomic(path / MANIFEST_NAME, _manifest_text(manifest), mode=0o600)
        except OSError as exc:
            os.close(fd)
            raise CheckpointError(f"cannot resume {path}: {exc.strerror or exc}; free disk space or check "
                                  "permissions") from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, manifest, fd, previous, resumed=True, streams=streams)

    # -- appending

    def append(self, key: Key, payload: Mapping[str, Any], *, completed: bool) -> None:
        """Queue a record; it is durable once :meth:`flush` (or :meth:`wait`) returns.

        ``completed`` marks work that a resume reuses (counted in :attr:`durable_completed`).
        """
        assert self._writer is not None, "checkpoint is closed"
        written = list(key) if key[4] is not None else list(key[:4])
        self._writer.append(encode_record({"key": written, "payload": payload}), completed)

    def append_stream(self, key: StreamKey, payload: Mapping[str, Any], *, completed: bool) -> None:
        """Queue a finished stream's record (see :meth:`append`)."""
        assert self._writer is not None, "checkpoint is closed"
        trial, case, target, arm = key
        written = [trial, case, target, STREAM] if arm is None else [trial, case, target, STREAM, arm]
        self._writer.append(encode_record({"key": written, "payload": payload}), completed)

    def wait(self) -> None:
        if self._writer is not None:
            self._writer.wait(self._writer.appended)

    async def flush(self) -> None:
        if self._writer is not None and self._writer.durable < self._writer.appended:
            await asyncio.to_thread(self.wait)

    @property
    def durable_completed(self) -> int:
        """Completed records made durable by this process."""
        return self._writer.durable_completed if self._writer is not None else self._closed_completed

    # -- finishing

    def fix_read_ahead(self, trial: int, blocks: Mapping[str, list[int]]) -> None:
        """Record a trial's blocks read ahead (durable when this returns)."""
        self.manifest.read_ahead[str(trial)] = {arm: sorted(ids) for arm, ids in blocks.items()}
        self.set_status(self.manifest.status)

    def set_status(self, status: str) -> None:
        self.manifest.status = status
        self.manifest.updated_at = utc_now()
        try:
            write_text_atomic(self.path / MANIFEST_NAME, _manifest_text(self.manifest), mode=0o600)
        except OSError as exc:
            raise OutputError(f"cannot update checkpoint {self.path}: {exc.strerror or exc}; free disk space "
                              "or check permissions") from None

    def close(self) -> None:
        """Write everything queued, stop the writer and release the lock."""
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        try:
            writer.close()
        finally:
            self._closed_completed = writer.durable_completed
            os.close(self._fd)

    def discard(self) -> None:
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)


def _manifest_text(manifest: Manifest) -> str:
    return json.dumps(manifest.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def read_manifest(path: Path) -> Manifest:
    where = path / MANIFEST_NAME
    try:
        data = strictjson.load(where, strictjson.CHECKPOINT_MANIFEST)
    except strictjson.NotFound:
        raise CheckpointError(f"could not read checkpoint manifest {where}: no such file; pass the directory "
                              "printed after `Checkpoint:`") from None
    except strictjson.LoadError as exc:
        raise CheckpointError(f"checkpoint manifest {exc.located(str(where))}; start a new run") from None
    return Manifest.from_json(data, where)


def resolve(value: str, eval_dir: Path, checkpoint_dir: Path | None = None) -> Path:
    """A ``--resume`` value: a checkpoint directory, or an id under the checkpoints root."""
    candidate = Path(value).expanduser()
    if candidate.is_dir() or os.sep in value or (os.altsep and os.altsep in value):
        return candidate.resolve()
    return (checkpoints_root(eval_dir, checkpoint_dir) / value).resolve()
