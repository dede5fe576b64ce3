"""Small JPEGs of the frames of failed and errored samples, for the HTML report.

During a run, :class:`ThumbnailStore` is the run loop's frame keeper: it sees the exact image each
adapter call got, before that image is closed, so a thumbnail costs one resize and one small JPEG
encode and never a second decode. ``report`` (from JSON alone) fills the same store from
``--save-failures`` artifacts or by decoding the videos of an eval directory.

Thumbnails are keyed by (case, frame index): every target and trial that failed on the same frame
of the same video shares one picture. The store stops keeping new ones once the embedding budget is
spent, so memory stays bounded by the budget however many samples fail.

A failed clip sample is shown as a filmstrip: its anchor and up to :data:`STRIP_FRAMES` evenly
spaced frames of its clip (:func:`strip_positions`). The keeper gets the clip's frames with the
anchor, still open, so a strip costs no decode either. Strip thumbnails are counted apart from
the anchors' under the same budget, so strips collected early never crowd out a later failure's
only picture; the renderer spends the page's one budget on anchors first.

Beside each thumbnail the store keeps the frame at full resolution (a JPEG, for the report's
lightbox) under the same budget, counted apart: which of them fit in the page is the renderer's
choice, made after every thumbnail (thumbnails first, then full frames with what is left). A frame
no larger than a thumbnail is its own full frame and costs nothing more.

With arms, a frame is also keyed by the pixels its arm saw: a perturbation arm's picture is the
perturbed frame it was handed (:func:`pixel_key`), so the page shows what each arm judged. When the
arms see different pixels, a flip (a sample passing in one arm and not in another) needs the
passing side's picture too: the store makes a thumbnail of each passing variant of a sample and
holds it until every arm has judged that sample (the arms judge a frame at most a few frames apart),
then keeps it only if some arm did not pass.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
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

#: Frames of a failed clip sample's filmstrip besides its anchor, evenly spaced over the clip.
STRIP_FRAMES = 8

ThumbKey = tuple[str, int]

_FAILED = (Status.FAILED, Status.ERROR)


def pixel_key(case: str, frame_index: int, variant: str = "") -> ThumbKey:
    """The key of a frame as one arm saw it: ``variant`` is its perturbation chain ("" for plain pixels)."""
    return (case if not variant else f"{case}\x1f{variant}", frame_index)


def arm_variants(specs: Mapping[str, Mapping[str, object]]) -> dict[str, str]:
    """Arm name -> the perturbation chain its frames went through ("" for plain pixels), from arm specs."""
    return {name: str(spec.get("perturb") or "") for name, spec in specs.items()}


@dataclass
class _Watch:
    """One sample's verdicts so far across the arms, and its passing variants' thumbnails."""

    count: int = 0
    passed: bool = False
    failed: bool = False
    jpegs: dict[str, bytes] = field(default_factory=dict)


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
    except (LoadError, ValueError):  # ValueError: a NUL in the path, which no file can have
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


def strip_positions(result: SampleResult) -> tuple[int, ...]:
    """Entries of ``result.clip`` its filmstrip shows, in time order: the anchor and up to
    :data:`STRIP_FRAMES` evenly spaced entries, the first and last among them (empty without a clip).

    A function of the result alone, so the run that keeps the thumbnails and a later ``report``
    that renders them pick the same frames.
    """
    clip = result.clip
    if clip is None or not clip.frame_indexes:
        return ()
    count = len(clip.frame_indexes)
    anchor = clip.anchor_position(result.timestamp_s, result.frame_index)
    if count <= STRIP_FRAMES + 1:
        return tuple(range(count))
    last = STRIP_FRAMES - 1
    # k * (count - 1) / last rounded half up, in integers.
    spaced = {(2 * k * (count - 1) + last) // (2 * last) for k in range(STRIP_FRAMES)}
    return tuple(sorted(spaced | {anchor}))


def strip_entries(result: SampleResult) -> list[tuple[int, float, int]]:
    """(position, requested time, frame index) of the filmstrip's frames other than the anchor."""
    clip = result.clip
    if clip is None or not clip.frame_indexes:
        return []
    anchor = clip.anchor_position(result.timestamp_s, result.frame_index)
    return [(p, clip.timestamps[p], clip.frame_indexes[p]) for p in strip_positions(result) if p != anchor]


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

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES, *, variants: Mapping[str, str] | None = None,
                 arms: Sequence[str] = ()) -> None:
        self.budget_bytes = budget_bytes
        #: Arm name -> its frames' perturbation chain (see :func:`pixel_key`).
        self.variants = dict(variants or {})
        self._arms = len(arms)
        # Flips need a passing side's picture only when the arms see different pixels.
        self._watch = len({self.variants.get(a, "") for a in arms}) > 1
        self._watched: dict[tuple[str, str, int], _Watch] = {}
        self.used_bytes = 0
        #: Frames that wanted a thumbnail after the budget was spent.
        self.over_budget: set[ThumbKey] = set()
        #: Frames whose thumbnail could not be made (an adapter closed its image, a broken artifact).
        self.failed: set[ThumbKey] = set()
        self._jpegs: dict[ThumbKey, bytes] = {}
        self._frames: dict[ThumbKey, bytes] = {}
        self.frame_bytes = 0
        #: Bytes of the thumbnails kept only as filmstrip frames (counted apart, same budget).
        self.strip_bytes = 0
        self._streams: StreamFrames | None = None

    @property
    def streams(self) -> StreamFrames:
        """The stream engine's keeper of miss and false-alarm frames, keeping them in this store."""
        if self._streams is None:
            from .stream_frames import StreamFrames

            self._streams = StreamFrames(self)
        return self._streams

    @staticmethod
    def thumbnail(image: Any) -> bytes:
        """A thumbnail JPEG of ``image`` as this store keeps them (for keepers that decide later)."""
        return make_thumbnail(image)

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

    def needs_strip(self, key: ThumbKey) -> bool:
        return key not in self._jpegs and key not in self.failed and self.strip_bytes < self.budget_bytes

    def add_strip(self, key: ThumbKey, jpeg: bytes) -> bool:
        """Keep a filmstrip frame's thumbnail while the strips' share of the budget allows."""
        size = data_uri_size(jpeg)
        if self.strip_bytes + size > self.budget_bytes:
            return False
        self._jpegs[key] = jpeg
        self.strip_bytes += size
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

    def key_of(self, result: SampleResult) -> ThumbKey:
        """The key of the frame ``result`` was judged on, as its arm saw it."""
        return pixel_key(result.case, result.frame_index or 0, self.variants.get(result.arm or "", ""))

    def keep(self, result: SampleResult, image: Any, frames: Sequence[Any] = ()) -> None:
        """The run loop's frame keeper; never raises (a thumbnail is not worth a failed run).

        ``frames`` are a clip sample's images, one per clip entry (as ``result.clip``), for its filmstrip.
        """
        if self._watch and result.frame_index is not None and result.evaluated:
            self._watch_flip(result, image)
        if not wants_thumbnail(result):
            return
        key = self.key_of(result)
        try:
            if key in self._jpegs:
                self.add_frame(key, image)  # kept as another clip's strip frame: now it is an anchor
            elif not self.needs(key):
                pass
            elif self.used_bytes >= self.budget_bytes:
                self.over_budget.add(key)
            elif self.add(key, make_thumbnail(image)):
                self.add_frame(key, image)
        except Exception:
            self.failed.add(key)
        if frames and result.clip is not None and len(frames) == len(result.clip.frame_indexes):
            variant = self.variants.get(result.arm or "", "")
            for position, _time, index in strip_entries(result):
                self._keep_strip(pixel_key(result.case, index, variant), frames[position])

    def _keep_strip(self, key: ThumbKey, image: Any) -> None:
        if not self.needs_strip(key):
            return
        try:
            self.add_strip(key, make_thumbnail(image))
        except Exception:
            self.failed.add(key)

    def _watch_flip(self, result: SampleResult, image: Any) -> None:
        sample = result.key
        watch = self._watched.setdefault(sample, _Watch())
        watch.count += 1
        variant = self.variants.get(result.arm or "", "")
        if result.status is Status.PASSED:
            watch.passed = True
            if variant not in watch.jpegs and self.needs(self.key_of(result)):
                with contextlib.suppress(Exception):  # a thumbnail is not worth a failed run
                    watch.jpegs[variant] = make_thumbnail(image)
        else:
            watch.failed = True
        if watch.count < self._arms:
            return
        del self._watched[sample]
        if watch.passed and watch.failed:
            for variant, jpeg in watch.jpegs.items():
                key = pixel_key(result.case, result.frame_index or 0, variant)
                if self.needs(key):
                    self.add(key, jpeg)

    def add_from_artifacts(self, results: Iterable[SampleResult]) -> None:
        """Thumbnails from ``--save-failures`` JPEGs for results that have one and need one
        (a clip result's filmstrip frames from the clip folder beside its anchor's JPEG)."""

        for r in results:
            if not wants_thumbnail(r) or r.artifact_image is None:
                continue
            key = self.key_of(r)
            if self.needs(key):
                self._from_artifact(key, Path(r.artifact_image), strip=False)
            if r.clip is not None:
                variant = self.variants.get(r.arm or "", "")
                for position, _time, index in strip_entries(r):
                    if self.needs_strip(pixel_key(r.case, index, variant)):
                        self._from_artifact(pixel_key(r.case, index, variant),
                                            r.clip.artifact_path(r.artifact_image, position), strip=True)

    def _from_artifact(self, key: ThumbKey, path: Path, *, strip: bool) -> None:
        image = open_artifact_image(path)
        if image is None:
            return  # missing, unreadable or not an image: maybe the videos can still give it
        try:
            if strip:
                self.add_strip(key, make_thumbnail(image))
            elif self.add(key, make_thumbnail(image)):
                self.add_frame(key, image)
        except (OSError, ValueError):
            return
        finally:
            image.close()

    def add_from_videos(self, wanted: Mapping[str, tuple[Path, Iterable[SampleResult]]],
                        pictured: Callable[[SampleResult], bool] = wants_thumbnail) -> list[str]:
        """Decode the frames of failed results (or those ``pictured`` says), per case
        (``case -> (video, results)``), their filmstrip frames included.

        A decoded frame whose index differs from the one the report recorded means the video
        changed since the run; it is not used. Returns a note per case that could not be read.
        """
        from fractions import Fraction

        from ..errors import VideoError
        from ..video.frames import decode_at

        notes: list[str] = []
        for case, (video, results) in wanted.items():
            # requested time -> (frame index the report recorded, whether it is a strip frame)
            by_time: dict[Fraction, list[tuple[int, bool]]] = {}
            for r in results:
                # A video gives plain pixels: a perturbation arm's frame was only ever in its run.
                if not pictured(r) or r.frame_index is None or self.variants.get(r.arm or "", ""):
                    continue
                if self.needs((case, r.frame_index)):
                    by_time.setdefault(Fraction(repr(r.timestamp_s)), []).append((r.frame_index, False))
                for _position, time, index in strip_entries(r):
                    if self.needs_strip((case, index)):
                        by_time.setdefault(Fraction(repr(time)), []).append((index, True))
            if not by_time or (self.used_bytes >= self.budget_bytes and self.strip_bytes >= self.budget_bytes):
                continue
            mismatched = 0
            try:
                for want, frame in decode_at(video, sorted(by_time)):
                    try:
                        for index, strip in by_time[want]:
                            key = (case, frame.index)
                            if index != frame.index:
                                mismatched += 1
                            elif strip:
                                if self.needs_strip(key):
                                    self.add_strip(key, make_thumbnail(frame.image))
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
