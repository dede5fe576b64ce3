"""``video-store pull/upload/prune-cache``: the cloud video commands."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

import yaml

from ..cases.evaldir import load_cases, open_eval_dir
from ..cases.model import VIDEO_SUFFIXES, CloudVideo
from ..errors import PreconditionFailed, StoreError, UsageError
from ..evaluation.observation_store import (
    DEFAULT_MAX_MB,
    ObservationStore,
    default_observation_dir,
)
from ..plan.videos import StoreEnv, download_video, store_config
from ..store.progress import format_size
from ..store.s3 import ObjectInfo, Part, S3Client
from ..store.video_cache import hash_stream

MIB = 1024 * 1024
#: Files above this size go up in parts, so a dropped connection costs one part, not the file.
MULTIPART_THRESHOLD = 64 * MIB
PART_SIZE = 16 * MIB
_MIN_PART_SIZE = 5 * MIB
_MAX_PARTS = 10_000
_PLAIN_YAML = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


def pull(eval_dir: str | Path, case: str | None, out: TextIO, err: TextIO, *,
         env: StoreEnv | None = None) -> list[Path]:
    """Download every cloud video of the selected cases; prints each distinct cached path."""
    ed = open_eval_dir(eval_dir)
    cases = load_cases(ed, ed.select_case_paths(case), allow_empty=True)
    videos: dict[tuple[str, str, str], CloudVideo] = {}
    for c in cases:
        if isinstance(c.video, CloudVideo):
            videos.setdefault((c.video.store, c.video.key, c.video.sha256), c.video)
    if not videos:
        print("No selected case uses a cloud video; nothing to pull.", file=out)
        return []
    paths: list[Path] = []
    for video in videos.values():
        path = download_video(video, ed.config, env=env, notify=lambda m: print(m, file=err), terminal=err)
        if path not in paths:
            paths.append(path)
            print(path, file=out)
    return paths


def video_block(store: str, key: str, sha256: str) -> str:
    return (f"video:\n  store: {_yaml_scalar(store)}\n  key: {_yaml_scalar(key)}\n"
            f"  sha256: {_yaml_scalar(sha256)}\n")


def _yaml_scalar(text: str) -> str:
    """Plain when YAML reads it back as the same string, else double-quoted (JSON is valid YAML)."""
    if _PLAIN_YAML.match(text):
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class UploadResult:
    store: str
    key: str
    sha256: str
    size: int
    existed: bool

    @property
    def block(self) -> str:
        return video_block(self.store, self.key, self.sha256)


def upload(source: str | Path, store_name: str, key: str | None, eval_dir: str | Path, out: TextIO, *,
           env: StoreEnv | None = None, multipart_threshold: int = MULTIPART_THRESHOLD,
           part_size: int = PART_SIZE) -> UploadResult:
    """Upload a local video without ever overwriting another object; prints the ``video:`` block."""
    env = env or StoreEnv()
    config = open_eval_dir(eval_dir).config
    store = store_config(config, store_name)
    path = Path(source).expanduser()
    if not path.is_file():
        raise UsageError(f"video file {path} does not exist; pass the path of a local recording")
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise UsageError(f"unsupported video suffix {path.suffix or '(none)'!r} for {path}; supported: "
                         + ", ".join(VIDEO_SUFFIXES))
    try:
        with open(path, "rb") as handle:
            sha256, size = hash_stream(handle)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    key = key if key is not None else f"{sha256}{path.suffix.lower()}"
    _check_key(key)
    client = env.client(store, action="uploading to")
    existing = client.head(key)
    if existing is not None:
        result = _existing(client, existing, key, sha256, size)
    else:
        try:
            if size > multipart_threshold:
                _multipart(client, key, path, size, sha256, part_size)
            else:
                client.put_file(key, path, size, sha256)
            result = UploadResult(store.name, key, sha256, size, existed=False)
        except PreconditionFailed:
            # Someone (or our own retried request) created it meanwhile: same rules as before.
            found = client.head(key)
            if found is None:
                raise StoreError(f"uploading {key!r} to {client.where()} was refused because an "
                                 "object appeared and vanished at that key; retry") from None
            result = _existing(client, found, key, sha256, size)
        if not result.existed:
            _verify(client, key, sha256, size)
    if result.existed:
        print("Object already exists with matching size and SHA-256.", file=out)
    print(result.block, file=out, end="")
    return result


def _check_key(key: str) -> None:
    if not key or len(key.encode("utf-8")) > 1024:
        raise UsageError("--key must be 1 to 1024 bytes long")
    if Path(key).suffix.lower() not in VIDEO_SUFFIXES:
        raise UsageError(f"--key {key!r} must end with a video suffix ({', '.join(VIDEO_SUFFIXES)}) so "
                         "case files can reference it")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise UsageError(f"--key {key!r} contains control characters")


def _existing(client: S3Client, info: ObjectInfo, key: str, sha256: str, size: int) -> UploadResult:
    if info.size == size and info.sha256 == sha256:
        return UploadResult(client.store.name, key, sha256, size, existed=True)
    why = ("it has no SHA-256 metadata to compare" if info.sha256 is None
           else "its size or SHA-256 differ from this file")
    raise StoreError(f"refusing to overwrite the existing object {key!r} in {client.where()}: {why}. "
                     "Choose another --key, or omit --key to use the content-addressed default")


def _verify(client: S3Client, key: str, sha256: str, size: int) -> None:
    info = client.head(key)
    if info is None or info.size != size or (info.sha256 is not None and info.sha256 != sha256):
        raise StoreError(f"the upload of {key!r} to {client.where()} did not verify afterwards "
                         f"(expected {size} bytes with SHA-256 {sha256}); check the store and retry")


def _multipart(client: S3Client, key: str, path: Path, size: int, sha256: str, part_size: int) -> None:
    part_size = max(part_size, _MIN_PART_SIZE, -(-size // _MAX_PARTS))
    upload_id = client.create_multipart(key, sha256)
    try:
        parts: list[Part] = []
        with open(path, "rb") as handle:
            for number, offset in enumerate(range(0, size, part_size), start=1):
                length = min(part_size, size - offset)
                handle.seek(offset)
                part_sha, read = hash_stream(_Limited(handle, length))
                if read != length:
                    raise StoreError(f"{path} changed while uploading; retry")
                parts.append(client.upload_part(key, upload_id, number, path, offset, length, part_sha))
        client.complete_multipart(key, upload_id, parts)
    except BaseException:
        # An abandoned upload still costs storage until aborted.
        with contextlib.suppress(Exception):
            client.abort_multipart(key, upload_id)
        raise


class _Limited:
    def __init__(self, handle: BinaryIO, length: int) -> None:
        self._handle = handle
        self._left = length

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        data = self._handle.read(min(size, self._left) if size >= 0 else self._left)
        self._left -= len(data)
        return data


def prune_cache(everything: bool, out: TextIO, *, env: StoreEnv | None = None) -> None:
    env = env or StoreEnv()
    result = env.cache().prune(everything=everything)
    print(f"Removed {result.files} cached files ({format_size(result.bytes)}) from {result.root}", file=out)
    if result.busy:
        print(f"Skipped {result.busy} downloads in progress in other processes.", file=out)


def prune_observations(cache: str | None, max_mb: int | None, everything: bool, out: TextIO) -> None:
    """``prune-cache --observations``: the observation cache of ``run --cache``, least recently used first."""
    root = Path(cache).expanduser() if cache else default_observation_dir()
    limit = 0 if everything else (DEFAULT_MAX_MB if max_mb is None else max_mb) * 1024 * 1024
    stats = ObservationStore(root).prune(limit)
    print(f"Removed {stats.files} observation cache entries ({format_size(stats.bytes)}) from {root}; "
          f"{format_size(stats.kept_bytes)} kept", file=out)
