"""Small JPEGs of the frames of failed and errored samples, for the HTML report.

During a run, :class:`ThumbnailStore` is the run loop's frame keeper: it sees the exact image each
adapter call got, before that image is closed, so a thumbnail costs one resize and one small JPEG
encode and never a second decode. ``report`` (from JSON alone) fills the same store from
``--save-failures`` artifacts or by decoding the videos of an eval directory.

Thumbnails are keyed by (case, frame index): every target and trial that failed on the same frame
of the same clip shares one picture. The store stops keeping new ones once the embedding budget is
spent, so memory stays bounded by the budget however many samples fail.

Beside each thumbnail the store keeps the frame at full resolution (a JPEG, for the report's
lightbox) under the same budget, counted apart: which of them fit in the page is the renderer's
choice, made after every thumbnail (thumbnails first, then full frames with what is left). A frame
no larger than a thumbnail is its own full frame and costs nothing more.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results import SampleResult, Status

if TYPE_CHECKING:
    from .stream_frames import StreamFrames

#: Longest side of a thumbnail, in pixels.
THUMBNAIL_SIDE = 320
JPEG_QUALITY = 80
#: Quality of the full-resolution frames (the --save-failures artifacts use the same).
FULL_QUALITY = 90
#: Default size budget for the embedded thumbnails (their data URIs), in bytes.
DEFAULT_BUDGET_BYTES = 25 * 1000 * 1000

#: A ``--save-failures`` image larger than this (bytes, pixels) named in a report is not embedded.
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
MAX_ARTIFACT_PIXELS = 64 * 1024 * 1024

ThumbKey = tuple[str, int]

_FAILED = (Status.FAILED, Status.ERROR)


def open_artifact_image(path: Path) -> Any:
    """The decoded image a report's ``artifact_image`` names, or None unless it is a regular JPEG or PNG
    file of at most :data:`MAX_ARTIFACT_BYTES` and :data:`MAX_ARTIFACT_PIXELS`.

    The path comes from a report, which anyone may have edited: a FIFO, ``/dev/zero`` or a huge
    file must be neither read nor embedded, so the file goes through the strict loader's checks.
    """
    from PIL import Image

    from ..support.strictjson import LoadError, read_file

    try:
        data = read_file(path, MAX_ARTIFACT_BYTES)
    except LoadError:
        return None
    try:
        image = Image.open(io.BytesIO(data), formats=("JPEG", "PNG"))
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    try:
        width, height = image.size
        if width * height > MAX_ARTIFACT_PIXELS:
            raise ValueError("too many pixels")
        image.load()
    except (OSError, ValueError, Image.DecompressionBombError):
        image.close()
        return None
    return image


def wants_thumbnail(result: SampleResult) -> bool:
    return result.status in _FAILED and result.frame_index is not None


def data_uri_size(jpeg: bytes) -> int:
    """Bytes a JPEG takes in the report as a base64 data URI."""
    return len("data:image/jpeg;base64,") + 4 * ((len(jpeg) + 2) // 3)


def make_jpeg(image: Any, quality: int = FULL_QUALITY) -> bytes:
    """JPEG of ``image`` (a PIL image, left untouched) at its own size."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    try:
        buffer = io.BytesIO()
        rgb.save(buffer, format="JPEG", quality=quality)
        return buffer.getvalue()
    finally:
        if rgb is not image:
            rgb.close()


def make_thumbnail(image: Any) -> bytes:
    """JPEG of ``image`` (a PIL image, left untouched) with its longest side at most THUMBNAIL_SIDE."""
    from PIL import Image

    width, height = image.size
    longest = max(width, height, 1)
    small = image
    # A box reduction by the whole factor first (a fifth of a bilinear resize's cost at 720p),
    # then a small bilinear step for what is left; both return new images.
    factor = longest // THUMBNAIL_SIDE
    if factor >= 2:
        small = image.reduce(factor)
    if max(small.size) > THUMBNAIL_SIDE:
        scale = THUMBNAIL_SIDE / longest
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        resized = small.resize(size, Image.Resampling.BILINEAR)
        if small is not image:
            small.close()
        small = resized
    try:
        return make_jpeg(small, JPEG_QUALITY)
    finally:
        if small is not image:
            small.close()


