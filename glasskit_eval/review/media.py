"""Video bytes, exact frames, the frame table and thumbnails for the review page.

Frames come from the same engine as ``run`` (``decode_at``), so what the page
shows as "exact eval frame N" is the image an adapter gets. The frame table is
only a navigation aid (where the next frame starts); the frame index and media
time the page displays always come back from the decoder itself.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import VideoError

CONTENT_TYPES = {
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
    ".mov": "video/quicktime",
    ".webm": "video/webm",
    ".mkv": "video/x-matroska",
}

THUMB_HEIGHT = 72
MAX_THUMBS = 15


def content_type(path: Path) -> str:
    return CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")


@dataclass(frozen=True)
class FileStamp:
    """What identifies one version of a file for caching and ETags."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileStamp:
        try:
            st = os.stat(path)
        except OSError:
            raise VideoError(f"video not found: {path}") from None
        return cls(st.st_size, st.st_mtime_ns, st.st_ino)

    @property
    def etag(self) -> str:
        digest = hashlib.sha256(f"{self.size}:{self.mtime_ns}:{self.inode}".encode()).hexdigest()
        return f'"{digest[:32]}"'


# --- byte ranges (RFC 9110 section 14) -----------------------------------------------------


class RangeNotSatisfiable(Exception):
    pass


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """One ``bytes=`` range as inclusive (first, last); None means send the whole file.

    Multiple ranges are answered with the whole file, which the RFC allows and
    which every media element accepts. Raises RangeNotSatisfiable for a range
    that starts past the end.
    """
    if header is None:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first_s, dash, last_s = spec.strip().partition("-")
    if not dash:
        return None
    try:
        if first_s == "":
            suffix = int(last_s)
            if suffix <= 0:
                raise RangeNotSatisfiable()
            return max(0, size - suffix), size - 1
        first = int(first_s)
        last = int(last_s) if last_s else size - 1
    except ValueError:
        return None
    if first >= size:
        raise RangeNotSatisfiable()
    if first < 0 or last < first:
        return None
    return first, min(last, size - 1)


def if_range_allows(header: str | None, etag: str) -> bool:
    """If-Range with our current ETag keeps the range; anything else (or a date) sends it all."""
    return header is None or header.strip() == etag


# --- frame table -----------------------------------------------------------------------------


def frame_table(path: Path) -> tuple[Fraction, ...]:
    """Rebased presentation times of every frame: the frame engine's timeline, so stepping in the
    page lands on exactly the frames `run` selects (estimated from the frame rate for a video
    without timestamps, as the decoder does)."""
    from ..video.frametable import frame_table as engine_table
    from ..video.timeline import timeline

    return timeline(engine_table(path)).times


# --- exact frames ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FrameImage:
    requested: Fraction
    index: int
    media_time: Fraction
    pixel_hash: str
    width: int
    height: int
    png: bytes


def pixel_hash(image: Any) -> str:
    """SHA-256 of the decoded RGB pixels (with size and mode): equal hash, equal frame."""
    digest = hashlib.sha256(f"{image.mode}:{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


class FrameCache:
    """Decoded frames and thumbnails, bounded, keyed by file version and requested time."""

    def __init__(self, max_frames: int = 64, max_thumbs: int = 512, max_decoders: int = 2) -> None:
        self._frames: OrderedDict[tuple[Any, ...], FrameImage] = OrderedDict()
        self._thumbs: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._max_frames = max_frames
        self._max_thumbs = max_thumbs
        self._lock = threading.Lock()
        # Decoding is CPU-heavy; a user holding an arrow key must not start dozens at once.
        self._decoders = threading.BoundedSemaphore(max_decoders)

    def frame(self, path: Path, time: Fraction) -> FrameImage:
        from ..video.frames import decode_at
        from ..video.png import encode_png

        key = (str(path), FileStamp.of(path), time)
        with self._lock:
            hit = self._frames.get(key)
            if hit is not None:
                self._frames.move_to_end(key)
                return hit
        with self._decoders:
            for _want, decoded in decode_at(path, [time]):
                image = decoded.image
                try:
                    result = FrameImage(time, decoded.index, decoded.media_time, pixel_hash(image),
                                        image.width, image.height, encode_png(image, level=1))
                finally:
                    image.close()
                break
            else:  # pragma: no cover - decode_at yields once per requested time
                raise VideoError(f"no frame decoded from {path}")
        with self._lock:
            self._frames[key] = result
            while len(self._frames) > self._max_frames:
                self._frames.popitem(last=False)
        return result

    def thumbnails(self, path: Path, times: Sequence[Fraction]) -> list[dict[str, Any]]:
        """Small JPEG data URLs for the filmstrip, decoded in one pass."""
        from ..video.frames import decode_at

        stamp = FileStamp.of(path)
        out: dict[Fraction, dict[str, Any]] = {}
        missing: list[Fraction] = []
        with self._lock:
            for t in times:
                hit = self._thumbs.get((str(path), stamp, t))
                if hit is not None:
                    out[t] = hit
                else:
                    missing.append(t)
        if missing:
            with self._decoders:
                for want, decoded in decode_at(path, missing):
                    try:
                        entry = _thumb_entry(want, decoded.index, decoded.media_time, decoded.image)
                    finally:
                        decoded.image.close()
                    out[want] = entry
                    with self._lock:
                        self._thumbs[(str(path), stamp, want)] = entry
                        while len(self._thumbs) > self._max_thumbs:
                            self._thumbs.popitem(last=False)
        return [out[t] for t in times]


def _thumb_entry(want: Fraction, index: int, media_time: Fraction, image: Any) -> dict[str, Any]:
    import io

    width = max(1, round(image.width * THUMB_HEIGHT / max(1, image.height)))
    small = image.resize((width, THUMB_HEIGHT))
    buffer = io.BytesIO()
    small.convert("RGB").save(buffer, format="JPEG", quality=70)
    small.close()
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return {"requested_s": float(want), "frame_index": index, "media_time_s": float(media_time),
            "src": f"data:image/jpeg;base64,{data}"}
