"""Decoded frames kept for later use: in memory under a budget, then in a temporary file.

Declaration order calls a case's targets one after the other while one decoder serves
them all, so frames a later target (or a later sample of this one) needs are often
decoded before their turn. They wait here. The first ``memory_budget`` bytes stay as
images; the rest are written as raw pixels to an anonymous temporary file (unlinked at
once, so it is gone when the store closes or the process dies) and read back into a
fresh image when wanted. A frame's slot in the file is reused once its last use took it.

Spilled frames are written with ``os.pwrite`` on an unbuffered file: through a buffered
writer, seeking and writing multi-megabyte frames costs ten times as much.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Hashable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, BinaryIO

from ..video.frames import DecodedFrame

if TYPE_CHECKING:
    from PIL import Image

#: Frames kept as images before the store spills to its file. Small next to the
#: 300 MiB run budget: a 720p frame is 3.7 MB in Pillow, so this holds about 17.
MEMORY_BUDGET = 64 << 20


def image_bytes(width: int, height: int) -> int:
    """What an RGB image of this size occupies in memory (Pillow keeps 4 bytes per pixel)."""
    return width * height * 4


@dataclass
class _Kept:
    index: int
    media_time: Fraction
    image: Image.Image | None  # None: spilled to the file at ``offset``
    offset: int
    size: int
    mode: str
    dims: tuple[int, int]
    uses: int


class FrameStore:
    """Frames keyed by the caller, each with a count of the uses still to come.

    Not thread-safe: one decoding thread owns a store. ``put`` takes ownership of the
    frame's image; ``take`` hands out an image the caller owns (a copy while more uses
    remain, the original with the last one).
    """

    def __init__(self, memory_budget: int = MEMORY_BUDGET, directory: str | None = None) -> None:
        self.memory_budget = memory_budget
        self._directory = directory
        self._kept: dict[Hashable, _Kept] = {}
        self._file: BinaryIO | None = None
        self._end = 0
        self._free: dict[int, list[int]] = {}
        self.in_memory = 0
        #: Statistics for tests and benchmarks.
        self.spilled_frames = 0
        self.peak_file_bytes = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self._kept

    def __len__(self) -> int:
        return len(self._kept)

    def put(self, key: Hashable, frame: DecodedFrame, uses: int) -> None:
        """Keep ``frame`` (its image is the store's now) for ``uses`` takes."""
        self._keep(key, frame, uses, owned=True)

    def put_copy(self, key: Hashable, frame: DecodedFrame, uses: int) -> None:
        """Keep ``frame``'s pixels for ``uses`` takes; its image stays the caller's.

        Cheaper than copying the image and putting the copy when the store spills: the
        pixels go to the file straight from the caller's image.
        """
        self._keep(key, frame, uses, owned=False)

    def serve(self, key: Hashable, frame: DecodedFrame, uses: int) -> DecodedFrame:
        """``frame`` for the use at hand (it stays the caller's), its pixels kept for ``uses`` more."""
        if uses:
            self.put_copy(key, frame, uses)
        return frame

    def _keep(self, key: Hashable, frame: DecodedFrame, uses: int, *, owned: bool) -> None:
        assert uses > 0 and key not in self._kept
        image = frame.image
        dims = image.size
        size = image_bytes(*dims)
        if self.in_memory + size <= self.memory_budget:
            self.in_memory += size
            kept = image if owned else image.copy()
            self._kept[key] = _Kept(frame.index, frame.media_time, kept, 0, size, image.mode, dims, uses)
            return
        data = image.tobytes()
        mode = image.mode
        if owned:
            image.close()
        offset = self._slot(len(data))
        self._write(offset, data)
        self.spilled_frames += 1
        self._kept[key] = _Kept(frame.index, frame.media_time, None, offset, len(data), mode, dims, uses)

    def take(self, key: Hashable) -> DecodedFrame:
        kept = self._kept[key]
        kept.uses -= 1
        last = kept.uses == 0
        if last:
            del self._kept[key]
        if kept.image is not None:
            if last:
                self.in_memory -= kept.size
                return DecodedFrame(kept.index, kept.media_time, kept.image)
            return DecodedFrame(kept.index, kept.media_time, kept.image.copy())
        image = self._read(kept)
        if last:
            self._free.setdefault(kept.size, []).append(kept.offset)
        return DecodedFrame(kept.index, kept.media_time, image)

    def close(self) -> None:
        """Close every image still kept and delete the file."""
        for kept in self._kept.values():
            if kept.image is not None:
                kept.image.close()
        self._kept.clear()
        self.in_memory = 0
        if self._file is not None:
            self._file.close()
            self._file = None

    # -- the file ---------------------------------------------------------------

    def _handle(self) -> BinaryIO:
        if self._file is None:
            # Anonymous: unlinked at once on POSIX, deleted on close elsewhere.
            self._file = tempfile.TemporaryFile(  # noqa: SIM115 - closed by close()
                prefix="glasskit-frames-", dir=self._directory, buffering=0)
        return self._file

    def _slot(self, size: int) -> int:
        free = self._free.get(size)
        if free:
            return free.pop()
        offset = self._end
        self._end += size
        self.peak_file_bytes = max(self.peak_file_bytes, self._end)
        return offset

    def _write(self, offset: int, data: bytes) -> None:
        handle = self._handle()
        if hasattr(os, "pwrite"):
            written = 0
            while written < len(data):
                written += os.pwrite(handle.fileno(), memoryview(data)[written:], offset + written)
        else:  # Windows
            handle.seek(offset)
            handle.write(data)

    def _read(self, kept: _Kept) -> Image.Image:
        from PIL import Image

        handle = self._handle()
        if hasattr(os, "pread"):
            data = os.pread(handle.fileno(), kept.size, kept.offset)
        else:  # Windows
            handle.seek(kept.offset)
            data = handle.read(kept.size)
        if len(data) != kept.size:
            raise OSError("the frame spill file was cut short")
        return Image.frombytes(kept.mode, kept.dims, data)