class ThumbnailStore(Mapping[ThumbKey, bytes]):
    """Thumbnails by (case, frame index), kept until their data URIs would exceed ``budget_bytes``."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.budget_bytes = budget_bytes
        self.used_bytes = 0
        #: Frames that wanted a thumbnail after the budget was spent.
        self.over_budget: set[ThumbKey] = set()
        #: Frames whose thumbnail could not be made (an adapter closed its image, a broken artifact).
        self.failed: set[ThumbKey] = set()
        self._jpegs: dict[ThumbKey, bytes] = {}
        self._frames: dict[ThumbKey, bytes] = {}
        self.frame_bytes = 0
        self._streams: StreamFrames | None = None

    @property
    def streams(self) -> StreamFrames:
        """The stream engine's keeper of miss and false-alarm frames, keeping them in this store."""
        if self._streams is None:
            from .stream_frames import StreamFrames

            self._streams = StreamFrames(self)
        return self._streams

    @property
    def frames(self) -> Mapping[ThumbKey, bytes]:
        """Full-resolution JPEGs by key; a thumbnail that is the whole frame stands for itself."""
        return self._frames

    def __getitem__(self, key: ThumbKey) -> bytes:
        return self._jpegs[key]

    def __iter__(self) -> Iterator[ThumbKey]:
        return iter(self._jpegs)

    def __len__(self) -> int:
        return len(self._jpegs)

    def needs(self, key: ThumbKey) -> bool:
        return key not in self._jpegs and key not in self.over_budget and key not in self.failed

    def add(self, key: ThumbKey, jpeg: bytes) -> bool:
        size = data_uri_size(jpeg)
        if self.used_bytes + size > self.budget_bytes:
            self.over_budget.add(key)
            return False
        self._jpegs[key] = jpeg
        self.used_bytes += size
        return True

    def add_frame(self, key: ThumbKey, image: Any) -> None:
        """Keep ``image`` at full resolution while the budget allows (after its thumbnail)."""
        if key in self._frames or key not in self._jpegs:
            return
        if max(image.size) <= THUMBNAIL_SIDE:
            self._frames[key] = self._jpegs[key]
            return
        if self.frame_bytes >= self.budget_bytes:
            return
        jpeg = make_jpeg(image)
        size = data_uri_size(jpeg)
        if self.frame_bytes + size <= self.budget_bytes:
            self._frames[key] = jpeg
            self.frame_bytes += size

    def keep(self, result: SampleResult, image: Any) -> None:
        """The run loop's frame keeper; never raises (a thumbnail is not worth a failed run)."""
        if not wants_thumbnail(result):
            return
        assert result.frame_index is not None
        key = (result.case, result.frame_index)
        if not self.needs(key):
            return
        if self.used_bytes >= self.budget_bytes:
            self.over_budget.add(key)
            return
        try:
            if self.add(key, make_thumbnail(image)):
                self.add_frame(key, image)
        except Exception:
            self.failed.add(key)

    def add_from_artifacts(self, results: Iterable[SampleResult]) -> None:
        """Thumbnails from ``--save-failures`` JPEGs for results that have one and need one."""

        for r in results:
            if not wants_thumbnail(r) or r.artifact_image is None:
                continue
            assert r.frame_index is not None
            key = (r.case, r.frame_index)
            if not self.needs(key):
                continue
            image = open_artifact_image(Path(r.artifact_image))
            if image is None:
                continue  # missing, unreadable or not an image: maybe the videos can still give it
            try:
                if self.add(key, make_thumbnail(image)):
                    self.add_frame(key, image)
            except (OSError, ValueError):
                continue
            finally:
                image.close()

    def add_from_videos(self, wanted: Mapping[str, tuple[Path, Iterable[SampleResult]]]) -> list[str]:
        """Decode the frames of failed results, per case (``case -> (video, results)``).

        A decoded frame whose index differs from the one the report recorded means the video
        changed since the run; it is not used. Returns a note per case that could not be read.
        """
        from fractions import Fraction

        from ..errors import VideoError
        from ..video.frames import decode_at

        notes: list[str] = []
        for case, (video, results) in wanted.items():
            by_time: dict[Fraction, list[SampleResult]] = {}
            for r in results:
                if wants_thumbnail(r) and r.frame_index is not None and self.needs((case, r.frame_index)):
                    by_time.setdefault(Fraction(repr(r.timestamp_s)), []).append(r)
            if not by_time or self.used_bytes >= self.budget_bytes:
                continue
            mismatched = 0
            try:
                for want, frame in decode_at(video, sorted(by_time)):
                    try:
                        for r in by_time[want]:
                            key = (case, frame.index)
                            if r.frame_index != frame.index:
                                mismatched += 1
                            elif self.needs(key) and self.add(key, make_thumbnail(frame.image)):
                                self.add_frame(key, frame.image)
                    finally:
                        frame.image.close()
            except VideoError as exc:
                notes.append(f"{case}: could not decode {video} for thumbnails: {exc}")
                continue
            if mismatched:
                notes.append(f"{case}: {mismatched} frame(s) of {video} differ from the report's frame "
                             "indices (the video changed since the run); those thumbnails are left out")
        return notes
