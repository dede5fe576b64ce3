"""What a command adapter is sent for a sample: its fields and its frames as base64 PNG.

A clip sample also carries ``frames``: one ``{timestampS, mediaTimestampS, frameIndex, image}``
per clip entry, the image object spelled as the sample's own. Overlapping clips in flight
share their frames' image objects, so :data:`ENCODINGS` encodes each frame once for all of
them and forgets the text when the image object goes away; a stream frame fed to several stream
targets is encoded once the same way.
"""

from __future__ import annotations

import asyncio
import binascii
import io
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..errors import AdapterError
from ..video.png import encode_png, png_pieces
from ._protocol import encode_params, oversized_request_error
from .base import Sample, Target, add_usage, frames_too_large

if TYPE_CHECKING:
    from PIL import Image

#: zlib level for the PNG frames sent to command adapters. PNG is lossless at every
#: level; on 1080p video frames level 1 (run-length matching, see ``video.png``) takes
#: under a quarter of the default level 6's time for ~10% more bytes
#: (numbers in benchmarks/bench_command_adapter.py).
PNG_COMPRESS_LEVEL: Final = 1


def encode_sample(sample: Sample, level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """The protocol's sample object, as JSON bytes, with the frame as base64 PNG."""
    return b"".join(sample_parts(sample, level))


def sample_parts(sample: Sample, level: int = PNG_COMPRESS_LEVEL) -> list[bytes]:
    """:func:`encode_sample` in pieces, for a request line that is joined only once.

    Runs on a worker thread: compression releases the GIL, so frames encode in
    parallel with each other and with decoding. The PNG is base64-encoded piece by
    piece as it is compressed, so neither the PNG nor a second copy of its text is held
    (a clip's frames are the exception: their text is kept for the other clips).
    """
    if sample.is_clip:
        return _clip_parts(sample, level)
    image = sample.image
    width, height = image.size
    fields = dict(sample.wire_fields())
    fields["image"] = {"mimeType": "image/png", "width": width, "height": height}
    head = encode_params(fields)
    # "image" is the last key (json keeps insertion order), so the object ends in "}}".
    # The base64 text needs no JSON escaping, so it is spliced in as bytes instead of
    # making json.dumps scan and copy megabytes of it.
    return [head[:-2], b',"dataBase64":"', *base64_pieces(png_pieces(image, level)), b'"}}']


def shared_png(image: Image.Image, level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """The frame's base64 PNG, made once for every clip or stream that is sent the same image object."""
    return ENCODINGS.text(image, f"png{level}", lambda im: binascii.b2a_base64(encode_png(im, level),
                                                                               newline=False))


def frame_parts(sample: Sample, level: int = PNG_COMPRESS_LEVEL) -> list[bytes]:
    """A stream frame's sample object as a sample's; its PNG made once for all the streams fed it."""
    head = encode_params(sample.wire_fields())
    return [head[:-1], b',"image":', *image_parts(sample.image, "image/png", shared_png(sample.image, level)), b"}"]


def _clip_parts(sample: Sample, level: int) -> list[bytes]:
    def png(image: Image.Image) -> bytes:
        return shared_png(image, level)

    head = encode_params(sample.wire_fields())
    parts = [head[:-1], b',"frames":[']
    for position, frame in enumerate(sample.frames):
        fields = encode_params(frame.wire_fields())
        parts += [b"," if position else b"", fields[:-1], b',"image":',
                  *image_parts(frame.image, "image/png", png(frame.image)), b"}"]
    return [*parts, b'],"image":', *image_parts(sample.image, "image/png", png(sample.image)), b"}"]


def image_parts(image: Image.Image, mime_type: str, text: bytes) -> list[bytes]:
    """The protocol's image object, with ``text`` (base64) spliced in as bytes."""
    width, height = image.size
    head = encode_params({"mimeType": mime_type, "width": width, "height": height})
    return [head[:-1], b',"dataBase64":"', text, b'"}']


def json_image(image: Image.Image, image_format: str = "png", jpeg_quality: int = 90, *,
               shared: bool = False) -> dict[str, Any]:
    """The image object of HTTP and exec requests (PNG or JPEG); ``shared``: a clip frame, encoded once."""
    def encode(im: Image.Image) -> bytes:
        if image_format == "jpeg":
            buffer = io.BytesIO()
            im.save(buffer, format="JPEG", quality=jpeg_quality)
            return binascii.b2a_base64(buffer.getvalue(), newline=False)
        return binascii.b2a_base64(encode_png(im, PNG_COMPRESS_LEVEL), newline=False)

    kind = f"jpeg{jpeg_quality}" if image_format == "jpeg" else f"png{PNG_COMPRESS_LEVEL}"
    text = ENCODINGS.text(image, kind, encode) if shared else encode(image)
    width, height = image.size
    return {"mimeType": "image/jpeg" if image_format == "jpeg" else "image/png", "width": width,
            "height": height, "dataBase64": text.decode("ascii")}


def json_frame(sample: Sample, image_format: str = "png", jpeg_quality: int = 90) -> dict[str, Any]:
    """A stream frame's sample object for HTTP: a sample's, its image made once for all the streams fed it."""
    return {**sample.wire_fields(), "image": json_image(sample.image, image_format, jpeg_quality, shared=True)}


def json_sample(sample: Sample, image_format: str = "png", jpeg_quality: int = 90) -> dict[str, Any]:
    """The sample object of HTTP and exec requests: its fields, ``frames`` for a clip, and ``image``."""
    body = dict(sample.wire_fields())
    if sample.is_clip:
        body["frames"] = [{**frame.wire_fields(), "image": json_image(frame.image, image_format, jpeg_quality,
                                                                       shared=True)}
                          for frame in sample.frames]
    body["image"] = json_image(sample.image, image_format, jpeg_quality, shared=sample.is_clip)
    return body


class FrameEncodings:
    """Encoded frames by image object, kept while the image object lives.

    Thread-safe: a frame wanted by several encoders at once is encoded by the first, and the
    others wait for its text.
    """

    def __init__(self) -> None:
        # Reentrant: the collector may run an image's finalizer (``_forget``) on a thread that holds
        # the lock, at any allocation inside it; a plain lock would deadlock that thread.
        self._lock = threading.RLock()
        self._entries: dict[tuple[int, str], _Encoding] = {}
        #: Encodings made (tests count them).
        self.made = 0

    def text(self, image: Image.Image, kind: str, encode: Callable[[Image.Image], bytes]) -> bytes:
        """``encode(image)``, made once per image object and ``kind`` (the format and its settings)."""
        key = (id(image), kind)
        with self._lock:
            entry = self._entries.get(key)
            mine = entry is None
            if entry is None:
                entry = self._entries[key] = _Encoding()
                # The entry goes before the object's id can name another image.
                weakref.finalize(image, self._forget, key)
        if mine:
            try:
                entry.data = encode(image)
                with self._lock:
                    self.made += 1
            except BaseException:
                with self._lock:
                    self._entries.pop(key, None)
                raise
            finally:
                entry.ready.set()
        entry.ready.wait()
        if entry.data is None:
            return encode(image)  # the first encoder failed: this one reports its own error
        return entry.data

    def _forget(self, key: tuple[int, str]) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)


class _Encoding:
    __slots__ = ("data", "ready")

    def __init__(self) -> None:
        self.data: bytes | None = None
        self.ready = threading.Event()


#: The process's frame encodings (command, HTTP and exec adapters share them).
ENCODINGS = FrameEncodings()


def base64_pieces(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """Standard base64 of the pieces' concatenation, as pieces that join into it."""
    carry = b""
    for piece in pieces:
        data = carry + piece if carry else piece
        cut = len(data) - len(data) % 3  # only whole 3-byte groups encode independently
        carry = data[cut:]
        if cut:
            yield binascii.b2a_base64(memoryview(data)[:cut], newline=False)
    if carry:
        yield binascii.b2a_base64(carry, newline=False)


def share_usage(samples: Sequence[Sample], usage: Any) -> None:
    """A batch's usage: a list gives each sample its own, one object is divided evenly."""
    if usage is None or not samples:
        return
    if isinstance(usage, list):
        for sample, item in zip(samples, usage):
            if item is not None:
                add_usage(sample.usage, item)
        return
    for sample in samples:
        add_usage(sample.usage, {k: v / len(samples) for k, v in usage.items()})


class StreamIds:
    """The id of each target's stream in flight; ids are ``prefix`` and a count, never reused."""

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix
        self._count = 0
        self._ids: dict[str, str] = {}

    def open(self, target: Target) -> str:
        self._count += 1
        self._ids[target.id] = found = f"{self._prefix}{self._count}"
        return found

    def of(self, target: Target) -> str:
        found = self._ids.get(target.id)
        if found is None:
            raise AdapterError(f"no stream of target {target.id!r} was started")
        return found

    def close(self, target: Target) -> str:
        found = self.of(target)
        del self._ids[target.id]
        return found


#: Encoding a batch stops early once its size passes the message limit; frames are encoded this
#: many at a time between checks.
BATCH_ENCODE_STEP: Final = 4


async def batch_params(samples: Sequence[Sample], target: Target, level: int, limit: int,
                       check: Callable[[], None]) -> list[bytes]:
    """An ``evaluateMany`` request's params, as pieces; frames are PNG-encoded on the thread pool.

    ``check`` runs between steps (it raises when the adapter went away); a batch past ``limit``
    raises before the rest of it is encoded.
    """
    loop = asyncio.get_running_loop()
    target_json = encode_params(target.to_wire())
    encoded: list[bytes] = []
    size = len(target_json)
    for start in range(0, len(samples), BATCH_ENCODE_STEP):
        chunk = samples[start : start + BATCH_ENCODE_STEP]
        try:
            encoded += await asyncio.gather(
                *(loop.run_in_executor(None, encode_sample, sample, level) for sample in chunk))
        except MemoryError:
            raise frames_too_large(samples, "encoding the frames as PNG for the command adapter") from None
        size += sum(len(item) + 1 for item in encoded[-len(chunk) :])
        check()
        if size > limit:
            # Stop before holding a batch far larger than could ever be sent.
            raise oversized_request_error("evaluateMany", size, limit, len(samples))
    params = [b'{"samples":[']
    for index, item in enumerate(encoded):
        params += (b",", item) if index else (item,)
    params += (b'],"target":', target_json, b"}")
    return params
